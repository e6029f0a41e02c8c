"""The expression tree shared by the parser, the analyser, the plan and the evaluator.

Nodes are immutable dataclasses with a wire name (``KIND``). They serialise to JSON
objects ``{"kind": ..., <fields>}`` (see ``to_json`` / ``from_json``) so that plans carry
expressions as data: the lower layer never parses SQL text.

``format_sql`` prints an expression the way ksqlDB formats it in schemas and messages.
"""

from __future__ import annotations

import base64
import dataclasses
import decimal
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, TypeVar, dataclass_transform

from engine.errors import SerdeError
from engine.plan import types as T
from engine.plan.constraints import Minimum, OneOf
from engine.plan.types import SqlType, parse_type

# Enumerated options of expression fields (JSON Schema enums, see engine.plan.constraints).
# No name here may contain "Expr" or "SqlType": _field_from_json reads annotations as text.
ARITHMETIC_OPS = ("+", "-", "*", "/", "%")
COMPARISON_OPS = ("=", "<>", "<", "<=", ">", ">=", "IS DISTINCT FROM", "IS NOT DISTINCT FROM")
LOGICAL_OPS = ("AND", "OR")
# The time units the parser writes (engine/parser: a unit keyword, singular, plus "S").
INTERVAL_UNITS = ("MILLISECONDS", "SECONDS", "MINUTES", "HOURS", "DAYS")
ArithmeticOp = Annotated[str, OneOf(ARITHMETIC_OPS)]
ComparisonOp = Annotated[str, OneOf(COMPARISON_OPS)]
LogicalOp = Annotated[str, OneOf(LOGICAL_OPS)]
TimeUnit = Annotated[str, OneOf(INTERVAL_UNITS)]
# The version of a function's or of CAST's behaviour an expression was planned with.
BehaviourVersion = Annotated[int, Minimum(1)]


class Expr:
    """Base of all expression nodes."""

    KIND: ClassVar[str]

    def children(self) -> tuple[Expr, ...]:
        out: list[Expr] = []
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            _collect(getattr(self, f.name), out)
        return tuple(out)

    def __str__(self) -> str:
        return format_sql(self)


def _collect(value: Any, out: list[Expr]) -> None:
    if isinstance(value, Expr):
        out.append(value)
    elif isinstance(value, tuple):
        for v in value:
            _collect(v, out)


_KINDS: dict[str, type[Expr]] = {}
# Field metadata: the field is left out of the JSON at its default, so that a field added
# later does not change the plans of expressions that do not use it.
_OMIT_DEFAULT = "omitDefault"
OMIT_DEFAULT = _OMIT_DEFAULT  # for the other plan objects' fields (engine.plan.serde)


def _node(cls: type[Expr]) -> type[Expr]:
    if cls.KIND in _KINDS:
        raise TypeError(f"Expression kind '{cls.KIND}' is registered twice.")
    _KINDS[cls.KIND] = cls
    return cls


_N = TypeVar("_N")


@dataclass_transform(frozen_default=True)
def _node_dc(cls: type[_N]) -> type[_N]:
    return dataclass(frozen=True, slots=True)(cls)


@_node
@_node_dc
class Literal(Expr):
    """A typed constant; ``value`` is None for NULL (then ``type`` is None)."""

    KIND: ClassVar[str] = "literal"
    value: Any
    type: SqlType | None


@_node
@_node_dc
class ColumnRef(Expr):
    """A column, optionally qualified by a source name or alias (``T.ID``)."""

    KIND: ClassVar[str] = "column"
    name: str
    source: str | None = None


@_node
@_node_dc
class LambdaVariable(Expr):
    """A reference to a lambda parameter inside a lambda body."""

    KIND: ClassVar[str] = "lambdaVariable"
    name: str


@_node
@_node_dc
class Lambda(Expr):
    """``(x, y) => body``."""

    KIND: ClassVar[str] = "lambda"
    params: tuple[str, ...]
    body: Expr


@_node
@_node_dc
class IntervalUnit(Expr):
    """A time unit keyword used as a function argument, e.g. ``TIMESTAMPADD(SECONDS, ...)``."""

    KIND: ClassVar[str] = "intervalUnit"
    unit: TimeUnit


@_node
@_node_dc
class Dereference(Expr):
    """Struct field access ``base->field``."""

    KIND: ClassVar[str] = "dereference"
    base: Expr
    field: str


@_node
@_node_dc
class Subscript(Expr):
    """Array (1-based, negative from the end) or map access ``base[index]``."""

    KIND: ClassVar[str] = "subscript"
    base: Expr
    index: Expr


@_node
@_node_dc
class Negate(Expr):
    """Unary minus (unary plus is dropped by the parser)."""

    KIND: ClassVar[str] = "negate"
    operand: Expr


