"""The typed function registry: signatures, overload resolution, generics and lambdas.

Functions are plain Python callables over the engine's Python value representation
(see ``engine.plan.types``). They are registered with a decorator::

    @scalar("ABS", params=[T.INTEGER], returns=T.INTEGER)
    def abs_int(x: int) -> int:
        return abs(x)

Overloads share a name. Resolution follows ksqlDB's UdfIndex: overloads that fit without
implicit casts win; otherwise the candidate needing the shortest implicit widenings
(INTEGER -> BIGINT -> DECIMAL -> DOUBLE) wins, non-variadic before variadic. A tie, or
several variadic overloads that all need casts, is ambiguous (a TypeCheckError, as in
ksqlDB). A NULL literal argument (type ``None``) matches any parameter; a DECIMAL
parameter takes any DECIMAL as it is. ``Generic("T")`` parameters bind to the argument's type and must bind
consistently. A ``LambdaType`` parameter takes a lambda; the typer first asks
``lambda_param_types`` for the lambda's parameter types, types its body, then resolves with
the full ``LambdaType``. An ``ANY`` parameter takes an argument of any type as it is.

Aggregate functions register with ``@aggregate`` on a factory of aggregators; their
protocol and the planner-facing ``aggregate_spec`` live in ``engine.functions.udaf``.

This module imports no pyspark and nothing from the upper layer.
"""

from __future__ import annotations

import enum
import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import KsqlError, TypeCheckError, UnknownFunctionError, newer_behaviour_error
from engine.plan import types as T
from engine.plan.types import SqlType, can_implicitly_cast


class FunctionKind(enum.Enum):
    SCALAR = "scalar"
    TABLE = "table"
    AGGREGATE = "aggregate"


@dataclass(frozen=True, slots=True)
class Generic(SqlType):
    """A type variable in a signature, e.g. the ``T`` of ``ARRAY<T>``."""

    name: str
    base: T.BaseType = T.BaseType.STRUCT  # unused; generics never reach values

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class LambdaType(SqlType):
    """The type of a lambda argument: parameter types and result type.

    In a signature both may contain generics. From the typer, ``result`` is None while the
    body is not typed yet (the first resolution phase).
    """

    params: tuple[SqlType | None, ...]
    result: SqlType | None
    base: T.BaseType = T.BaseType.STRUCT  # unused

    def __str__(self) -> str:
        ps = ", ".join(str(p) for p in self.params)
        return f"LAMBDA<({ps}) => {self.result}>"


@dataclass(frozen=True, slots=True)
class AnyType(SqlType):
    """A parameter that takes an argument of any type as it is (Java's ``Object``)."""

    base: T.BaseType = T.BaseType.STRUCT  # unused

    def __str__(self) -> str:
        return "ANY"


ANY = AnyType()

ReturnSpec = SqlType | Callable[[Sequence[SqlType | None]], SqlType]


@dataclass(frozen=True, slots=True)
class AggregateInfo:
    """What an aggregate overload adds to its signature.

    ``init_params``: how many trailing declared parameters are literal init arguments.
    ``supports_undo``: whether ksqlDB allows it on a table source (a TableUdaf).
    ``intermediate``: the SQL type of its accumulator (None: the return type), checked
    against the value format like ksqlDB does.
    """

    init_params: int = 0
    supports_undo: bool = False
    intermediate: ReturnSpec | None = None


