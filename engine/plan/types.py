"""SQL types of the ksqlDB dialect, as immutable values.

Types print in ksqlDB's canonical text (``DECIMAL(4, 2)``, ``ARRAY<STRING>``,
``STRUCT<`A` INTEGER>``) and parse back from it, so that plans can store them as strings.

Python value representation used everywhere in the engine (serdes, evaluator, functions):
BOOLEAN bool, INTEGER/BIGINT int, DOUBLE float, DECIMAL decimal.Decimal, STRING str,
BYTES bytes, DATE datetime.date, TIME datetime.time, TIMESTAMP naive datetime.datetime in
UTC, ARRAY list, MAP dict, STRUCT dict keyed by field name in schema order; SQL NULL is None.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache

from lark import Lark, Transformer, UnexpectedInput

from engine.errors import PlanError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1


class BaseType(enum.Enum):
    """The base of a SQL type; parameterised bases carry their parameters in the type."""

    BOOLEAN = "BOOLEAN"
    INTEGER = "INTEGER"
    BIGINT = "BIGINT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    STRING = "STRING"
    BYTES = "BYTES"
    DATE = "DATE"
    TIME = "TIME"
    TIMESTAMP = "TIMESTAMP"
    ARRAY = "ARRAY"
    MAP = "MAP"
    STRUCT = "STRUCT"


class SqlType:
    """Base class of all SQL types."""

    base: BaseType

    def __str__(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def is_numeric(self) -> bool:
        return self.base in _NUMERIC_ORDER


@dataclass(frozen=True, slots=True)
class Primitive(SqlType):
    """A type without parameters: BOOLEAN, INTEGER, BIGINT, DOUBLE, STRING, ..."""

    base: BaseType

    def __post_init__(self) -> None:
        if self.base in (BaseType.DECIMAL, BaseType.ARRAY, BaseType.MAP, BaseType.STRUCT):
            raise PlanError(f"Type {self.base.value} needs parameters; use its own class.")

    def __str__(self) -> str:
        return self.base.value


@dataclass(frozen=True, slots=True)
class Decimal(SqlType):
    """DECIMAL(precision, scale)."""

    precision: int
    scale: int
    base: BaseType = BaseType.DECIMAL

    def __post_init__(self) -> None:
        if not 1 <= self.precision <= 1000:
            raise PlanError(f"DECIMAL precision must be at least 1, got {self.precision}.")
        if not 0 <= self.scale <= self.precision:
            raise PlanError(
                f"DECIMAL scale must be between 0 and the precision {self.precision}, "
                f"got {self.scale}."
            )

    def __str__(self) -> str:
        return f"DECIMAL({self.precision}, {self.scale})"


@dataclass(frozen=True, slots=True)
class Array(SqlType):
    """ARRAY<item>."""

    item: SqlType
    base: BaseType = BaseType.ARRAY

    def __str__(self) -> str:
        return f"ARRAY<{self.item}>"


@dataclass(frozen=True, slots=True)
class Map(SqlType):
    """MAP<key, value>."""

    key: SqlType
    value: SqlType
    base: BaseType = BaseType.MAP

    def __str__(self) -> str:
        return f"MAP<{self.key}, {self.value}>"


@dataclass(frozen=True, slots=True)
class Field:
    """One named field of a STRUCT."""

    name: str
    type: SqlType

    def __str__(self) -> str:
        return f"{quote_identifier(self.name)} {self.type}"


@dataclass(frozen=True, slots=True)
class Struct(SqlType):
    """STRUCT<name type, ...>; field order is significant."""

    fields: tuple[Field, ...]
    base: BaseType = BaseType.STRUCT

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for f in self.fields:
            if f.name in seen:
                raise PlanError(f"STRUCT has the field name `{f.name}` twice.")
            seen.add(f.name)

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def __str__(self) -> str:
        return "STRUCT<" + ", ".join(str(f) for f in self.fields) + ">"


BOOLEAN = Primitive(BaseType.BOOLEAN)
INTEGER = Primitive(BaseType.INTEGER)
BIGINT = Primitive(BaseType.BIGINT)
DOUBLE = Primitive(BaseType.DOUBLE)
STRING = Primitive(BaseType.STRING)
BYTES = Primitive(BaseType.BYTES)
DATE = Primitive(BaseType.DATE)
TIME = Primitive(BaseType.TIME)
TIMESTAMP = Primitive(BaseType.TIMESTAMP)

_NUMERIC_ORDER = {BaseType.INTEGER: 0, BaseType.BIGINT: 1, BaseType.DECIMAL: 2, BaseType.DOUBLE: 3}


def quote_identifier(name: str) -> str:
    """Back-quote an identifier as ksqlDB prints it in schemas."""
    return "`" + name.replace("`", "``") + "`"


def decimal_for_integral(t: SqlType) -> Decimal:
    """The DECIMAL an INTEGER or BIGINT widens to (ksqlDB: DECIMAL(10,0) / DECIMAL(19,0))."""
    if t.base is BaseType.INTEGER:
        return Decimal(10, 0)
    if t.base is BaseType.BIGINT:
        return Decimal(19, 0)
    if isinstance(t, Decimal):
        return t
    raise PlanError(f"Type {t} has no DECIMAL equivalent.")


def can_implicitly_cast(source: SqlType, target: SqlType) -> bool:
    """Whether a value of ``source`` may be passed where ``target`` is expected.

    ksqlDB widens INTEGER -> BIGINT -> DECIMAL -> DOUBLE; a DECIMAL widens to a DECIMAL
    that can hold it; containers widen element-wise; everything else must match exactly.
    """
    if source == target:
        return True
    if source.is_numeric and target.is_numeric:
        s, t = _NUMERIC_ORDER[source.base], _NUMERIC_ORDER[target.base]
        if s > t:
            return False
        if isinstance(target, Decimal):
            src = decimal_for_integral(source)
            int_digits = src.precision - src.scale
            return (
                target.precision - target.scale >= int_digits and target.scale >= src.scale
            )
        return True
    if isinstance(source, Array) and isinstance(target, Array):
        return can_implicitly_cast(source.item, target.item)
    if isinstance(source, Map) and isinstance(target, Map):
        return can_implicitly_cast(source.key, target.key) and can_implicitly_cast(
            source.value, target.value
        )
    if isinstance(source, Struct) and isinstance(target, Struct):
        if len(source.fields) != len(target.fields):
            return False
        return all(
            a.name == b.name and can_implicitly_cast(a.type, b.type)
            for a, b in zip(source.fields, target.fields, strict=True)
        )
    return False


def widen_numeric(a: SqlType, b: SqlType) -> SqlType:
    """The common type of two numeric types (used by arithmetic, comparison, CASE, IN)."""
    if not (a.is_numeric and b.is_numeric):
        raise PlanError(f"Cannot widen non-numeric types {a} and {b}.")
    if a.base is BaseType.DOUBLE or b.base is BaseType.DOUBLE:
        return DOUBLE
    if a.base is BaseType.DECIMAL or b.base is BaseType.DECIMAL:
        da, db = decimal_for_integral(a), decimal_for_integral(b)
        scale = max(da.scale, db.scale)
        int_digits = max(da.precision - da.scale, db.precision - db.scale)
        return Decimal(min(int_digits + scale, 1000), scale)
    if a.base is BaseType.BIGINT or b.base is BaseType.BIGINT:
        return BIGINT
    return INTEGER


# --------------------------------------------------------------------------- parsing

# Type rules shared with the schema grammar (engine.plan.schema), which adds columns.
TYPE_RULES = r"""
    ?type: array | map | struct | decimal | primitive
    array: "ARRAY"i "<" type ">"
    map: "MAP"i "<" type "," type ">"
    struct: "STRUCT"i "<" [field ("," field)*] ">"
    field: name type
    decimal: "DECIMAL"i "(" INT "," INT ")"
    primitive: WORD
    ?name: WORD | QUOTED
    WORD: /[0-9]*[A-Za-z_][A-Za-z0-9_]*/
    QUOTED: /`([^`]|``)*`/
    INT: /[0-9]+/
    %ignore /\s+/
"""
_TYPE_GRAMMAR = TYPE_RULES

_PRIMITIVE_NAMES = {
    "BOOLEAN": BOOLEAN,
    "INT": INTEGER,
    "INTEGER": INTEGER,
    "BIGINT": BIGINT,
    "DOUBLE": DOUBLE,
    "STRING": STRING,
    "VARCHAR": STRING,
    "BYTES": BYTES,
    "DATE": DATE,
    "TIME": TIME,
    "TIMESTAMP": TIMESTAMP,
}


def primitive_named(name: str) -> SqlType | None:
    """The primitive type a (case-insensitive) type name denotes, or None."""
    return _PRIMITIVE_NAMES.get(name.upper())


def identifier(token: object) -> str:
    """An identifier as written: back-quoted keeps its case, unquoted is upper-cased."""
    text = str(token)
    if text.startswith("`"):
        return text[1:-1].replace("``", "`")
    return text.upper()


