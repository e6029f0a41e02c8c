"""What the native compiler's level 2 adds to level 1, without Spark (lower layer).

The compiler (``engine.expressions.native``) builds Spark Columns and needs a SparkContext;
the planner only needs to know whether a step's expressions hold a form that level 2 runs in
Spark and level 1 sends to Python, to plan the level-2 step versions (``streamFilterV3``,
``tableFilterV4``, ``streamSelectV3``, ``tableSelectV3``) only where they change something.
Both read the rules here, so the two cannot disagree on which forms level 2 covers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from engine.errors import KsqlError
from engine.expressions.typer import Typer
from engine.functions.registry import ResolvedFunction
from engine.plan import expr as E
from engine.plan.types import BaseType, SqlType

_INTEGRAL = frozenset({BaseType.INTEGER, BaseType.BIGINT})
_NUMBERS = (BaseType.INTEGER, BaseType.BIGINT, BaseType.DOUBLE)


@dataclass(frozen=True)
class NativeCall:
    """A resolved call as a level-2 function form sees it: parameter and return types, and
    the argument expressions (for forms that need a constant argument)."""

    params: tuple[SqlType | None, ...]  # None: a NULL literal argument
    returns: SqlType
    args: tuple[E.Expr, ...]


def _params_in(*bases: BaseType) -> Callable[[NativeCall], bool]:
    return lambda call: all(p is not None and p.base in bases for p in call.params)


def _replace_accepts(call: NativeCall) -> bool:
    search = call.args[1]
    # Java inserts the replacement between every character for an empty search text; Spark
    # returns the input unchanged.
    return isinstance(search, E.Literal) and isinstance(search.value, str) and search.value != ""


def _one_double(call: NativeCall) -> bool:
    return len(call.params) == 1 and call.params[0] is not None and call.params[0].base is BaseType.DOUBLE


def _extreme_accepts(call: NativeCall) -> bool:
    # Spark's greatest/least skip NULLs as the evaluator does; DOUBLE is left out (NaN orders
    # above every number in Spark, and nowhere in Python's max), and so are the temporal types.
    # A NULL literal argument has no type of its own: Spark takes it as the others' type.
    bases = {p.base for p in call.params if p is not None}
    return len(bases) == 1 and bases <= {BaseType.INTEGER, BaseType.BIGINT, BaseType.STRING}


# The functions level 2 runs in Spark, by name and function version (``Signature.since``),
# each with the calls it covers (others fall back with their parameter types named).
LEVEL_2_FUNCTIONS: dict[tuple[str, int], Callable[[NativeCall], bool]] = {
    ("LEN", 1): _params_in(BaseType.STRING),
    ("TRIM", 1): _params_in(BaseType.STRING),
    ("LTRIM", 1): _params_in(BaseType.STRING),
    ("RTRIM", 1): _params_in(BaseType.STRING),
    ("REPLACE", 1): _replace_accepts,
    ("CONCAT_WS", 1): _params_in(BaseType.STRING),
    # Version 2 takes the separator as its first value; fewer than two values fail in Python.
    ("CONCAT_WS", 2): lambda call: len(call.params) >= 2 and _params_in(BaseType.STRING)(call),
    ("SQRT", 1): _params_in(*_NUMBERS),
    ("SIGN", 1): _params_in(*_NUMBERS),
    ("CEIL", 1): _params_in(*_NUMBERS),
    ("FLOOR", 1): _params_in(*_NUMBERS),
    ("ROUND", 1): _one_double,
    ("TRUNC", 1): _one_double,
    ("GREATEST", 1): _extreme_accepts,
    ("LEAST", 1): _extreme_accepts,
    ("AS_VALUE", 1): lambda call: True,
    ("ARRAY_LENGTH", 1): lambda call: True,
}


def nonzero_integral_literal(expr: E.Expr) -> bool:
    """Whether ``expr`` is an integer constant other than 0 (a divisor level 2 divides by)."""
    return (
        isinstance(expr, E.Literal)
        and isinstance(expr.value, int)
        and not isinstance(expr.value, bool)
        and expr.value != 0
    )


def nonzero_literal(expr: E.Expr) -> bool:
    """Whether ``expr`` is a numeric constant other than 0 (level 1 divides DOUBLEs by it)."""
    return isinstance(expr, E.Literal) and expr.value not in (None, 0)


def native_call(call: E.FunctionCall, resolved: ResolvedFunction) -> tuple[tuple[str, int], NativeCall]:
    """The level-2 table key and view of a call as the typer resolved it."""
    key = (call.name.upper(), resolved.signature.since)
    return key, NativeCall(tuple(resolved.param_types), resolved.return_type, tuple(call.args))


def level_2_covers(key: tuple[str, int], call: NativeCall) -> bool:
    """Whether level 2 has a Spark form for this call (its function and overload)."""
    accepts = LEVEL_2_FUNCTIONS.get(key)
    return accepts is not None and accepts(call)


def level_2_forms(expressions: Sequence[E.Expr], columns: Mapping[str, SqlType]) -> list[str]:
    """The sub-expressions (as SQL) of ``expressions`` that level 2 runs in Spark and level 1
    does not. Empty: the level-1 step versions build these expressions the same way."""
    found: list[str] = []
    for expression in expressions:
        typer = Typer(columns)
        try:
            typer.type_of(expression, {})
        except KsqlError:
            continue  # not typed here: both levels fall back
        found.extend(E.format_sql(node) for node in _outside_lambdas(expression) if _level_2_only(typer, node))
    return found


def _outside_lambdas(expr: E.Expr) -> list[E.Expr]:
    """The nodes of ``expr``, pre-order, except lambda bodies: both levels run a lambda, and
    so everything in it, in Python."""
    if isinstance(expr, E.Lambda):
        return []
    return [expr, *(node for child in expr.children() for node in _outside_lambdas(child))]


def _level_2_only(typer: Typer, node: E.Expr) -> bool:
    if isinstance(node, E.Arithmetic) and node.op in ("/", "%"):
        result = typer.known(node)
        if result is None:
            return False
        if result.base in _INTEGRAL:
            return nonzero_integral_literal(node.right)
        return result.base is BaseType.DOUBLE and not nonzero_literal(node.right)
    if isinstance(node, E.FunctionCall):
        resolved = typer.functions.get(id(node))
        return resolved is not None and level_2_covers(*native_call(node, resolved))
    return False