@dataclass(frozen=True, slots=True)
class Signature:
    """One overload of a function."""

    name: str
    params: tuple[SqlType, ...]
    returns: ReturnSpec
    impl: Callable[..., Any]
    variadic: bool = False
    null_propagating: bool = True
    kind: FunctionKind = FunctionKind.SCALAR
    description: str = ""
    aggregate: AggregateInfo | None = None
    # The versions of the function's behaviour this overload implements (see
    # ``FunctionRegistry``): from ``since`` to ``until`` (None: still current).
    since: int = 1
    until: int | None = None
    # ``impl`` is a class whose instances keep state between calls: each call site gets its
    # own instance (``ResolvedFunction.bound``), as ksqlDB makes one UDF instance per call.
    stateful: bool = False
    # ``impl`` takes the coerced argument types too, as the keyword ``arg_types`` (a Java body
    # whose result shows how Java holds a value, e.g. the hash order of a map's keys).
    typed: bool = False

    def implements(self, semantics: int | None) -> bool:
        """Whether this overload serves calls planned with ``semantics`` (None: current)."""
        if semantics is None:
            return self.until is None
        return self.since <= semantics and (self.until is None or semantics <= self.until)

    def describe(self) -> str:
        ps = [str(p) for p in self.params]
        if self.variadic and ps:
            ps[-1] = ps[-1] + "..."
        return f"{self.name}({', '.join(ps)})"


@dataclass(frozen=True, slots=True)
class ResolvedFunction:
    """A signature bound to concrete argument types.

    ``param_types`` holds, per actual argument, the type the argument is coerced to before
    the call (None where the argument is a NULL literal of unknown type).
    """

    signature: Signature
    param_types: tuple[SqlType | None, ...]
    return_type: SqlType

    @property
    def name(self) -> str:
        return self.signature.name

    def invoke(self, args: Sequence[Any]) -> Any:
        """Call the implementation; NULL in gives NULL out when the function propagates nulls."""
        if self.signature.null_propagating and any(a is None for a in args):
            return None
        if self.signature.typed:
            return self.signature.impl(*args, arg_types=self.param_types)
        return self.signature.impl(*args)

    def bound(self) -> Callable[[Sequence[Any]], Any]:
        """``invoke`` for one call site. A stateful function (``Signature.stateful``) gets an
        instance of its own here: a compiled expression carries it to each Spark task, so
        its state starts afresh in every task (one per partition and micro-batch; ksqlDB's
        instance lives as long as its stream task)."""
        if not self.signature.stateful:
            return self.invoke
        instance = self.signature.impl()
        null_propagating = self.signature.null_propagating
        extra = {"arg_types": self.param_types} if self.signature.typed else {}

        def call(args: Sequence[Any]) -> Any:
            if null_propagating and any(a is None for a in args):
                return None
            return instance(*args, **extra)

        return call