@_node
@_node_dc
class Arithmetic(Expr):
    """``left op right`` with op one of + - * / %."""

    KIND: ClassVar[str] = "arithmetic"
    op: ArithmeticOp
    left: Expr
    right: Expr

    OPS: ClassVar[frozenset[str]] = frozenset(ARITHMETIC_OPS)


@_node
@_node_dc
class Comparison(Expr):
    """``left op right`` with op one of = <> < <= > >= IS DISTINCT FROM, IS NOT DISTINCT FROM."""

    KIND: ClassVar[str] = "comparison"
    op: ComparisonOp
    left: Expr
    right: Expr

    OPS: ClassVar[frozenset[str]] = frozenset(COMPARISON_OPS)


@_node
@_node_dc
class Logical(Expr):
    """``left AND right`` / ``left OR right`` with SQL three-valued logic."""

    KIND: ClassVar[str] = "logical"
    op: LogicalOp
    left: Expr
    right: Expr


@_node
@_node_dc
class Not(Expr):
    """``NOT operand``."""

    KIND: ClassVar[str] = "not"
    operand: Expr


@_node
@_node_dc
class IsNull(Expr):
    """``operand IS [NOT] NULL``."""

    KIND: ClassVar[str] = "isNull"
    operand: Expr
    negated: bool = False


@_node
@_node_dc
class In(Expr):
    """``value [NOT] IN (items...)``."""

    KIND: ClassVar[str] = "in"
    value: Expr
    items: tuple[Expr, ...]
    negated: bool = False


@_node
@_node_dc
class Between(Expr):
    """``value [NOT] BETWEEN low AND high``."""

    KIND: ClassVar[str] = "between"
    value: Expr
    low: Expr
    high: Expr
    negated: bool = False


@_node
@_node_dc
class Like(Expr):
    """``value [NOT] LIKE pattern [ESCAPE 'c']``; % and _ wildcards."""

    KIND: ClassVar[str] = "like"
    value: Expr
    pattern: Expr
    escape: str | None = None
    negated: bool = False


@_node
@_node_dc
class WhenClause(Expr):
    """One ``WHEN condition THEN result`` of a CASE."""

    KIND: ClassVar[str] = "when"
    condition: Expr
    result: Expr


@_node
@_node_dc
class Case(Expr):
    """Searched CASE (``operand`` None) or simple CASE; ``default`` None means ELSE NULL."""

    KIND: ClassVar[str] = "case"
    operand: Expr | None
    whens: tuple[WhenClause, ...]
    default: Expr | None = None


@_node
@_node_dc
class Cast(Expr):
    """``CAST(operand AS type)``; ``semantics``: the version of CAST's behaviour the cast was
    planned with (``engine.expressions.cast``); plans saved before CAST was versioned have
    none, which is 1."""

    KIND: ClassVar[str] = "cast"
    operand: Expr
    type: SqlType
    semantics: BehaviourVersion = dataclasses.field(default=1, metadata={_OMIT_DEFAULT: True})
    # ksqlDB's ksql.cast.strings.preserve.nulls=false: a NULL BOOLEAN, INT, BIGINT, DOUBLE,
    # ARRAY, MAP or STRUCT (or such an element of a collection cast) becomes the text 'null'.
    null_text: bool = dataclasses.field(default=False, metadata={_OMIT_DEFAULT: True})
    # ksqlDB's ksql.nested.error.set.null: True, a value that fails to convert is NULL; False,
    # the failure fails the whole expression, which its step sets to NULL.
    error_null: bool = dataclasses.field(default=True, metadata={_OMIT_DEFAULT: True})


@_node
@_node_dc
class FunctionCall(Expr):
    """A scalar, aggregate or table function call; ``star`` for ``COUNT(*)``.

    ``semantics``: the version of the function's behaviour the call was planned with
    (``FunctionRegistry``); plans saved before functions were versioned have none, which is 1.
    """

    KIND: ClassVar[str] = "call"
    name: str
    args: tuple[Expr, ...]
    star: bool = False
    distinct: bool = False
    semantics: BehaviourVersion = dataclasses.field(default=1, metadata={_OMIT_DEFAULT: True})
    # ksqlDB's ksql.nested.error.set.null: True, a scalar call that fails is NULL; False, the
    # failure fails the whole expression, which its step sets to NULL.
    error_null: bool = dataclasses.field(default=True, metadata={_OMIT_DEFAULT: True})


@_node
@_node_dc
class CreateArray(Expr):
    """``ARRAY[a, b, ...]``."""

    KIND: ClassVar[str] = "array"
    items: tuple[Expr, ...]


@_node
@_node_dc
class MapEntry(Expr):
    """One ``key := value`` of a MAP constructor."""

    KIND: ClassVar[str] = "mapEntry"
    key: Expr
    value: Expr