class TypeTransformer(Transformer):  # type: ignore[type-arg]
    """Lark tree -> SqlType; the schema parser extends it with columns."""
    def array(self, items: list[SqlType]) -> SqlType:
        return Array(items[0])

    def map(self, items: list[SqlType]) -> SqlType:
        return Map(items[0], items[1])

    def struct(self, items: list[Field | None]) -> SqlType:
        return Struct(tuple(f for f in items if f is not None))

    def field(self, items: list) -> Field:  # type: ignore[type-arg]
        return Field(identifier(items[0]), items[1])

    def decimal(self, items: list) -> SqlType:  # type: ignore[type-arg]
        return Decimal(int(items[0]), int(items[1]))

    def primitive(self, items: list) -> SqlType:  # type: ignore[type-arg]
        found = primitive_named(str(items[0]))
        if found is None:
            raise PlanError(
                f"Unknown type '{items[0]}'; expected one of {', '.join(sorted(_PRIMITIVE_NAMES))}"
                ", DECIMAL, ARRAY, MAP or STRUCT."
            )
        return found


@lru_cache(maxsize=1)
def _type_parser() -> Lark:
    return Lark(_TYPE_GRAMMAR, start="type", parser="lalr")


@lru_cache(maxsize=4096)
def parse_type(text: str) -> SqlType:
    """Parse a type from its text form, for example ``MAP<STRING, ARRAY<INT>>``."""
    try:
        tree = _type_parser().parse(text)
    except UnexpectedInput as exc:
        raise PlanError(f"Cannot parse type '{text}': unexpected input at column {exc.column}.") from exc
    except PlanError:
        raise
    try:
        result = TypeTransformer().transform(tree)
    except Exception as exc:  # lark wraps transformer errors
        cause = exc.__context__ if isinstance(exc.__context__, PlanError) else exc
        raise PlanError(f"Cannot parse type '{text}': {cause}") from exc
    assert isinstance(result, SqlType)
    return result