@dataclass
class FunctionRegistry:
    """All functions by upper-case name.

    A function's behaviour is versioned. A call in a plan records the version it was planned
    with (``FunctionCall.semantics``, 1 in plans saved before functions were versioned), and
    resolves among the overloads implementing that version. A fix that changes what a
    function returns registers new overloads ``since`` the next version and closes the old
    ones with ``until``: saved plans keep their old results, new plans get the fix.
    """

    _by_name: dict[str, list[Signature]] = field(default_factory=dict)
    # Functions whose ksqlDB declaration names them in upper case (its test plugins); the
    # built-in functions are declared in lower case, and its messages name them so.
    _declared_upper: set[str] = field(default_factory=set)
    _internal: set[str] = field(default_factory=set)
    # Function -> the version from which calls needing casts rank overloads as ksqlDB does.
    _ksqldb_ties: dict[str, int] = field(default_factory=dict)
    # Function -> the lines its messages list as the valid calls (ksqlDB's own list).
    _listed: dict[str, list[str]] = field(default_factory=dict)

    def list_alternatives(self, listed: dict[str, list[str]]) -> None:
        """Messages about these scalar and table functions list these lines as their valid
        calls (``ksqldb_alternatives``) instead of kspark's overloads."""
        self._listed.update({n.upper(): lines for n, lines in listed.items()})

    def declare_internal(self, *names: str) -> None:
        """Leave these functions out of ``names`` (SHOW FUNCTIONS): kspark's own, for plans
        it imports, not ksqlDB's."""
        self._internal.update(n.upper() for n in names)

    def declare_ksqldb_ties(self, name: str, *, since: int) -> None:
        """From version ``since`` of the function, rank the overloads a call fits as ksqlDB's
        UdfIndex does: by their shape only (non-variadic first, then more parameters, then
        fewer generics), with no cost for how far an implicit cast widens, so that two
        overloads a call reaches only through casts (ROUND(INTEGER, INTEGER): DOUBLE or
        DECIMAL) are ambiguous. Earlier versions keep the cheapest widening. ``since`` is a
        version of the function (``current_semantics``) even where no overload starts at it,
        so overloads closed with ``until`` at the version before leave new plans."""
        self._ksqldb_ties[name.upper()] = since

    def declare_upper_case(self, *names: str) -> None:
        """Name these functions in upper case in messages, as ksqlDB's declarations do."""
        self._declared_upper.update(n.upper() for n in names)

    def declared_name(self, name: str) -> str:
        """The function's name as ksqlDB declares it (``greatest``, ``MULTI_ARG``)."""
        upper = name.upper()
        return upper if upper in self._declared_upper else name.lower()

    def register(self, signature: Signature) -> None:
        name = signature.name.upper()
        existing = self._by_name.setdefault(name, [])
        for other in existing:
            if (
                other.params == signature.params
                and other.variadic == signature.variadic
                and _overlap(other, signature)
            ):
                raise TypeError(f"Function {signature.describe()} is registered twice.")
        existing.append(signature)

    def names(self) -> list[str]:
        """The functions ksqlDB users see (internal ones left out)."""
        return sorted(n for n in self._by_name if n not in self._internal)

    def kind_of(self, name: str) -> FunctionKind | None:
        sigs = self._by_name.get(name.upper())
        return sigs[0].kind if sigs else None

    def signatures(self, name: str, semantics: int | None = None) -> list[Signature]:
        """The overloads implementing version ``semantics`` of the function (None: current);
        a version newer than this engine's is an error, never served by its current one."""
        sigs = self._by_name.get(name.upper())
        if not sigs:
            raise UnknownFunctionError(f"Can't find any functions with the name '{name.upper()}'.")
        current = self.current_semantics(name)
        if semantics is not None and semantics > current:
            raise newer_behaviour_error(f"Function '{self.declared_name(name)}'", semantics, current)
        return [s for s in sigs if s.implements(semantics)]

    def current_semantics(self, name: str) -> int:
        """The version of the function's behaviour new plans record (1 for unknown names)."""
        upper = name.upper()
        newest = max((s.since for s in self._by_name.get(upper, ())), default=1)
        return max(newest, self._ksqldb_ties.get(upper, 1))

    def settled_semantics(self, name: str, arg_types: Sequence[SqlType | None], semantics: int) -> int:
        """The version a call planned at ``semantics`` records once its argument types are
        known: the lowest version that resolves the call to the same overload.

        A new version that changes one overload (SUM over DECIMAL) then leaves the plans of
        calls to the others (SUM over INTEGER) as they were: they record the version they
        recorded before, and a saved plan and a new one of the same query stay equal.
        """
        chosen = self.resolve(name, arg_types, semantics).signature
        for version in range(1, semantics):
            try:
                if self.resolve(name, arg_types, version).signature is chosen:
                    return version
            except KsqlError:
                continue
        return semantics

    def lambda_param_types(
        self, name: str, arg_types: Sequence[SqlType | None], index: int, semantics: int | None = None
    ) -> tuple[SqlType, ...]:
        """Parameter types of the lambda at ``index``, bound from the other arguments.

        Lambda arguments in ``arg_types`` are ``LambdaType(params=(None,)*arity, result=None)``.
        """
        for _sig, bindings, params, _cost, _rank in self._matches(name, arg_types, semantics):
            lam = params[index]
            if isinstance(lam, LambdaType):
                return tuple(_substitute(p, bindings) for p in lam.params)  # type: ignore[misc]
        raise self._no_match(name, arg_types, semantics)

    def resolve(
        self,
        name: str,
        arg_types: Sequence[SqlType | None],
        semantics: int | None = None,
        *,
        arg_labels: Sequence[str | None] | None = None,
    ) -> ResolvedFunction:
        """Pick the best overload for the argument types; raise a clear error if none fits.

        Like ksqlDB's UdfIndex: overloads that fit without implicit casts win over those
        that need casts; within a phase the cheapest fit wins (non-variadic, then fewer
        generics). Ties, and several variadic overloads that all need casts, are ambiguous.
        ``semantics``: the version of the function's behaviour the call was planned with.
        ``arg_labels``: per argument, the type a message names where it is not the type's own
        text (a time-unit keyword is ksqlDB's ``INTERVAL UNIT``, typed STRING here).
        """
        matches = self._matches(name, arg_types, semantics) or self._matches(
            name, arg_types, semantics, text_to_time=True
        )
        if not matches:
            raise self._no_match(name, arg_types, semantics, arg_labels)
        exact = [m for m in matches if m[3] == 0]
        phase = exact or matches
        ties_since = self._ksqldb_ties.get(name.upper())
        if ties_since is not None and (semantics is None or semantics >= ties_since):
            phase = sorted(phase, key=lambda m: _ksqldb_rank(m[0]), reverse=True)
            if len(phase) > 1 and _ksqldb_rank(phase[0][0]) == _ksqldb_rank(phase[1][0]):
                raise self._ambiguous(name, arg_types, semantics, arg_labels)
        elif len(phase) > 1:
            tied = phase[1][4] == phase[0][4]
            all_variadic_casts = not exact and all(m[0].variadic for m in phase)
            if tied or all_variadic_casts:
                raise self._ambiguous(name, arg_types, semantics, arg_labels)
        best = phase[0]
        sig, bindings, params = best[0], best[1], best[2]
        coerced = tuple(
            None if a is None else _param_type(_substitute(p, bindings), a)
            for p, a in zip(params, arg_types, strict=True)
        )
        ret: SqlType | None
        if callable(sig.returns) and not isinstance(sig.returns, SqlType):
            ret = sig.returns(list(arg_types))
        else:
            ret = _substitute(sig.returns, bindings)
        if _has_generic(ret):
            ret = T.STRING if ret is not None else ret
        assert ret is not None
        return ResolvedFunction(sig, coerced, ret)

    def _matches(
        self,
        name: str,
        arg_types: Sequence[SqlType | None],
        semantics: int | None = None,
        *,
        text_to_time: bool = False,
    ) -> list[tuple[Signature, dict[str, SqlType], list[SqlType], int, tuple[int, int, int]]]:
        """Fitting overloads, best first: (signature, bindings, params, cast cost, rank).

        ``text_to_time``: a STRING argument also fits a DATE, TIME or TIMESTAMP parameter
        (ksqlDB casts text to the temporal types implicitly, ``GREATEST(D, '2022-06-14')``).
        ``resolve`` tries it only when nothing fits without it, so a call that resolved
        before keeps its overload.
        """
        scored: list[
            tuple[tuple[int, int, int], int, Signature, dict[str, SqlType], list[SqlType], int]
        ] = []
        for order, sig in enumerate(self.signatures(name, semantics)):
            params = _expand(sig, len(arg_types))
            if params is None:
                continue
            bindings: dict[str, SqlType] = {}
            cost = _match_all(params, arg_types, bindings, text_to_time=text_to_time)
            if cost is None:
                continue
            generic_count = sum(1 for p in params if _has_generic(p))
            rank = (cost, int(sig.variadic), generic_count)
            scored.append((rank, order, sig, bindings, params, cost))
        scored.sort(key=lambda s: (s[0], s[1]))
        return [(s[2], s[3], s[4], s[5], s[0]) for s in scored]

    def _describe_args(
        self, arg_types: Sequence[SqlType | None], labels: Sequence[str | None] | None = None
    ) -> str:
        shown = labels if labels is not None else [None] * len(arg_types)
        return ", ".join(
            label if label is not None else "null" if a is None else str(a)
            for a, label in zip(arg_types, shown, strict=True)
        )

    def _alternatives(self, name: str, semantics: int | None) -> str:
        """The overloads a message lists: ksqlDB's own list for its scalar and table
        functions (as its UdfIndex prints them), kspark's overloads otherwise."""
        sigs = self.signatures(name, semantics)
        listed = self._listed.get(name.upper())
        if listed and sigs and sigs[0].kind is not FunctionKind.AGGREGATE:
            return "\n".join(listed)
        return "\n".join(s.describe() for s in sigs)

    def _no_match(
        self,
        name: str,
        arg_types: Sequence[SqlType | None],
        semantics: int | None,
        labels: Sequence[str | None] | None = None,
    ) -> TypeCheckError:
        return TypeCheckError(
            f"Function '{self.declared_name(name)}' does not accept parameters "
            f"({self._describe_args(arg_types, labels)}).\n"
            f"Valid alternatives are:\n{self._alternatives(name, semantics)}\n"
            f"{_DESCRIBE_HINT}"
        )

    def _ambiguous(
        self,
        name: str,
        arg_types: Sequence[SqlType | None],
        semantics: int | None,
        labels: Sequence[str | None] | None = None,
    ) -> TypeCheckError:
        return TypeCheckError(
            f"Function '{self.declared_name(name)}' cannot be resolved due to ambiguous method parameters "
            f"({self._describe_args(arg_types, labels)}).\n"
            "Use CAST() to explicitly cast your parameters to one of the supported function calls.\n"
            f"Valid function calls are:\n{self._alternatives(name, semantics)}\n"
            f"{_DESCRIBE_HINT}"
        )