@_node
@_node_dc
class CreateMap(Expr):
    """``MAP(k := v, ...)``."""

    KIND: ClassVar[str] = "map"
    entries: tuple[MapEntry, ...]


@_node
@_node_dc
class StructField(Expr):
    """One ``name := value`` of a STRUCT constructor."""

    KIND: ClassVar[str] = "structField"
    name: str
    value: Expr


@_node
@_node_dc
class CreateStruct(Expr):
    """``STRUCT(name := value, ...)``."""

    KIND: ClassVar[str] = "struct"
    fields: tuple[StructField, ...]


# --------------------------------------------------------------------------- JSON serde


def literal_to_json(value: Any, sql_type: SqlType | None) -> Any:
    """The JSON form of a literal value of the given type."""
    if value is None or sql_type is None:
        return None
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, float):
        return repr(value)
    return value


def literal_from_json(value: Any, sql_type: SqlType | None) -> Any:
    if value is None or sql_type is None:
        return None
    base = sql_type.base
    if base is T.BaseType.DECIMAL:
        return decimal.Decimal(value)
    if base is T.BaseType.BYTES:
        return base64.b64decode(value)
    if base is T.BaseType.DOUBLE:
        return float(value)
    return value


def to_json(expr: Expr) -> dict[str, Any]:
    """Serialise an expression tree to plain JSON values."""
    out: dict[str, Any] = {"kind": expr.KIND}
    if isinstance(expr, Literal):
        out["value"] = literal_to_json(expr.value, expr.type)
        out["type"] = None if expr.type is None else str(expr.type)
        return out
    for f in dataclasses.fields(expr):  # type: ignore[arg-type]
        value = getattr(expr, f.name)
        if f.metadata.get(_OMIT_DEFAULT) and value == f.default:
            continue
        out[f.name] = _field_to_json(value)
    return out


def _field_to_json(value: Any) -> Any:
    if isinstance(value, Expr):
        return to_json(value)
    if isinstance(value, SqlType):
        return str(value)
    if isinstance(value, tuple):
        return [_field_to_json(v) for v in value]
    return value


def from_json(data: Any) -> Expr:
    """Rebuild an expression tree from ``to_json`` output; unknown kinds are a SerdeError."""
    if not isinstance(data, dict) or "kind" not in data:
        raise SerdeError(f"An expression must be a JSON object with a 'kind', got {data!r}.")
    kind = data["kind"]
    cls = _KINDS.get(kind)
    if cls is None:
        raise SerdeError(
            f"Unknown expression kind '{kind}'; known kinds: {', '.join(sorted(_KINDS))}."
        )
    if cls is Literal:
        type_text = data.get("type")
        sql_type = None if type_text is None else parse_type(type_text)
        return Literal(literal_from_json(data.get("value"), sql_type), sql_type)
    kwargs: dict[str, Any] = {}
    names = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - set(names) - {"kind"}
    if unknown:
        raise SerdeError(
            f"Unknown field(s) {sorted(unknown)} in expression '{kind}'; "
            f"known fields: {sorted(names)}."
        )
    for name, f in names.items():
        if name not in data:
            if f.default is dataclasses.MISSING:
                raise SerdeError(f"Expression '{kind}' is missing its field '{name}'.")
            continue
        kwargs[name] = _field_from_json(data[name], f.type)
    return cls(**kwargs)


def _field_from_json(value: Any, annotation: Any) -> Any:
    ann = str(annotation)
    if value is None:
        return None
    if ann.startswith("tuple[str"):
        return tuple(value)
    if ann.startswith("tuple["):
        return tuple(from_json(v) for v in value)
    if "SqlType" in ann:
        return parse_type(value)
    if "Expr" in ann or "WhenClause" in ann:
        return from_json(value)
    return value


# --------------------------------------------------------------------------- formatting


def _quote_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# Keywords the parser reserves (engine/parser/ksql.lark); they must be back-quoted to be read
# back as identifiers. tests/engine/parser keeps this list equal to the grammar's.
RESERVED_WORDS = frozenset(
    """ADVANCE ALL AND AS BEGINNING BETWEEN BY CASE CAST CONNECTOR CONNECTORS CREATE DAYS
    DECIMAL DELETE DESCRIBE DISTINCT DROP ELSE END EXISTS EXTENDED FALSE FROM FULL GROUP
    HAVING HOPPING HOURS IN INNER INSERT INTO IS JOIN LEFT LIKE LIMIT LIST MILLISECOND
    MILLISECONDS MINUTES NOT NULL ON OR OUTER PAUSE PRINT QUERIES RESUME RETENTION RIGHT RUN
    SAMPLE SCRIPT SECONDS SELECT SIZE STREAM STREAMS TABLE TERMINATE THEN TOPICS TRUE TUMBLING
    UNSET VALUES WHEN WHERE WINDOW WITH WITHIN""".split()
)


