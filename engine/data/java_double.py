"""``Double.toString`` as the Java runtimes ksqlDB runs on (11 and 17) compute it.

Those runtimes do not print the shortest text that reads back to the same double, which
Python's ``repr`` gives. Their digit generation differs in two places, and both show in
ksqlDB's results (``CAST(x AS STRING)``, DELIMITED and JSON text of a DOUBLE):

- A double holding an integer below 2^63 is printed from that integer's digits, so
  124920860860690064.0 reads ``1.24920860860690064E17``, where the shortest text is
  ``1.2492086086069006E17``; from 2^58 on a few low digits are rounded away first.
- Every other double runs the Steele-White digit loop with a symmetric stopping test on
  half an ULP, in int, long or big-integer arithmetic according to the sizes involved, and
  the big-integer variant stops on a tie where the others do not; the loop may stop one
  digit later than the shortest text needs (``Double.MIN_VALUE`` reads ``4.9E-324``, 2^-127
  ``5.8774717541114375E-39`` where the shortest is ``5.877471754111438E-39``).

The functions below follow that procedure step for step with Python integers (wrapping
where the Java code works in ``int`` or ``long``).
"""

from __future__ import annotations

import math
import struct

_EXP_SHIFT = 52
_FRACT_HOB = 1 << _EXP_SHIFT
_SIGNIF_MASK = _FRACT_HOB - 1
_EXP_BIAS = 1023
_MAX_SMALL_BIN_EXP = 62
_MIN_SMALL_BIN_EXP = -(63 // 3)

# The number of low decimal digits of 2^p that a double's precision cannot hold.
_INSIGNIFICANT_DIGITS = (
    0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3,
    4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7,
    8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 11, 11, 11,
    12, 12, 12, 12, 13, 13, 13, 14, 14, 14,
    15, 15, 15, 15, 16, 16, 16, 17, 17, 17,
    18, 18, 18, 19,
)  # fmt: skip


def _bits_of_5_pow(n: int) -> int:
    """The bit length of 5^n as the Java code tabulates it (a table up to 5^26, 3n past)."""
    return (5**n).bit_length() if n < 27 else 3 * n


def _wrap32(v: int) -> int:
    return ((v + 2**31) % 2**32) - 2**31


def _wrap64(v: int) -> int:
    return ((v + 2**63) % 2**64) - 2**63


def _estimate_dec_exp(fract_bits: int, bin_exp: int) -> int:
    """floor(log10(d)), estimated in double arithmetic as the Java code does."""
    d2 = struct.unpack(">d", struct.pack(">Q", (_EXP_BIAS << _EXP_SHIFT) | (fract_bits & _SIGNIF_MASK)))[0]
    d = (d2 - 1.5) * 0.289529654 + 0.176091259 + float(bin_exp) * 0.301029995663981
    return math.floor(d)


def _long_digits(value: int, insignificant: int) -> tuple[list[int], int]:
    """Digits (no trailing zeros) and decimal exponent of an integral double's integer."""
    dec_exponent = 0
    if insignificant:
        pow10 = 10**insignificant
        residue = value % pow10
        value //= pow10
        dec_exponent += insignificant
        if residue >= pow10 >> 1:
            value += 1
    text = str(value)
    stripped = text.rstrip("0")
    dec_exponent += len(text) - 1
    return [int(c) for c in stripped], dec_exponent + 1


def _dtoa(bin_exp: int, fract_bits: int, n_significant_bits: int) -> tuple[list[int], int]:
    """The decimal digits and exponent (value = 0.d1d2... * 10^exp) of a positive double."""
    tail_zeros = (fract_bits & -fract_bits).bit_length() - 1
    n_fract_bits = _EXP_SHIFT + 1 - tail_zeros
    n_tiny_bits = max(0, n_fract_bits - bin_exp - 1)
    if _MIN_SMALL_BIN_EXP <= bin_exp <= _MAX_SMALL_BIN_EXP and n_tiny_bits == 0:
        # An integer that fits a long: print its own digits.
        insignificant = 0
        if bin_exp > n_significant_bits:
            p2 = bin_exp - n_significant_bits - 1
            insignificant = _INSIGNIFICANT_DIGITS[p2] if 1 < p2 < len(_INSIGNIFICANT_DIGITS) else 0
        if bin_exp >= _EXP_SHIFT:
            value = fract_bits << (bin_exp - _EXP_SHIFT)
        else:
            value = fract_bits >> (_EXP_SHIFT - bin_exp)
        return _long_digits(value, insignificant)

    dec_exp = _estimate_dec_exp(fract_bits, bin_exp)
    b5 = max(0, -dec_exp)
    b2 = b5 + n_tiny_bits + bin_exp
    s5 = max(0, dec_exp)
    s2 = s5 + n_tiny_bits
    m5 = b5
    m2 = b2 - n_significant_bits

    fract_bits >>= tail_zeros
    b2 -= n_fract_bits - 1
    common = min(b2, s2)
    b2 -= common
    s2 -= common
    m2 -= common
    if n_fract_bits == 1:
        m2 -= 1  # below a power of two the next double is only half as far
    if m2 < 0:
        b2 -= m2
        s2 -= m2
        m2 = 0

    b_bits = n_fract_bits + b2 + _bits_of_5_pow(b5)
    ten_s_bits = s2 + 1 + _bits_of_5_pow(s5 + 1)
    digits: list[int] = []
    if b_bits < 64 and ten_s_bits < 64:
        wrap = _wrap32 if b_bits < 32 and ten_s_bits < 32 else _wrap64
        b = wrap(wrap(fract_bits * 5**b5) << b2)
        s = wrap(5**s5 << s2)
        m = wrap(5**m5 << m2)
        tens = wrap(s * 10)
        q = b // s
        b = wrap(10 * (b % s))
        m = wrap(m * 10)
        low = b < m
        high = wrap(b + m) > tens
        if q == 0 and not high:
            dec_exp -= 1  # the estimate was one too high
        else:
            digits.append(q)
        if dec_exp < -3 or dec_exp >= 8:
            high = low = False  # E-form needs a digit after the point
        while not low and not high:
            q = b // s
            b = wrap(10 * (b % s))
            m = wrap(m * 10)
            if m > 0:
                low = b < m
                high = wrap(b + m) > tens
            else:
                low = high = True  # m overflowed: certainly past both bounds
            digits.append(q)
        low_digit_difference = wrap(wrap(b << 1) - tens)
    else:
        b = fract_bits * 5**b5 << b2
        s = 5**s5 << s2
        m = 5**(m5 + 1) << (m2 + 1)
        ten_s = 5**(s5 + 1) << (s2 + 1)
        q, b = divmod(b, s)
        b *= 10
        low = b < m
        high = b + m >= ten_s
        if q == 0 and not high:
            dec_exp -= 1
        else:
            digits.append(q)
        if dec_exp < -3 or dec_exp >= 8:
            high = low = False
        while not low and not high:
            q, b = divmod(b, s)
            b *= 10
            m *= 10
            low = b < m
            high = b + m >= ten_s
            digits.append(q)
        low_digit_difference = (b << 1) - ten_s if high and low else 0

    dec_exponent = dec_exp + 1
    if high and (not low or low_digit_difference > 0 or (low_digit_difference == 0 and digits[-1] & 1)):
        dec_exponent = _round_up(digits, dec_exponent)
    return digits, dec_exponent


def _round_up(digits: list[int], dec_exponent: int) -> int:
    """Add one to the last digit, carrying; the digits keep their count."""
    i = len(digits) - 1
    while digits[i] == 9 and i > 0:
        digits[i] = 0
        i -= 1
    if digits[i] == 9:
        digits[0] = 1
        return dec_exponent + 1
    digits[i] += 1
    return dec_exponent


def java_double_to_string(value: float) -> str:
    """The text ``Double.toString(value)`` gives on Java 11 and 17."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    bits = struct.unpack(">Q", struct.pack(">d", value))[0]
    negative = bool(bits >> 63)
    if value == 0:
        return "-0.0" if negative else "0.0"
    bin_exp = (bits >> _EXP_SHIFT) & 0x7FF
    fract_bits = bits & _SIGNIF_MASK
    if bin_exp == 0:
        leading_zeros = 64 - fract_bits.bit_length()
        shift = leading_zeros - (63 - _EXP_SHIFT)
        fract_bits <<= shift
        bin_exp = 1 - shift
        n_significant_bits = 64 - leading_zeros
    else:
        fract_bits |= _FRACT_HOB
        n_significant_bits = _EXP_SHIFT + 1
    digits, dec_exponent = _dtoa(bin_exp - _EXP_BIAS, fract_bits, n_significant_bits)
    text = "".join(map(str, digits))
    sign = "-" if negative else ""
    if 0 < dec_exponent < 8:
        whole, fraction = text[:dec_exponent], text[dec_exponent:]
        if len(whole) < dec_exponent:
            return f"{sign}{whole}{'0' * (dec_exponent - len(whole))}.0"
        return f"{sign}{whole}.{fraction or '0'}"
    if -3 < dec_exponent <= 0:
        return f"{sign}0.{'0' * -dec_exponent}{text}"
    return f"{sign}{text[0]}.{text[1:] or '0'}E{dec_exponent - 1}"


__all__ = ["java_double_to_string"]