ALTERNATIVES_FILE = Path(__file__).with_name("ksqldb_alternatives.json")


def ksqldb_alternatives() -> dict[str, list[str]]:
    """Per scalar or table function of ksqlDB, the lines of its "Valid alternatives are:"
    list: parameter types as its ParamTypes print (INT, VARCHAR), the parameters' names, in
    its UdfIndex's (hash) order. Written by ``qtt parity --table functions`` from ksqlDB's
    sources."""
    data: dict[str, list[str]] = json.loads(ALTERNATIVES_FILE.read_text(encoding="utf-8"))
    return data


# The last line of ksqlDB's UdfIndex messages.
_DESCRIBE_HINT = "For detailed information on a function run: DESCRIBE FUNCTION <Function-Name>;"


def _ksqldb_rank(sig: Signature) -> tuple[int, int, int, int, int]:
    """How ksqlDB's UdfIndex orders two overloads a call fits (greater is better): non-variadic,
    more declared parameters, fewer generic parameters (a variadic ANY counts as one), no
    variadic ANY, a later variadic parameter."""
    variadic_any = sig.variadic and isinstance(sig.params[-1], AnyType)
    generics = sum(1 for p in sig.params if _has_generic(p)) + int(variadic_any)
    return (
        0 if sig.variadic else 1,
        len(sig.params),
        -generics,
        0 if variadic_any else 1,
        len(sig.params) - 1 if sig.variadic else -1,
    )


