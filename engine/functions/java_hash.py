"""Java's hash codes and ``java.util.HashMap``'s iteration order, for functions whose results
show the order in which ksqlDB's Java bodies walk a map (REDUCE over a MAP).

A ``HashMap`` iterates its table's buckets in index order and each bucket's entries in the
order they were put (resizes split a bucket and keep that order). A bucket is the key's
``hashCode()`` spread as ``h ^ (h >>> 16)``, masked by the table's size; the size starts from
the capacity the map was built with and doubles when the entries outgrow three quarters of
it, or when one bucket collects nine entries in a table smaller than 64. Bins turned into
trees (nine entries in one bucket of a table of 64 or more) are not modelled: their entries
keep the order they were put in.

This module imports no pyspark and nothing from the upper layer.
"""

from __future__ import annotations

import decimal
import math
import struct
from collections.abc import Sequence
from typing import Any

from engine.plan import types as T
from engine.plan.types import SqlType

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_DEFAULT_CAPACITY = 16
_MAXIMUM_CAPACITY = 1 << 30
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64
_INT_MAX = 2**31 - 1
_LONG_MIN = -(2**63)


def _fold_long(bits: int) -> int:
    """``(int) (v ^ (v >>> 32))`` of a Java ``long``, as Long and Double hash."""
    bits &= _MASK64
    return (bits ^ (bits >> 32)) & _MASK32


def _string_hash(value: str) -> int:
    """``String.hashCode()``: over UTF-16 code units, in 32-bit arithmetic."""
    encoded = value.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(encoded), 2):
        h = (31 * h + (encoded[i] << 8 | encoded[i + 1])) & _MASK32
    return h


def _big_integer_hash(value: int) -> int:
    """``BigInteger.hashCode()``: over the magnitude's 32-bit words, big end first, times the sign."""
    magnitude = abs(value)
    words = []
    while magnitude:
        words.append(magnitude & _MASK32)
        magnitude >>= 32
    h = 0
    for word in reversed(words):
        h = (31 * h + word) & _MASK32
    return (h * (1 if value >= 0 else -1)) & _MASK32


def _decimal_hash(value: decimal.Decimal) -> int:
    """``BigDecimal.hashCode()``: from the unscaled value and the scale."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    scale = -exponent
    if -(2**63) < unscaled < 2**63:  # BigDecimal keeps it compact (intCompact)
        magnitude = abs(unscaled)
        temp = ((magnitude >> 32) * 31 + (magnitude & _MASK32)) & _MASK32
        if unscaled < 0:
            temp = -temp & _MASK32
        return (31 * temp + scale) & _MASK32
    return (31 * _big_integer_hash(unscaled) + scale) & _MASK32


def java_hash_code(value: Any, sql_type: SqlType | None) -> int | None:
    """The ``hashCode()`` of the Java object ksqlDB holds for ``value`` of ``sql_type``, as an
    unsigned 32-bit int (0 for NULL, as HashMap hashes a null key); None for a type whose
    hash is not modelled."""
    if value is None:
        return 0
    base = sql_type.base if sql_type is not None else None
    if base is T.BaseType.STRING and isinstance(value, str):
        return _string_hash(value)
    if base is T.BaseType.BOOLEAN:
        return 1231 if value else 1237
    if base is T.BaseType.INTEGER:
        return int(value) & _MASK32
    if base is T.BaseType.BIGINT:
        return _fold_long(int(value))
    if base is T.BaseType.DOUBLE:
        number = float(value)
        bits = 0x7FF8000000000000 if math.isnan(number) else struct.unpack(">q", struct.pack(">d", number))[0]
        return _fold_long(bits)
    if base is T.BaseType.DECIMAL and isinstance(value, decimal.Decimal):
        return _decimal_hash(value)
    return None


def _table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the power of two at or above ``capacity`` (1 for 0)."""
    if capacity <= 1:
        return 1
    return min(1 << (capacity - 1).bit_length(), _MAXIMUM_CAPACITY)