def format_identifier(name: str) -> str:
    """Print an identifier, back-quoting it when it is not a plain upper-case non-reserved name."""
    if name and (name[0].isalpha() or name[0] == "_") and all(
        c.isalnum() or c == "_" for c in name
    ) and name == name.upper() and name not in RESERVED_WORDS:
        return name
    return "`" + name.replace("`", "``") + "`"


def _postfix_base(base: Expr) -> str:
    # "->" and "[]" bind tighter than unary minus: -(x)->f must keep its parentheses.
    text = format_sql(base)
    return f"({text})" if isinstance(base, Negate) else text


def format_sql(expr: Expr) -> str:
    """Format an expression as ksqlDB's ExpressionFormatter does (fully parenthesised)."""
    f = format_sql
    match expr:
        case Literal(value=None):
            return "null"
        case Literal(value=v, type=t):
            if t is not None and t.base is T.BaseType.STRING:
                return _quote_string(v)
            if isinstance(v, bool):
                return "true" if v else "false"
            if isinstance(v, bytes):
                return "X'" + v.hex().upper() + "'"
            if isinstance(v, float):
                # An exponent keeps the text a DOUBLE literal when parsed back (1.5 is DECIMAL).
                text = repr(v).replace("e", "E")
                return text if "E" in text or not text[-1].isdigit() else text + "E0"
            return str(v)
        case ColumnRef(name=n, source=None):
            return format_identifier(n)
        case ColumnRef(name=n, source=str() as s):
            return f"{format_identifier(s)}.{format_identifier(n)}"
        case LambdaVariable(name=n):
            return n
        case Lambda(params=ps, body=b):
            return f"({', '.join(ps)}) => {f(b)}"
        case IntervalUnit(unit=u):
            return u
        case Dereference(base=b, field=name):
            return f"{_postfix_base(b)}->{format_identifier(name)}"
        case Subscript(base=b, index=i):
            return f"{_postfix_base(b)}[{f(i)}]"
        case Negate(operand=o):
            inner = f(o)
            # A space keeps "- -1" from reading as the comment "--1" (as ksqlDB's formatter).
            return f"- {inner}" if inner.startswith("-") else f"-{inner}"
        case Arithmetic(op=op, left=left, right=right) | Comparison(op=op, left=left, right=right):
            return f"({f(left)} {op} {f(right)})"
        case Logical(op=op, left=left, right=right):
            return f"({f(left)} {op} {f(right)})"
        case Not(operand=o):
            return f"(NOT {f(o)})"
        case IsNull(operand=o, negated=neg):
            return f"({f(o)} IS {'NOT ' if neg else ''}NULL)"
        case In(value=v, items=items, negated=neg):
            return f"({f(v)} {'NOT ' if neg else ''}IN ({', '.join(f(i) for i in items)}))"
        case Between(value=v, low=lo, high=hi, negated=neg):
            return f"({f(v)} {'NOT ' if neg else ''}BETWEEN {f(lo)} AND {f(hi)})"
        case Like(value=v, pattern=p, escape=esc, negated=neg):
            tail = f" ESCAPE {_quote_string(esc)}" if esc is not None else ""
            return f"({f(v)} {'NOT ' if neg else ''}LIKE {f(p)}{tail})"
        case WhenClause(condition=c, result=r):
            return f"WHEN {f(c)} THEN {f(r)}"
        case Case(operand=o, whens=ws, default=d):
            head = "CASE" if o is None else f"CASE {f(o)}"
            body = " ".join(f(w) for w in ws)
            tail = f" ELSE {f(d)}" if d is not None else ""
            return f"({head} {body}{tail} END)"
        case Cast(operand=o, type=t):
            return f"CAST({f(o)} AS {t})"
        case FunctionCall(name=n, star=True):
            return f"{n}(*)"
        case FunctionCall(name=n, args=args, distinct=dist):
            return f"{n}({'DISTINCT ' if dist else ''}{', '.join(f(a) for a in args)})"
        case CreateArray(items=items):
            return f"ARRAY[{', '.join(f(i) for i in items)}]"
        case MapEntry(key=k, value=v):
            return f"{f(k)}:={f(v)}"
        case CreateMap(entries=es):
            return f"MAP({', '.join(f(e) for e in es)})"
        case StructField(name=n, value=v):
            return f"{format_identifier(n)}:={f(v)}"
        case CreateStruct(fields=fs):
            return f"STRUCT({', '.join(f(x) for x in fs)})"
    raise TypeError(f"format_sql does not know expression node {type(expr).__name__}.")


def walk(expr: Expr) -> list[Expr]:
    """All nodes of the tree, pre-order."""
    out = [expr]
    for child in expr.children():
        out.extend(walk(child))
    return out