def _overlap(a: Signature, b: Signature) -> bool:
    """Whether two overloads implement a version of the function in common."""
    a_end = a.until if a.until is not None else float("inf")
    b_end = b.until if b.until is not None else float("inf")
    return a.since <= b_end and b.since <= a_end


def _param_type(param: SqlType | None, arg: SqlType) -> SqlType | None:
    """The type an argument is coerced to: a DECIMAL parameter takes any DECIMAL as it is."""
    if isinstance(param, AnyType):
        return arg
    if isinstance(param, T.Decimal) and arg.is_numeric and arg.base is not T.BaseType.DOUBLE:
        return T.decimal_for_integral(arg)
    return param


def _expand(sig: Signature, count: int) -> list[SqlType] | None:
    params = list(sig.params)
    if not sig.variadic:
        return params if len(params) == count else None
    fixed = params[:-1]
    if count < len(fixed):
        return None
    return fixed + [params[-1]] * (count - len(fixed))


def _has_generic(t: SqlType | None) -> bool:
    if t is None:
        return False
    if isinstance(t, Generic):
        return True
    if isinstance(t, T.Array):
        return _has_generic(t.item)
    if isinstance(t, T.Map):
        return _has_generic(t.key) or _has_generic(t.value)
    if isinstance(t, T.Struct):
        return any(_has_generic(f.type) for f in t.fields)
    if isinstance(t, LambdaType):
        return any(_has_generic(p) for p in t.params) or _has_generic(t.result)
    return False