class _Table:
    """The bucket layout of a HashMap, as its ``putVal`` and ``resize`` move entries."""

    def __init__(self, initial_capacity: int | None) -> None:
        self.buckets: list[list[tuple[int, int]]] = []
        self.threshold = 0 if initial_capacity is None else _table_size_for(initial_capacity)
        self.size = 0

    def resize(self) -> None:
        old_cap = len(self.buckets)
        old_thr = self.threshold
        new_thr = 0
        if old_cap > 0:
            if old_cap >= _MAXIMUM_CAPACITY:
                self.threshold = _INT_MAX
                return
            new_cap = old_cap << 1
            if new_cap < _MAXIMUM_CAPACITY and old_cap >= _DEFAULT_CAPACITY:
                new_thr = old_thr << 1
        elif old_thr > 0:
            new_cap = old_thr
        else:
            new_cap, new_thr = _DEFAULT_CAPACITY, int(_DEFAULT_CAPACITY * 0.75)
        if new_thr == 0:
            limit = new_cap * 0.75
            new_thr = int(limit) if new_cap < _MAXIMUM_CAPACITY and limit < _MAXIMUM_CAPACITY else _INT_MAX
        self.threshold = new_thr
        buckets: list[list[tuple[int, int]]] = [[] for _ in range(new_cap)]
        for bucket in self.buckets:  # each old bucket splits in two, keeping its order
            for entry in bucket:
                buckets[entry[0] & (new_cap - 1)].append(entry)
        self.buckets = buckets

    def put(self, spread: int, position: int) -> None:
        if not self.buckets:
            self.resize()
        bucket = self.buckets[spread & (len(self.buckets) - 1)]
        bucket.append((spread, position))
        if len(bucket) > _TREEIFY_THRESHOLD and len(self.buckets) < _MIN_TREEIFY_CAPACITY:
            self.resize()  # treeifyBin resizes a small table instead
        self.size += 1
        if self.size > self.threshold:
            self.resize()


def hash_map_order(
    keys: Sequence[Any], key_type: SqlType | None, *, initial_capacity: int | None
) -> list[int] | None:
    """The positions of ``keys`` (distinct, in the order they were put) in the order a Java
    ``HashMap`` built with ``initial_capacity`` (None: ``new HashMap<>()``) iterates them;
    None when a key's hash is not modelled."""
    table = _Table(initial_capacity)
    for position, key in enumerate(keys):
        h = java_hash_code(key, key_type)
        if h is None:
            return None
        table.put(h ^ (h >> 16), position)
    return [position for bucket in table.buckets for _, position in bucket]


def java_map_order(value: dict[Any, Any], map_type: SqlType | None) -> list[tuple[Any, Any]]:
    """The entries of ``value`` in the order ksqlDB's Java body walks them: a ``HashMap``
    sized for its entries (``new HashMap<>(size)``, as ksqlDB's JSON deserializer and MAP
    constructor build maps), filled in the map's own order. Keys of a type whose Java hash
    is not modelled keep the map's own order."""
    items = list(value.items())
    key_type = map_type.key if isinstance(map_type, T.Map) else None
    order = hash_map_order([k for k, _ in items], key_type, initial_capacity=len(items))
    return items if order is None else [items[i] for i in order]


# --------------------------------------------------------------------------- MurmurHash, HLL

_MURMUR_M = 0x5BD1E995


def _to_int32(x: int) -> int:
    x &= _MASK32
    return x - (1 << 32) if x & 0x80000000 else x


def murmur_hash_bytes(data: bytes, seed: int = -1) -> int:
    """The 32-bit MurmurHash2 of ``data`` as ksqlDB's HyperLogLog library computes it (its
    tail bytes sign-extended, as Java's ``(int) byte`` is), unsigned."""
    length = len(data)
    h = (seed ^ length) & _MASK32
    whole = length >> 2
    for i in range(whole):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * _MURMUR_M) & _MASK32
        k ^= k >> 24
        k = (k * _MURMUR_M) & _MASK32
        h = (h * _MURMUR_M) & _MASK32
        h ^= k
    left = length - (whole << 2)
    if left:
        signed = [b - 256 if b > 127 else b for b in data[length - left :]]
        if left >= 3:
            h ^= (signed[-3] << 16) & _MASK32
        if left >= 2:
            h ^= (signed[-2] << 8) & _MASK32
        h ^= signed[-1] & _MASK32
        h = (h * _MURMUR_M) & _MASK32
    h ^= h >> 13
    h = (h * _MURMUR_M) & _MASK32
    h ^= h >> 15
    return h


