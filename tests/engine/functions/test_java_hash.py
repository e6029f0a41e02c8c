"""Java's hash codes and HashMap's iteration order (engine.functions.java_hash)."""

from __future__ import annotations

from decimal import Decimal

from engine.functions.java_hash import hash_map_order, java_hash_code
from engine.plan import types as T


def _signed(h: int | None) -> int | None:
    return None if h is None else h - (1 << 32) if h >= 1 << 31 else h


def test_string_hash_is_javas_over_utf16_code_units() -> None:
    assert _signed(java_hash_code("", T.STRING)) == 0
    assert _signed(java_hash_code("hello", T.STRING)) == 99162322
    # s[0]*31^(n-1) + ... in 32-bit arithmetic: "Aa" and "BB" collide, as in Java.
    assert java_hash_code("Aa", T.STRING) == java_hash_code("BB", T.STRING) == 2112
    # A character outside the BMP counts as its two UTF-16 surrogates.
    assert _signed(java_hash_code("\U0001F600", T.STRING)) == 0xD83D * 31 + 0xDE00


def test_numeric_and_boolean_hashes_follow_their_java_boxes() -> None:
    assert _signed(java_hash_code(-1, T.INTEGER)) == -1
    assert _signed(java_hash_code(-1, T.BIGINT)) == 0  # (int) (v ^ (v >>> 32))
    assert _signed(java_hash_code(1 << 32, T.BIGINT)) == 1
    assert _signed(java_hash_code(1.0, T.DOUBLE)) == 0x3FF00000
    assert java_hash_code(float("nan"), T.DOUBLE) == java_hash_code(-float("nan"), T.DOUBLE)
    assert java_hash_code(True, T.BOOLEAN) == 1231
    assert java_hash_code(False, T.BOOLEAN) == 1237
    assert java_hash_code(None, T.STRING) == 0


def test_decimal_hash_depends_on_unscaled_value_and_scale() -> None:
    assert _signed(java_hash_code(Decimal("1.5"), T.Decimal(2, 1))) == 31 * 15 + 1
    assert _signed(java_hash_code(Decimal("-1.5"), T.Decimal(2, 1))) == 31 * -15 + 1
    assert java_hash_code(Decimal("2.0"), T.Decimal(2, 1)) != java_hash_code(
        Decimal("2.00"), T.Decimal(3, 2)
    )


def test_an_unmodelled_key_type_has_no_order() -> None:
    assert hash_map_order([[1]], T.Array(T.INTEGER), initial_capacity=1) is None


def test_order_follows_buckets_of_the_table_the_map_was_sized_to() -> None:
    # HashMap(2) grows to 4 buckets for two keys: 8 lands in bucket 0, 3 in bucket 3.
    assert hash_map_order([3, 8], T.INTEGER, initial_capacity=2) == [1, 0]
    # new HashMap<>() has 16 buckets: 3 in bucket 3, 8 in bucket 8.
    assert hash_map_order([3, 8], T.INTEGER, initial_capacity=None) == [0, 1]


def test_keys_sharing_a_bucket_keep_the_order_they_were_put_in() -> None:
    assert hash_map_order([33, 1, 17], T.INTEGER, initial_capacity=3) == [0, 1, 2]
    assert hash_map_order(["BB", "Aa"], T.STRING, initial_capacity=2) == [0, 1]


def test_nine_keys_in_one_bucket_of_a_small_table_grow_the_table() -> None:
    # 16 and 1 first, then nine multiples of 64, all in bucket 0 of a 16-bucket table: the
    # ninth entry of a bucket makes a table below 64 buckets double instead of treeifying,
    # twice here, so 16 leaves bucket 0 for bucket 16 and ends last.
    keys = [16, 1, *range(64, 640, 64)]
    order = hash_map_order(keys, T.INTEGER, initial_capacity=None)
    assert order is not None
    assert [keys[i] for i in order] == [*range(64, 640, 64), 1, 16]