def _substitute(t: SqlType | None, bindings: dict[str, SqlType]) -> SqlType | None:
    if t is None:
        return None
    if isinstance(t, Generic):
        return bindings.get(t.name, t)
    if isinstance(t, T.Array):
        item = _substitute(t.item, bindings)
        return T.Array(item) if item is not None else t
    if isinstance(t, T.Map):
        k, v = _substitute(t.key, bindings), _substitute(t.value, bindings)
        return T.Map(k, v) if k is not None and v is not None else t
    if isinstance(t, LambdaType):
        return LambdaType(
            tuple(_substitute(p, bindings) for p in t.params), _substitute(t.result, bindings)
        )
    return t


def _bind(param: SqlType, arg: SqlType, bindings: dict[str, SqlType]) -> int | None:
    """Match one argument type against one parameter type; return the cost or None."""
    if isinstance(param, AnyType):
        return 0
    if isinstance(param, Generic):
        bound = bindings.get(param.name)
        if bound is None:
            bindings[param.name] = arg
            return 0
        if bound == arg:
            return 0
        if can_implicitly_cast(arg, bound):
            return 1
        if can_implicitly_cast(bound, arg):
            bindings[param.name] = arg
            return 1
        if bound.is_numeric and arg.is_numeric:
            bindings[param.name] = T.widen_numeric(bound, arg)
            return 1
        return None
    if isinstance(param, T.Array):
        return _bind(param.item, arg.item, bindings) if isinstance(arg, T.Array) else None
    if isinstance(param, T.Map):
        if not isinstance(arg, T.Map):
            return None
        a = _bind(param.key, arg.key, bindings)
        b = _bind(param.value, arg.value, bindings)
        return None if a is None or b is None else a + b
    if isinstance(param, LambdaType):
        if not isinstance(arg, LambdaType) or len(arg.params) != len(param.params):
            return None
        if arg.result is None or param.result is None:
            return 0
        return _bind(param.result, arg.result, bindings)
    if param == arg:
        return 0
    if isinstance(param, T.Decimal) and isinstance(arg, T.Decimal):
        # A DECIMAL parameter takes any DECIMAL as it is (as ksqlDB's UDF parameters do).
        return 0
    if isinstance(param, T.Decimal) and arg.is_numeric and arg.base is not T.BaseType.DOUBLE:
        return _widening_cost(arg, param)
    if can_implicitly_cast(arg, param):
        return _widening_cost(arg, param)
    return None


_NUMERIC_RANK = {T.BaseType.INTEGER: 0, T.BaseType.BIGINT: 1, T.BaseType.DECIMAL: 2, T.BaseType.DOUBLE: 3}


def _widening_cost(arg: SqlType, param: SqlType) -> int:
    """How far an implicit cast widens: INTEGER -> BIGINT costs less than INTEGER -> DOUBLE."""
    if arg.base in _NUMERIC_RANK and param.base in _NUMERIC_RANK:
        return max(1, _NUMERIC_RANK[param.base] - _NUMERIC_RANK[arg.base])
    return 1


_TEMPORAL = (T.BaseType.DATE, T.BaseType.TIME, T.BaseType.TIMESTAMP)


def _match_all(
    params: list[SqlType],
    args: Sequence[SqlType | None],
    bindings: dict[str, SqlType],
    *,
    text_to_time: bool = False,
) -> int | None:
    cost = 0
    deferred: list[tuple[SqlType, SqlType]] = []
    for p, a in zip(params, args, strict=True):
        if a is None:
            if isinstance(p, LambdaType):
                return None
            continue
        if (
            text_to_time and a.base is T.BaseType.STRING and not _has_generic(p)
            and not isinstance(p, AnyType) and p.base in _TEMPORAL
        ):
            cost += 1
            continue
        if isinstance(p, LambdaType):
            deferred.append((p, a))
            continue
        c = _bind(p, a, bindings)
        if c is None:
            return None
        cost += c
    for p, a in deferred:  # lambdas last: their result binds after the other generics
        c = _bind(p, a, bindings)
        if c is None:
            return None
        cost += c
    return cost