def murmur_hash_long(value: int) -> int:
    """The library's ``hashLong`` of a Java ``long`` (an ``int`` widened to it), unsigned."""
    value &= _MASK64
    k = ((value & _MASK32) * _MURMUR_M) & _MASK32
    k ^= k >> 24
    h = (k * _MURMUR_M) & _MASK32
    k = (((value >> 32) & _MASK32) * _MURMUR_M) & _MASK32
    k ^= k >> 24
    h = (h * _MURMUR_M) & _MASK32
    h ^= (k * _MURMUR_M) & _MASK32
    h ^= h >> 13
    h = (h * _MURMUR_M) & _MASK32
    h ^= h >> 15
    return h


def _java_text(value: Any, base: T.BaseType | None) -> str:
    """``toString()`` of the Java object ksqlDB holds, for the types hashed through it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if base is T.BaseType.BYTES and isinstance(value, bytes | bytearray):
        # A ByteBuffer: its toString names its class and bounds, not its bytes.
        return f"java.nio.HeapByteBuffer[pos=0 lim={len(value)} cap={len(value)}]"
    return str(value)


def murmur_hash_object(value: Any, sql_type: SqlType | None) -> int:
    """The library's ``MurmurHash.hash(Object)`` of ``value`` of ``sql_type``, unsigned:
    Integer and Long by ``hashLong``, Double by its raw bits, String by its UTF-8 bytes, any
    other object by the bytes of its ``toString()`` (modelled for BOOLEAN, DECIMAL and BYTES;
    other types hash a text of their own)."""
    base = sql_type.base if sql_type is not None else None
    if base in (T.BaseType.INTEGER, T.BaseType.BIGINT) and not isinstance(value, bool):
        return murmur_hash_long(int(value))
    if base is T.BaseType.DOUBLE:
        return murmur_hash_long(struct.unpack(">q", struct.pack(">d", float(value)))[0])
    if base is T.BaseType.STRING and isinstance(value, str):
        return murmur_hash_bytes(value.encode("utf-8", "surrogatepass"))
    return murmur_hash_bytes(_java_text(value, base).encode("utf-8", "surrogatepass"))


def hll_register(hashed: int, log2m: int) -> tuple[int, int]:
    """The register index and rank a hash sets in a HyperLogLog of ``2**log2m`` registers:
    the top ``log2m`` bits, and one more than the leading zeros of the rest (with the
    library's guard bits ``(1 << (log2m - 1)) + 1`` or-ed in)."""
    index = hashed >> (32 - log2m)
    rest = ((hashed << log2m) & _MASK32) | ((1 << (log2m - 1)) + 1)
    return index, 32 - rest.bit_length() + 1


def hll_cardinality(registers: dict[int, int], log2m: int) -> int:
    """The library's estimate: the harmonic mean of the registers, or linear counting while
    the estimate is at most 2.5 times the register count; rounded as ``Math.round``."""
    m = 1 << log2m
    zeros = m - len(registers)
    # Every term is a power of two and every partial sum fits in a double exactly, so the
    # order of the registers does not matter.
    register_sum = zeros + sum(2.0**-rank for rank in registers.values())
    alpha_mm = (0.7213 / (1 + 1.079 / m)) * m * m
    estimate = alpha_mm * (1 / register_sum)
    if estimate <= (5.0 / 2.0) * m:
        if not zeros:
            return 2**63 - 1  # Math.round of infinity
        estimate = m * math.log(m / zeros)
    return math.floor(estimate + 0.5)
