"""String functions, with Java ``String`` semantics.

Positions and lengths count UTF-16 code units as Java does, so a character outside the
Basic Multilingual Plane counts twice in LEN, SUBSTRING, INSTR, LPAD and RPAD. Regular
expressions are written in Java syntax and translated to Python's ``re`` (see
``java_regex``).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid as _uuid
from array import array
from collections.abc import Callable
from functools import lru_cache

from engine.errors import EvaluationError
from engine.functions.registry import scalar
from engine.plan import types as T

# --------------------------------------------------------------------------- UTF-16 helpers


def _needs_units(s: str) -> bool:
    return not s.isascii() and any(ord(c) > 0xFFFF for c in s)


def to_units(s: str) -> str:
    """The string with every UTF-16 code unit as one Python character (Java's ``char`` view)."""
    if not _needs_units(s):
        return s
    return "".join(map(chr, array("H", s.encode("utf-16-le", "surrogatepass"))))


def from_units(s: str) -> str:
    """Inverse of ``to_units``: joins surrogate pairs back into code points."""
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in s):
        return s
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def java_length(s: str) -> int:
    """Java's ``String.length()``: the number of UTF-16 code units."""
    return len(to_units(s))


# --------------------------------------------------------------------------- Java regex

_POSIX_CLASSES = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": "\\x00-\\x7F",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": "!-/:-@\\[-`{-~",
    "Graph": "!-~",
    "Print": " -~",
    "Blank": " \\t",
    "Cntrl": "\\x00-\\x1F\\x7F",
    "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0B\\f\\r",
    "L": "^\\W\\d_",
    "IsAlphabetic": "^\\W\\d_",
    "IsDigit": "\\d",
    "N": "\\d",
}


# Java's predefined classes without UNICODE_CHARACTER_CLASS: ASCII only (Python's are
# Unicode), as a class of their own and as a class's part.
_JAVA_ASCII_CLASSES = {
    "d": ("[0-9]", "0-9"),
    "D": ("[^0-9]", None),
    "w": ("[a-zA-Z_0-9]", "a-zA-Z_0-9"),
    "W": ("[^a-zA-Z_0-9]", None),
    "s": ("[ \\t\\n\\x0b\\f\\r]", " \\t\\n\\x0b\\f\\r"),
    "S": ("[^ \\t\\n\\x0b\\f\\r]", None),
}
# Java's '.' (without DOTALL) matches anything but these line terminators; Python's only \n.
_JAVA_DOT = "[^\\n\\r\\u0085\\u2028\\u2029]"
_DOTALL_FLAG = re.compile(r"\(\?[a-zA-Z]*s")