REGISTRY = FunctionRegistry()
REGISTRY.list_alternatives(ksqldb_alternatives())


def _register(
    name: str, fn: Callable[..., Any], impl: Callable[..., Any], description: str, **fields: Any
) -> None:
    """Register one overload; its description defaults to the first docstring line of ``fn``."""
    REGISTRY.register(
        Signature(
            name=name.upper(),
            impl=impl,
            description=description or (fn.__doc__ or "").strip().split("\n")[0],
            **fields,
        )
    )


def scalar(
    name: str,
    *,
    params: Sequence[SqlType],
    returns: ReturnSpec,
    variadic: bool = False,
    null_propagating: bool = True,
    description: str = "",
    since: int = 1,
    until: int | None = None,
    stateful: bool = False,
    typed: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated callable as one overload of scalar function ``name``,
    implementing versions ``since`` to ``until`` of its behaviour (see ``FunctionRegistry``).
    ``stateful``: the decorated callable is a class, instantiated once per call site.
    ``typed``: it is also called with ``arg_types=``, the coerced types of the arguments."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        _register(
            name, fn, fn, description,
            params=tuple(params), returns=returns, variadic=variadic,
            null_propagating=null_propagating, since=since, until=until, stateful=stateful,
            typed=typed,
        )
        return fn

    return wrap


def table_function(
    name: str,
    *,
    params: Sequence[SqlType],
    returns: ReturnSpec,
    variadic: bool = False,
    description: str = "",
    since: int = 1,
    until: int | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a table function: the callable returns a list of output values (one row each).
    ``since``/``until``: the versions of its behaviour it implements (``FunctionRegistry``)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        _register(
            name, fn, fn, description,
            params=tuple(params), returns=returns, variadic=variadic,
            null_propagating=False, kind=FunctionKind.TABLE, since=since, until=until,
        )
        return fn

    return wrap


def aggregate(
    name: str,
    *,
    params: Sequence[SqlType],
    returns: ReturnSpec,
    init_params: int = 0,
    variadic: bool = False,
    supports_undo: bool = False,
    intermediate: ReturnSpec | None = None,
    description: str = "",
    since: int = 1,
    until: int | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register an aggregate overload; the decorated factory builds its aggregator.
    ``since``/``until``: the versions of its behaviour it implements (``FunctionRegistry``).

    ``params`` lists the aggregated column types, then the types of the ``init_params``
    trailing literal init arguments; the factory is called with the evaluated init
    arguments, plus, when it declares these keywords, ``config=`` (the query properties)
    and ``arg_types=`` (the coerced column types, e.g. for a DECIMAL's precision).
    A variadic parameter must be the last column (no init params) or the last init param.
    """
    if not 0 <= init_params <= len(params):
        raise TypeError(f"Aggregate {name}: init_params={init_params} exceeds its parameters.")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        declared = inspect.signature(fn).parameters

        def factory(*init_args: Any, config: Any = None, arg_types: Any = None) -> Any:
            extra: dict[str, Any] = {}
            if "config" in declared:
                extra["config"] = config
            if "arg_types" in declared:
                extra["arg_types"] = arg_types
            return fn(*init_args, **extra)

        factory.__name__ = fn.__name__
        factory.__doc__ = fn.__doc__
        _register(
            name, fn, factory, description,
            params=tuple(params), returns=returns, variadic=variadic,
            null_propagating=False, kind=FunctionKind.AGGREGATE,
            aggregate=AggregateInfo(init_params, supports_undo, intermediate),
            since=since, until=until,
        )
        return fn

    return wrap