@lru_cache(maxsize=256)
def java_regex(pattern: str, *, java_classes: bool = False) -> re.Pattern[str]:
    """Compile a Java regular expression with Python's ``re``.

    Translates the Java-only syntax that matters in practice: named groups ``(?<n>..)``,
    back references ``\\k<n>``, quoting ``\\Q..\\E``, ``\\z``/``\\Z`` and a few POSIX
    classes ``\\p{Alpha}``. ``java_classes``: ``\\d``, ``\\w``, ``\\s`` (and their negations
    outside brackets) match ASCII only and ``.`` stops at every Java line terminator, as in
    Java (a negated class inside brackets stays Python's).
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    java_dot = java_classes and not _DOTALL_FLAG.search(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                end = n if end < 0 else end
                out.append(re.escape(pattern[i + 2 : end]))
                i = end + 2
                continue
            if nxt in "pP" and i + 2 < n and pattern[i + 2] == "{":
                close = pattern.find("}", i + 3)
                name = pattern[i + 3 : close] if close > 0 else ""
                name = name.removeprefix("Is") if name not in _POSIX_CLASSES else name
                body = _POSIX_CLASSES.get(name) or _POSIX_CLASSES.get("Is" + name)
                if body is None:
                    raise EvaluationError(
                        f"The regular expression '{pattern}' uses the character class "
                        f"'\\{nxt}{{{name}}}', which is not supported."
                    )
                negate = nxt == "P"
                if body.startswith("^"):  # already a negated set
                    negate = not negate
                    body = body[1:]
                if in_class and not negate:
                    out.append(body)
                elif in_class:
                    raise EvaluationError(
                        f"The regular expression '{pattern}' negates a character class "
                        "inside brackets, which is not supported."
                    )
                else:
                    out.append(("[^" if negate else "[") + body + "]")
                i = close + 1
                continue
            if nxt == "k" and i + 2 < n and pattern[i + 2] == "<":
                close = pattern.find(">", i + 3)
                out.append(f"(?P={pattern[i + 3 : close]})")
                i = close + 1
                continue
            if nxt == "z" and not in_class:
                out.append("\\Z")
                i += 2
                continue
            if nxt == "Z" and not in_class:
                out.append("(?=\\n?\\Z)")
                i += 2
                continue
            ascii_class = _JAVA_ASCII_CLASSES.get(nxt) if java_classes else None
            if ascii_class is not None and (not in_class or ascii_class[1] is not None):
                out.append(ascii_class[1] if in_class else ascii_class[0])  # type: ignore[arg-type]
                i += 2
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif c == "[":
                out.append("\\[")
                i += 1
                continue
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            # A ']' right after '[' or '[^' is a literal in both dialects.
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):
                out.append("\\]")
                i += 1
            continue
        if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")
            i += 3
            continue
        if c == "." and java_dot:
            out.append(_JAVA_DOT)
            i += 1
            continue
        out.append(c)
        i += 1
    try:
        return re.compile("".join(out))
    except re.error as exc:
        raise InvalidPatternError(
            f"The regular expression '{pattern}' is not valid: {exc}."
        ) from exc


class InvalidPatternError(EvaluationError):
    """A regular expression that does not compile (Java's PatternSyntaxException)."""


def ksqldb_pattern(regex: str, *, java_classes: bool = False) -> re.Pattern[str]:
    """``java_regex``, failing as ksqlDB's REGEXP_REPLACE, REGEXP_EXTRACT_ALL and
    REGEXP_SPLIT_TO_ARRAY do for a pattern that does not compile."""
    try:
        return java_regex(regex, java_classes=java_classes)
    except InvalidPatternError as exc:
        raise EvaluationError(f"Invalid regular expression pattern: {regex}") from exc


def java_replacement(pattern: re.Pattern[str], replacement: str) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` callback applying a Java replacement string (``$1``, ``${name}``, ``\\$``)."""
    parts: list[tuple[bool, str | int]] = []  # (is_group_reference, literal text or group)
    buf: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 >= n:
                raise EvaluationError(
                    f"The replacement '{replacement}' ends with a lone backslash; "
                    "escape it as '\\\\'."
                )
            buf.append(replacement[i + 1])
            i += 2
            continue
        if c != "$":
            buf.append(c)
            i += 1
            continue
        ref: str | int
        if i + 1 < n and replacement[i + 1] == "{":
            close = replacement.find("}", i + 2)
            ref = replacement[i + 2 : close] if close > 0 else ""
            if ref not in pattern.groupindex:
                raise EvaluationError(
                    f"The replacement '{replacement}' names the group '{ref}', "
                    "which the pattern does not define."
                )
            i = close + 1
        else:
            j = i + 1
            if j >= n or not replacement[j].isdigit():
                raise EvaluationError(
                    f"The replacement '{replacement}' has an illegal group reference "
                    f"at position {i}; expected '$' followed by a group number."
                )
            number = int(replacement[j])
            j += 1
            # Java takes more digits only while the number stays a valid group.
            while j < n and replacement[j].isdigit():
                longer = number * 10 + int(replacement[j])
                if longer > pattern.groups:
                    break
                number = longer
                j += 1
            if number > pattern.groups:
                raise EvaluationError(
                    f"The replacement '{replacement}' refers to group {number}, but "
                    f"the pattern has only {pattern.groups} groups."
                )
            ref = number
            i = j
        if buf:
            parts.append((False, "".join(buf)))
            buf = []
        parts.append((True, ref))
    if buf:
        parts.append((False, "".join(buf)))

    def apply(m: re.Match[str]) -> str:
        return "".join(
            (m.group(v) or "") if is_ref else str(v) for is_ref, v in parts
        )

    return apply


def _java_split(pattern: re.Pattern[str], text: str) -> list[str]:
    """Java's ``Pattern.split(text, -1)``: trailing empty strings kept, no leading empty
    string for a zero-width match at the start."""
    pieces: list[str] = []
    index = 0
    for m in pattern.finditer(text):
        if index == 0 and m.start() == 0 and m.end() == 0:
            continue
        pieces.append(text[index : m.start()])
        index = m.end()
    if not pieces and index == 0:
        return [text]
    pieces.append(text[index:])
    return pieces


# --------------------------------------------------------------------------- concatenation

STRING, INTEGER, BYTES = T.STRING, T.INTEGER, T.BYTES


@scalar("CONCAT", params=[STRING], returns=STRING, variadic=True, null_propagating=False)
def concat(*parts: str | None) -> str:
    """Concatenate the strings, skipping NULLs."""
    return "".join(p for p in parts if p is not None)


@scalar(
    "CONCAT_WS", params=[STRING, STRING], returns=STRING, variadic=True, null_propagating=False,
    until=1,
)
def concat_ws(separator: str | None, *parts: str | None) -> str | None:
    """Join the non-NULL strings with the separator; NULL if the separator is NULL."""
    if separator is None:
        return None
    return separator.join(p for p in parts if p is not None)


def concat_ws_inputs(inputs: tuple[object, ...]) -> None:
    """ksqlDB's CONCAT_WS takes the separator as its first value and needs two or more."""
    if len(inputs) < 2:
        raise EvaluationError("Function Concat_WS expects at least two input arguments.")


@scalar("CONCAT_WS", params=[STRING], returns=STRING, variadic=True, null_propagating=False, since=2)
def concat_ws_values(*inputs: str | None) -> str | None:
    """Join the non-NULL strings after the first with the first as separator; NULL if the
    separator is NULL; fewer than two values are an error (ksqlDB's ``STRING...``)."""
    concat_ws_inputs(inputs)
    separator = inputs[0]
    if separator is None:
        return None
    return separator.join(p for p in inputs[1:] if p is not None)


# --------------------------------------------------------------------------- case and trimming


@scalar("UCASE", params=[STRING], returns=STRING)
def ucase(s: str) -> str:
    """Upper-case the string."""
    return s.upper()


@scalar("LCASE", params=[STRING], returns=STRING)
def lcase(s: str) -> str:
    """Lower-case the string."""
    return s.lower()


# Java's String.trim() strips every character up to and including U+0020.
_TRIMMED = "".join(chr(c) for c in range(0x21))


@scalar("TRIM", params=[STRING], returns=STRING)
def trim(s: str) -> str:
    """Remove leading and trailing whitespace and control characters (Java ``trim``)."""
    return s.strip(_TRIMMED)


@scalar("LTRIM", params=[STRING], returns=STRING)
def ltrim(s: str) -> str:
    """Remove leading whitespace and control characters."""
    return s.lstrip(_TRIMMED)


@scalar("RTRIM", params=[STRING], returns=STRING)
def rtrim(s: str) -> str:
    """Remove trailing whitespace and control characters."""
    return s.rstrip(_TRIMMED)


@scalar("INITCAP", params=[STRING], returns=STRING, until=1)
def initcap(s: str) -> str:
    """Capitalise the first letter of each word and lower-case the rest; keep the spacing."""
    out: list[str] = []
    word_start = True
    for c in s:
        if c.isspace():
            out.append(c)
            word_start = True
        else:
            out.append(c.upper() if word_start else c.lower())
            word_start = False
    return "".join(out)


# Java's regex ``\\s`` (no UNICODE_CHARACTER_CLASS): these six characters only.
_JAVA_REGEX_SPACE = " \t\n\x0b\f\r"
_INITCAP_PART = re.compile(f"[^{_JAVA_REGEX_SPACE}]+[{_JAVA_REGEX_SPACE}]*")


@scalar("INITCAP", params=[STRING], returns=STRING, since=2)
def initcap_java(s: str) -> str:
    """Each word with its first letter upper-cased and the rest lower-cased, as ksqlDB's body
    does: the whole string lower-cased first (a final sigma stays final), words and the
    spaces after them (space, tab, line breaks) taken in turn, so leading spaces are dropped,
    and a letter outside the BMP kept as it is (Java upper-cases its first UTF-16 unit alone)."""
    out: list[str] = []
    for match in _INITCAP_PART.finditer(s.lower()):
        part = match.group()
        head = part[0] if ord(part[0]) > 0xFFFF else part[0].upper()
        out.append(head + part[1:])
    return "".join(out)


# --------------------------------------------------------------------------- length and slicing


@scalar("LEN", params=[STRING], returns=INTEGER)
def length(s: str) -> int:
    """The length of the string in UTF-16 code units (Java ``length``)."""
    return java_length(s)


def substring_bounds(length: int, pos: int, count: int | None) -> tuple[int, int]:
    """ksqlDB's SUBSTRING bounds: 1-based ``pos``, negative from the end, clamped."""
    start = max(length + pos, 0) if pos < 0 else max(min(pos - 1, length), 0)
    if count is None:
        return start, length
    return start, max(min(start + count, length), start)


@scalar("SUBSTRING", params=[STRING, INTEGER], returns=STRING)
def substring_from(s: str, pos: int) -> str:
    """The rest of the string from 1-based position ``pos`` (negative counts from the end)."""
    units = to_units(s)
    start, end = substring_bounds(len(units), pos, None)
    return from_units(units[start:end])


@scalar("SUBSTRING", params=[STRING, INTEGER, INTEGER], returns=STRING)
def substring(s: str, pos: int, count: int) -> str:
    """Up to ``count`` characters from 1-based position ``pos``."""
    units = to_units(s)
    start, end = substring_bounds(len(units), pos, count)
    return from_units(units[start:end])


@scalar("INSTR", params=[STRING, STRING], returns=INTEGER, null_propagating=False, until=1)
def instr(s: str | None, sub: str | None) -> int:
    """1-based position of the first occurrence of ``sub`` in ``s``, or 0."""
    return instr_occurrence(s, sub, 1, 1)


@scalar("INSTR", params=[STRING, STRING, INTEGER], returns=INTEGER, null_propagating=False, until=1)
def instr_from(s: str | None, sub: str | None, position: int | None) -> int:
    """1-based position of ``sub`` searching from ``position`` (backwards if negative), or 0."""
    return instr_occurrence(s, sub, position, 1)


@scalar(
    "INSTR",
    params=[STRING, STRING, INTEGER, INTEGER],
    returns=INTEGER,
    null_propagating=False,
    until=1,
)
def instr_occurrence(
    s: str | None, sub: str | None, position: int | None, occurrence: int | None
) -> int:
    """1-based position of the ``occurrence``-th ``sub`` searching from ``position``, or 0."""
    if position is None or occurrence is None:
        raise EvaluationError("INSTR needs a non-NULL position and occurrence.")
    if occurrence <= 0:
        raise EvaluationError(
            f"INSTR needs an occurrence greater than 0, got {occurrence}."
        )
    if s is None or sub is None:
        return 0
    text, needle = to_units(s), to_units(sub)
    if position > 0:
        index = position - 2
        for _ in range(occurrence):
            index = text.find(needle, max(index + 1, 0))
            if index < 0:
                return 0
        return index + 1
    if position < 0:
        index = len(text) + position + 1
        for _ in range(occurrence):
            # Java's lastIndexOf(str, from) finds a match starting at or before `from`.
            limit = index - 1
            if limit < 0:
                return 0
            index = text.rfind(needle, 0, limit + len(needle))
            if index < 0:
                return 0
        return index + 1
    return 0


def _java_reverse(units: str) -> str:
    """``StringBuilder.reverse`` over UTF-16 units: surrogate pairs keep their order."""
    chars = list(units[::-1])
    i = 0
    while i < len(chars) - 1:
        if 0xDC00 <= ord(chars[i]) <= 0xDFFF and 0xD800 <= ord(chars[i + 1]) <= 0xDBFF:
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
            i += 2
        else:
            i += 1
    return "".join(chars)


def _ordinal_index_of(text: str, needle: str, ordinal: int) -> int:
    """Commons Lang's ``StringUtils.ordinalIndexOf``: overlapping matches; an empty needle is
    at 0; an ordinal below 1 finds nothing (-1)."""
    if ordinal <= 0:
        return -1
    if not needle:
        return 0
    index = -1
    for _ in range(ordinal):
        index = text.find(needle, index + 1)
        if index < 0:
            return -1
    return index


def _lang_substring(text: str, start: int) -> str:
    """Commons Lang's ``StringUtils.substring(str, start)``: a negative start counts from the end."""
    if start < 0:
        start = max(len(text) + start, 0)
    return text[start:] if start <= len(text) else ""


def _instr_find(text: str, needle: str, position: int, occurrence: int, *, reversed_: bool) -> int:
    index = _ordinal_index_of(_lang_substring(text, position - 1), needle, occurrence)
    if index == -1:
        return 0
    return len(text) - position - index - len(needle) + 2 if reversed_ else index + position


def _instr_java(s: str | None, sub: str | None, position: int | None, occurrence: int | None) -> int:
    if position is None or occurrence is None:
        raise EvaluationError("INSTR needs a non-NULL position and occurrence.")
    if s is None or sub is None:
        return 0
    text, needle = to_units(s), to_units(sub)
    if abs(position) > len(text):
        return 0
    if position < 0:
        return _instr_find(_java_reverse(text), _java_reverse(needle), -position, occurrence, reversed_=True)
    return _instr_find(text, needle, position, occurrence, reversed_=False)


@scalar("INSTR", params=[STRING, STRING], returns=INTEGER, null_propagating=False, since=2)
def instr_java(s: str | None, sub: str | None) -> int:
    """1-based position (in UTF-16 units) of the first occurrence of ``sub`` in ``s``, or 0."""
    return _instr_java(s, sub, 1, 1)


@scalar("INSTR", params=[STRING, STRING, INTEGER], returns=INTEGER, null_propagating=False, since=2)
def instr_from_java(s: str | None, sub: str | None, position: int | None) -> int:
    """1-based position of ``sub`` searching from ``position`` (backwards if negative), or 0;
    a position past either end finds nothing."""
    return _instr_java(s, sub, position, 1)


@scalar(
    "INSTR",
    params=[STRING, STRING, INTEGER, INTEGER],
    returns=INTEGER,
    null_propagating=False,
    since=2,
)
def instr_occurrence_java(
    s: str | None, sub: str | None, position: int | None, occurrence: int | None
) -> int:
    """1-based position of the ``occurrence``-th ``sub`` (matches may overlap) searching from
    ``position``, or 0, as ksqlDB's body finds it: an occurrence below 1 finds nothing, an
    empty ``sub`` is found at the position itself."""
    return _instr_java(s, sub, position, occurrence)


def pad(subject: str, target: int, padding: str, left: bool) -> str:
    """ksqlDB's LPAD/RPAD: pad with repeated ``padding`` to ``target``, truncating to it."""
    if left:
        fill = max(target - len(subject), 0)
        repeated = (padding * (fill // len(padding) + 1))[:fill]
        return (repeated + subject)[:target]
    combined = subject + padding * (max(target - len(subject), 0) // len(padding) + 1)
    return combined[:target]


@scalar("LPAD", params=[STRING, INTEGER, STRING], returns=STRING)
def lpad(s: str, target: int, padding: str) -> str | None:
    """Left-pad ``s`` with ``padding`` to ``target`` characters (truncates longer input)."""
    if target < 0 or not padding:
        return None
    return from_units(pad(to_units(s), target, to_units(padding), left=True))


@scalar("RPAD", params=[STRING, INTEGER, STRING], returns=STRING)
def rpad(s: str, target: int, padding: str) -> str | None:
    """Right-pad ``s`` with ``padding`` to ``target`` characters (truncates longer input)."""
    if target < 0 or not padding:
        return None
    return from_units(pad(to_units(s), target, to_units(padding), left=False))


# --------------------------------------------------------------------------- replacing and splitting


@scalar("REPLACE", params=[STRING, STRING, STRING], returns=STRING)
def replace(s: str, old: str, new: str) -> str:
    """Replace every occurrence of ``old`` with ``new``."""
    return s.replace(old, new)


@scalar("REGEXP_REPLACE", params=[STRING, STRING, STRING], returns=STRING, until=1)
def regexp_replace(s: str, regex: str, replacement: str) -> str:
    """Replace every match of the Java regex; ``$n`` in the replacement refers to groups."""
    pattern = ksqldb_pattern(regex)
    return pattern.sub(java_replacement(pattern, replacement), s)


@scalar("REGEXP_REPLACE", params=[STRING, STRING, STRING], returns=STRING, since=2)
def regexp_replace_java(s: str, regex: str, replacement: str) -> str:
    """Replace every match of the Java regex (ASCII classes, Java's dot); ``$n`` names groups."""
    pattern = ksqldb_pattern(regex, java_classes=True)
    return pattern.sub(java_replacement(pattern, replacement), s)


def _group(pattern: re.Pattern[str], regex: str, group: int) -> int:
    if group < 0 or group > pattern.groups:
        raise EvaluationError(
            f"The regular expression '{regex}' has no group {group}; it has "
            f"{pattern.groups} groups."
        )
    return group


@scalar("REGEXP_EXTRACT", params=[STRING, STRING], returns=STRING, until=1)
def regexp_extract(regex: str, s: str) -> str | None:
    """The first substring matching the regex, or NULL."""
    return regexp_extract_group(regex, s, 0)


@scalar("REGEXP_EXTRACT", params=[STRING, STRING, INTEGER], returns=STRING, until=1)
def regexp_extract_group(regex: str, s: str, group: int) -> str | None:
    """The given group of the first match of the regex, or NULL."""
    pattern = java_regex(regex)
    m = pattern.search(s)
    return m.group(_group(pattern, regex, group)) if m else None


@scalar("REGEXP_EXTRACT_ALL", params=[STRING, STRING], returns=T.Array(STRING), until=1)
def regexp_extract_all(regex: str, s: str) -> list[str | None]:
    """Every substring matching the regex."""
    return regexp_extract_all_group(regex, s, 0)


@scalar("REGEXP_EXTRACT_ALL", params=[STRING, STRING, INTEGER], returns=T.Array(STRING), until=1)
def regexp_extract_all_group(regex: str, s: str, group: int) -> list[str | None]:
    """The given group of every match of the regex."""
    pattern = ksqldb_pattern(regex)
    g = _group(pattern, regex, group)
    return [m.group(g) for m in pattern.finditer(s)]


def _java_group(pattern: re.Pattern[str], regex: str, group: int) -> int | None:
    """The group to return, None where ksqlDB's body returns NULL (a group past the
    pattern's groups); a negative group fails as Matcher.group does."""
    if group > pattern.groups:
        return None
    if group < 0:
        raise EvaluationError(f"No group {group}")
    return group


@scalar("REGEXP_EXTRACT", params=[STRING, STRING], returns=STRING, since=2)
def regexp_extract_java(regex: str, s: str) -> str | None:
    """The first substring matching the Java regex (ASCII classes, Java's dot), or NULL."""
    return regexp_extract_group_java(regex, s, 0)


@scalar("REGEXP_EXTRACT", params=[STRING, STRING, INTEGER], returns=STRING, since=2)
def regexp_extract_group_java(regex: str, s: str, group: int) -> str | None:
    """The group of the first Java-regex match; NULL without a match or such a group."""
    pattern = java_regex(regex, java_classes=True)  # its own error, as Pattern.compile's
    g = _java_group(pattern, regex, group)
    if g is None:
        return None
    m = pattern.search(s)
    return m.group(g) if m else None


@scalar("REGEXP_EXTRACT_ALL", params=[STRING, STRING], returns=T.Array(STRING), since=2)
def regexp_extract_all_java(regex: str, s: str) -> list[str | None] | None:
    """Every substring matching the Java regex (ASCII classes, Java's dot)."""
    return regexp_extract_all_group_java(regex, s, 0)


@scalar("REGEXP_EXTRACT_ALL", params=[STRING, STRING, INTEGER], returns=T.Array(STRING), since=2)
def regexp_extract_all_group_java(regex: str, s: str, group: int) -> list[str | None] | None:
    """The group of every Java-regex match; NULL if the pattern has no such group."""
    pattern = ksqldb_pattern(regex, java_classes=True)
    g = _java_group(pattern, regex, group)
    if g is None:
        return None
    return [m.group(g) for m in pattern.finditer(s)]


@scalar("REGEXP_SPLIT_TO_ARRAY", params=[STRING, STRING], returns=T.Array(STRING), until=1)
def regexp_split_to_array(s: str, regex: str) -> list[str]:
    """Split around matches of the regex, keeping empty strings."""
    return _java_split(ksqldb_pattern(regex), s)


@scalar("REGEXP_SPLIT_TO_ARRAY", params=[STRING, STRING], returns=T.Array(STRING), since=2)
def regexp_split_to_array_java(s: str, regex: str) -> list[str]:
    """Split around matches of the Java regex (ASCII classes, Java's dot), keeping empty strings."""
    return _java_split(ksqldb_pattern(regex, java_classes=True), s)


@scalar("SPLIT", params=[STRING, STRING], returns=T.Array(STRING))
def split(s: str, delimiter: str) -> list[str]:
    """Split around a literal delimiter, keeping empty strings; '' splits into characters."""
    if not delimiter:
        return list(s) if s else [""]
    return s.split(delimiter)


@scalar(
    "SPLIT_TO_MAP", params=[STRING, STRING, STRING], returns=T.Map(STRING, STRING)
)
def split_to_map(s: str, entry_delimiter: str, kv_delimiter: str) -> dict[str, str] | None:
    """Split into entries, then each entry into key and value; later keys win."""
    if not entry_delimiter or not kv_delimiter or entry_delimiter == kv_delimiter:
        return None
    result: dict[str, str] = {}
    for entry in s.split(entry_delimiter):
        if not entry or kv_delimiter not in entry:
            continue
        key, value = entry.split(kv_delimiter)[:2]
        result[key] = value
    return result


# --------------------------------------------------------------------------- masking

_DEFAULT_MASKS = ("X", "x", "n", "-")


def _mask(s: str, masks: tuple[str | None, ...], *, single: bool = False) -> str:
    """Mask each character class with its mask; a NULL mask keeps the class. ksqlDB refuses a
    mask that is not one character; version 1 (``single=False``) took the first of longer ones."""
    codes: list[str | None] = []
    for m in masks:
        if m is not None and (not m or (single and len(m) != 1)):
            raise EvaluationError(
                f"Invalid mask character. Must be only single character, but was '{m}'"
            )
        codes.append(m[0] if m else None)
    upper, lower, digit, other = codes
    out: list[str] = []
    for c in s:
        if c.isupper():
            r = upper
        elif c.islower():
            r = lower
        elif c.isdecimal():
            r = digit
        else:
            r = other
        out.append(c if r is None else r)
    return "".join(out)


# Java's Character.getType classes Masker tells apart: UPPERCASE_LETTER, LOWERCASE_LETTER and
# DECIMAL_DIGIT_NUMBER; every other type (titlecase, modifier and other letters, letter numbers,
# surrogates, ...) is "other".
_JAVA_MASK_CLASSES = {"Lu": 0, "Ll": 1, "Nd": 2}


def _java_mask_code(mask: str | None) -> int | None:
    """Masker.getMaskCharacter: NULL keeps the class; a mask must be one UTF-16 unit."""
    if mask is None:
        return None
    units = to_units(mask)
    if len(units) != 1:
        raise EvaluationError(
            f"Invalid mask character. Must be only single character, but was '{mask}'"
        )
    return ord(units)


def _code_point_at(units: str, i: int) -> int:
    """Java's ``String.codePointAt``: a surrogate pair starting at ``i`` is one code point."""
    high = ord(units[i])
    if 0xD800 <= high <= 0xDBFF and i + 1 < len(units):
        low = ord(units[i + 1])
        if 0xDC00 <= low <= 0xDFFF:
            return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
    return high


def _java_mask_units(units: str, codes: tuple[int | None, ...]) -> str:
    """Masker.mask over UTF-16 units: each index's ``codePointAt`` classified by its Unicode
    category and replaced by its class's mask, or appended as it is. A pair's high unit thus
    stands for the whole character and its low unit is classed again, alone, as "other"."""
    out: list[str] = []
    for i in range(len(units)):
        code = _code_point_at(units, i)
        mask = codes[_JAVA_MASK_CLASSES.get(unicodedata.category(chr(code)), 3)]
        out.append(to_units(chr(code if mask is None else mask)))
    return "".join(out)


def _java_mask(
    s: str | None, masks: tuple[str | None, ...], region: Callable[[int], tuple[int, int]]
) -> str | None:
    """ksqlDB's MASK bodies: masks checked first, then the ``region`` (start, end) of the
    string's UTF-16 units masked and the rest kept."""
    codes = tuple(_java_mask_code(m) for m in masks)
    if s is None:
        return None
    units = to_units(s)
    start, end = region(len(units))
    return from_units(units[:start] + _java_mask_units(units[start:end], codes) + units[end:])


def _check_count(count: int, fn_name: str) -> None:
    if count < 0:
        raise EvaluationError(
            f"function {fn_name} requires a non-negative number of characters to mask or skip"
        )


def _register_masks() -> None:
    four = [STRING, STRING, STRING, STRING]

    @scalar("MASK", params=[STRING], returns=STRING, until=2)
    def mask(s: str) -> str:
        """Mask upper-case letters as X, lower-case as x, digits as n, others as -."""
        return _mask(s, _DEFAULT_MASKS)

    @scalar("MASK", params=[STRING, *four], returns=STRING, null_propagating=False, until=1)
    def mask_with(s: str | None, *masks: str | None) -> str | None:
        """Mask with the given replacement characters; a NULL one keeps that class."""
        return None if s is None else _mask(s, masks)

    @scalar("MASK", params=[STRING, *four], returns=STRING, null_propagating=False, since=2, until=2)
    def mask_with_single(s: str | None, *masks: str | None) -> str | None:
        """Mask with the given one-character replacements; a NULL one keeps that class."""
        return None if s is None else _mask(s, masks, single=True)

    def whole(n: int) -> tuple[int, int]:
        return (0, n)

    @scalar("MASK", params=[STRING], returns=STRING, since=3)
    def mask_java(s: str) -> str | None:
        """Mask Lu as X, Ll as x, Nd as n and other UTF-16 units as - (ksqlDB's Masker).

        Classes are Java's Character.getType; each UTF-16 unit is masked in turn."""
        return _java_mask(s, _DEFAULT_MASKS, whole)

    @scalar("MASK", params=[STRING, *four], returns=STRING, null_propagating=False, since=3)
    def mask_with_java(s: str | None, *masks: str | None) -> str | None:
        """Mask with the given one-unit masks (NULL keeps the class), as ksqlDB's Masker."""
        return _java_mask(s, masks, whole)

    def region(name: str, pick: Callable[[int, int], tuple[int, int]]) -> None:
        def apply(
            s: str | None, count: int | None, masks: tuple[str | None, ...], single: bool = False
        ) -> str | None:
            if s is None or count is None:
                return None
            _check_count(count, name.lower())
            start, end = pick(len(s), count)
            return s[:start] + _mask(s[start:end], masks, single=single) + s[end:]

        @scalar(name, params=[STRING, INTEGER], returns=STRING, until=2)
        def default(s: str, count: int) -> str | None:
            return apply(s, count, _DEFAULT_MASKS)

        @scalar(name, params=[STRING, INTEGER, *four], returns=STRING, null_propagating=False, until=1)
        def custom(s: str | None, count: int | None, *masks: str | None) -> str | None:
            return apply(s, count, masks)

        @scalar(
            name, params=[STRING, INTEGER, *four], returns=STRING, null_propagating=False,
            since=2, until=2,
        )
        def custom_single(s: str | None, count: int | None, *masks: str | None) -> str | None:
            return apply(s, count, masks, single=True)

        def apply_java(s: str | None, count: int | None, masks: tuple[str | None, ...]) -> str | None:
            if count is None:
                return None
            _check_count(count, name.lower())
            return _java_mask(s, masks, lambda n: pick(n, count))

        @scalar(name, params=[STRING, INTEGER], returns=STRING, null_propagating=False, since=3)
        def default_java(s: str | None, count: int | None) -> str | None:
            return apply_java(s, count, _DEFAULT_MASKS)

        @scalar(name, params=[STRING, INTEGER, *four], returns=STRING, null_propagating=False, since=3)
        def custom_java(s: str | None, count: int | None, *masks: str | None) -> str | None:
            return apply_java(s, count, masks)

        default.__doc__ = custom.__doc__ = f"{name}: mask part of the string."
        custom_single.__doc__ = f"{name}: mask part of the string, each mask one character."
        default_java.__doc__ = custom_java.__doc__ = (
            f"{name}: mask part of the string's UTF-16 units as ksqlDB's Masker does."
        )

    region("MASK_LEFT", lambda n, c: (0, min(c, n)))
    region("MASK_RIGHT", lambda n, c: (max(n - c, 0), n))
    region("MASK_KEEP_LEFT", lambda n, c: (min(c, n), n))
    region("MASK_KEEP_RIGHT", lambda n, c: (0, max(n - c, 0)))


_register_masks()


# --------------------------------------------------------------------------- characters and lists

_UNICODE_ESCAPE = re.compile(r"\\u+([0-9a-fA-F]{4})")


@scalar("CHR", params=[INTEGER], returns=STRING)
def chr_code(code: int) -> str | None:
    """The character with the given Unicode code point, or NULL if it is not one."""
    if not 0 <= code <= 0x10FFFF:
        return None
    return chr(code)


@scalar("CHR", params=[STRING], returns=STRING)
def chr_escape(code: str) -> str | None:
    """The character(s) of a Java escape such as '\\u004b', or NULL."""
    if len(code) < 6 or not code.startswith("\\u"):
        return None
    rest = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), code)
    if "\\u" in rest:
        return None
    return from_units(rest)


@scalar("ELT", params=[INTEGER, STRING], returns=STRING, variadic=True, null_propagating=False)
def elt(n: int | None, *items: str | None) -> str | None:
    """The ``n``-th (1-based) of the remaining arguments, or NULL if out of range."""
    if n is None or n < 1 or n > len(items):
        return None
    return items[n - 1]


@scalar("FIELD", params=[STRING, STRING], returns=INTEGER, variadic=True, null_propagating=False)
def field(s: str | None, *items: str | None) -> int:
    """The 1-based position of ``s`` among the remaining arguments, or 0."""
    if s is None:
        return 0
    for i, item in enumerate(items, start=1):
        if item == s:
            return i
    return 0


# --------------------------------------------------------------------------- hashes and ids


@scalar("MD5", params=[STRING], returns=STRING)
def md5(s: str) -> str:
    """The MD5 digest of the UTF-8 bytes of the string, as lower-case hex."""
    return hashlib.md5(s.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


@scalar("UUID", params=[], returns=STRING)
def random_uuid() -> str:
    """A random (version 4) UUID."""
    return str(_uuid.uuid4())


@scalar("UUID", params=[BYTES], returns=STRING)
def uuid_from_bytes(b: bytes) -> str:
    """The UUID whose 16 bytes are given."""
    if len(b) != 16:
        raise EvaluationError(f"UUID needs exactly 16 bytes, got {len(b)}.")
    return str(_uuid.UUID(bytes=b))
