"""Analysis of ``FROM a JOIN b ON ..``: validation, the join key and the joined scope.

Follows ksqlDB: each side's columns are prefixed by its alias (``A.ID`` -> ``A_ID``); the
result key is the first viable key column (its JoinTree: the column references equal to the
key, an n-way join's inner ones first, then the left and the right join column), and a
projection may select any of them as the key; with none (always for FULL OUTER) it is a
synthetic ``ROWKEY`` (``ROWKEY_n`` when a source's own columns hold that name), which an
outer join of it leaves out of ``*``. A table-table join whose left operand is not the left
key is a foreign-key join, keyed by the left table's primary key. Joins nest to the left; an
n-way join keeps the names of its left join.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.analysis.scope import (
    KAFKA_VALUE_FORMAT_LIMITATION,
    FromClause,
    Scope,
    rewrite,
    source_columns,
    source_from_clause,
)
from engine.errors import AnalysisError, UnsupportedFeatureError
from engine.expressions import infer_type
from engine.metastore import DataSource, MetaStore
from engine.parser import ast
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.schema import PSEUDO_COLUMNS, WINDOW_BOUNDS
from engine.plan.steps import WindowInfo
from engine.plan.steps_join import join_output_schema, prefixed
from engine.planner import logical as L
from engine.planner import logical_join as LJ
from engine.serde.formats import SCHEMA_REGISTRY_FORMATS

_JOIN_TEXT = {
    "INNER": "[INNER] JOIN",
    "LEFT": "LEFT [OUTER] JOIN",
    "RIGHT": "RIGHT [OUTER] JOIN",
    "FULL": "[FULL] OUTER JOIN",
}
_SESSION_MIX = (
    "Session windowed sources can only be joined to other session windowed sources, and may "
    "still not result in expected behaviour as session bounds must be an exact match for the "
    "join to work\nHopping and tumbling windowed sources can only be joined to other hopping "
    "and tumbling windowed sources"
)
_REPARTITION_WINDOWED = (
    "Implicit repartitioning of windowed sources is not supported. "
    "See https://github.com/confluentinc/ksql/issues/4385."
)
_REPARTITION_WINDOWED_TABLES = (
    _REPARTITION_WINDOWED + " As a result, ksqlDB does not support joins on windowed sources with "
    "Schema-Registry-enabled key formats (AVRO, JSON_SR, PROTOBUF) at this time. Please "
    "repartition your sources to use a different key format before performing the join."
)
_NO_WITHIN = (
    "Stream-Stream joins must have a WITHIN clause specified. None was provided. To learn "
    "about how to specify a WITHIN clause with a stream-stream join, please visit: "
    "https://docs.confluent.io/current/ksql/docs/syntax-reference.html#create-stream-as-select"
)
_KEY_MISSING = "Key missing from projection (ie, SELECT). See https://cnfl.io/2LV7ouS.\n"


@dataclass(frozen=True)
class _Column:
    """A column of the joined scope: its side, source alias and name in its source."""

    side: str  # "L" or "R"
    alias: str
    name: str


def analyze_join(relation: ast.Join, metastore: MetaStore) -> FromClause:
    """Resolve and validate a join; returns the FROM clause over its JoinNode."""
    return _analyze(relation, metastore, depth=_depth(relation))


def _depth(relation: ast.Join) -> int:
    return 1 + (_depth(relation.left) if isinstance(relation.left, ast.Join) else 0)


def _analyze(relation: ast.Join, metastore: MetaStore, *, depth: int) -> FromClause:
    left = (
        analyze_join(relation.left, metastore)
        if isinstance(relation.left, ast.Join)
        else source_from_clause(relation.left, metastore)
    )
    left_is_join = isinstance(relation.left, ast.Join)
    right_src = metastore.get(relation.right.name)
    if right_src is None:
        raise AnalysisError(f"{relation.right.name} does not exist.")
    right_alias = relation.right.alias or relation.right.name
    for s in left.sources:
        if s.name == right_src.name:
            if len(left.sources) > 1:
                raise AnalysisError(
                    "N-way joins do not support multiple occurrences of the same source. "
                    f"Source: '{right_src.name}'."
                )
            raise AnalysisError(
                f"Can not join '{s.name}' to '{right_src.name}': self joins are not yet supported."
            )
    sources = [*left.sources, right_src]
    kafka = [s.name for s in sources if s.formats.value_format == "KAFKA"]
    if kafka:
        raise AnalysisError(
            f"Source(s) {', '.join(kafka)} are using the 'KAFKA' value format. "
            "This format does not yet support JOIN.\n" + KAFKA_VALUE_FORMAT_LIMITATION
        )

    # Every column of the joined scope, by its output name.
    left_alias = "" if left_is_join else left.alias
    columns: dict[str, _Column] = {}
    qualified: dict[str, dict[str, str]] = {}
    if left_is_join:
        for alias, names in left.scope.qualified.items():
            qualified[alias] = dict(names)
        for out, col in _origins(left).items():
            columns[out] = _Column("L", col.alias, col.name)
    else:
        src = left.sources[0]
        names = {n: prefixed(left.alias, n) for n in source_columns(src)}
        qualified[left.alias] = qualified[src.name] = names
        for n, out in names.items():
            columns[out] = _Column("L", left.alias, n)
    right_names = {n: prefixed(right_alias, n) for n in source_columns(right_src)}
    qualified[right_alias] = qualified[right_src.name] = right_names
    for n, out in right_names.items():
        columns[out] = _Column("R", right_alias, n)
    primary_alias = {alias: alias for alias in qualified}
    for s in sources:
        for alias, names in qualified.items():
            if alias != s.name and names is qualified.get(s.name):
                primary_alias[s.name] = alias

    resolved = _resolve_criteria(relation.criteria, qualified, columns, primary_alias)

    def display(expr: E.Expr) -> E.Expr:
        def qualify(e: E.Expr) -> E.Expr | None:
            if isinstance(e, E.ColumnRef) and e.name in columns:
                col = columns[e.name]
                return E.ColumnRef(col.name, col.alias)
            return None

        return rewrite(expr, qualify)

    def text(expr: E.Expr) -> str:
        return E.format_sql(display(expr))

    def source_of(alias: str) -> DataSource:
        return next(s for s in sources if qualified.get(s.name) == qualified[alias])

    def is_equality(expr: E.Expr) -> bool:
        return isinstance(expr, E.Comparison) and expr.op == "="

    if not isinstance(resolved, E.Comparison):
        if isinstance(resolved, E.Logical) and is_equality(resolved.left) and is_equality(resolved.right):
            raise AnalysisError(
                "Invalid join condition: joins on multiple conditions are not yet supported. "
                f"Got {text(resolved)}."
            )
        raise AnalysisError(
            f"Unsupported join expression: {text(resolved)}. Joins need an equality between "
            "one expression over each source, e.g. ON A.ID = B.ID."
        )
    if resolved.op != "=":
        raise AnalysisError("Only equality join criteria is supported.")
    # ksqlDB's order: each operand over exactly one source, the two operands over two
    # different sources, one of them the source this join adds.
    operand_aliases = []
    for operand in (resolved.left, resolved.right):
        referenced = {columns[e.name].alias for e in E.walk(operand) if isinstance(e, E.ColumnRef)}
        if len(referenced) != 1:
            raise AnalysisError(
                f"Invalid comparison expression '{text(operand)}' in join '{text(resolved)}'. "
                "Each side of the join comparision must contain references from exactly one source."
            )
        operand_aliases.append(referenced.pop())
    left_ref, right_ref = operand_aliases
    if left_ref == right_ref:
        raise AnalysisError(
            "Each side of the join must reference exactly one source and not the same source. "
            f"Left side references {left_ref} and right references {right_ref}"
        )
    _check_source_windows(left_ref, source_of(left_ref), right_ref, source_of(right_ref))
    if right_alias not in operand_aliases:
        raise AnalysisError(
            f"A join criteria is expected to reference the source ({right_alias}) in the FROM clause, "
            f"instead the right source references {right_ref} and the left source references {left_ref}"
        )
    sides = ["R" if alias == right_alias else "L" for alias in operand_aliases]
    left_op, right_op = (
        (resolved.left, resolved.right) if sides[0] == "L" else (resolved.right, resolved.left)
    )
    criteria_text = text(resolved)[1:-1]

    scope_types = {**PSEUDO_COLUMNS}
    left_node, right_node = left.node, _source_node(right_src)
    left_types = left_node.columns() if left_is_join else _types_of(left.sources[0], left.alias)
    right_types = _types_of(right_src, right_alias)
    scope_types.update(left_types)
    scope_types.update(right_types)
    left_type = infer_type(left_op, left_types)
    right_type = infer_type(right_op, right_types)
    if left_type != right_type:
        lt, rt = (left_type, right_type) if sides[0] == "L" else (right_type, left_type)
        raise AnalysisError(
            "Invalid join condition: types don't match. Got "
            f"{text(resolved.left)}{{{lt}}} = {text(resolved.right)}{{{rt}}}."
        )
    assert left_type is not None

    join_type = relation.join_type
    left_table, right_table = left_node.is_table, right_src.is_table
    left_name = left.sources[0].name if not left_is_join else left.sources[-1].name
    got_order = f"Got {left_name} {_JOIN_TEXT[join_type]} {right_src.name}."  # ksqlDB names the sources
    if left_table and not right_table:
        raise AnalysisError(
            f"Invalid join order: table-stream joins are not supported; only stream-table joins. {got_order}"
        )
    left_is_key = _is_key(left_op, left_node.schema, left_alias)
    right_is_key = _is_key(right_op, right_src.schema, right_alias)
    if left_table and right_table:
        kind = LJ.TABLE_TABLE
        if not right_is_key:
            raise AnalysisError(
                "Invalid join condition: table-table joins require to join on the primary key "
                f"of the right input table. Got {criteria_text}."
            )
        if not left_is_key:
            kind = LJ.FOREIGN_KEY
            if join_type == "FULL":
                raise AnalysisError(
                    f"Invalid join type: full-outer join not supported for foreign-key table-table "
                    f"join. {got_order}"
                )
            if left_is_join:
                raise AnalysisError(
                    "Invalid join condition: foreign-key table-table joins are not supported as part "
                    f"of n-way joins. Got {criteria_text}."
                )
            if left_node.window is not None or right_src.window_info is not None:
                raise AnalysisError("Foreign-key table-table joins are not supported on windowed tables.")
            if len(left_node.schema.key) != 1:
                raise UnsupportedFeatureError(
                    "foreign-key joins of tables with several key columns",
                    "kspark does not support foreign-key table-table joins whose left table has "
                    f"{len(left_node.schema.key)} key columns yet; expected exactly one.",
                )
        if relation.within is not None:
            raise AnalysisError(
                "A window definition was provided for a Table-Table join. These joins are not "
                "windowed. Please drop the window definition (i.e. the WITHIN clause) and try to "
                "execute your Table-Table join again."
            )
        if kind == LJ.FOREIGN_KEY and join_type == "RIGHT":
            raise AnalysisError("RIGHT OUTER JOIN on a foreign key is not supported")
    elif right_table:
        kind = LJ.STREAM_TABLE
        if join_type == "FULL":
            raise AnalysisError(
                f"Invalid join type: full-outer join not supported for stream-table join. {got_order}"
            )
        if not right_is_key:
            raise AnalysisError(
                "Invalid join condition: stream-table joins require to join on the table's "
                f"primary key. Got {criteria_text}."
            )
        if relation.within is not None:
            raise AnalysisError(
                "A window definition was provided for a Stream-Table join. These joins are not "
                "windowed. Please drop the window definition (ie. the WITHIN clause) and try to "
                "execute your join again."
            )
        if join_type == "RIGHT":  # ksqlDB's stream-table joiner knows INNER and LEFT only
            raise AnalysisError("Invalid join type encountered: RIGHT [OUTER] JOIN")
    else:
        kind = LJ.STREAM_STREAM
    _check_windows(left, left_node, right_src, left_is_key, right_is_key, tables=kind == LJ.TABLE_TABLE)
    if kind == LJ.STREAM_STREAM and relation.within is None:
        raise AnalysisError(_NO_WITHIN)

    # The result key (a foreign-key join keeps the left table's primary key): the first viable
    # key column, else a synthetic ROWKEY (see _key_equivalence and synthetic_key_name).
    left_join = left_node if isinstance(left_node, LJ.JoinNode) else None
    equivalence, key_refs = _key_equivalence(join_type, left_op, right_op, left_join)
    key_type = left_type
    if kind == LJ.FOREIGN_KEY:
        left_pk = left_node.schema.key[0]
        key_column, key_type, synthetic = prefixed(left_alias, left_pk.name), left_pk.type, False
        equivalence, key_refs = frozenset(), ()
    elif not key_refs:
        key_column = synthetic_key_name(sources)
        synthetic = True
    else:
        key_column = key_refs[0]
        synthetic = False
    if _contains_map(left_type):
        raise AnalysisError(
            "Map keys, including types that contain maps, are not supported as they may lead to "
            "unexpected behavior due to inconsistent serialization. Key column name: "
            f"`{key_column}`. Column type: {left_type}. "
            "See https://github.com/confluentinc/ksql/issues/6621 for more."
        )
    if kind == LJ.FOREIGN_KEY:
        origin = columns.get(key_column, _Column("L", left.alias, key_column))
        message = (
            "Primary key column missing in projection. For foreign-key table-table joins, the "
            "projection must include all primary key columns from the left input table "
            f"(`{origin.alias}`). Missing column: `{origin.name}`."
        )
        equivalents: tuple[tuple[str, frozenset[str]], ...] = ()
    elif synthetic:
        message = (
            f"{_KEY_MISSING}The query used to build `{{sink}}` must include the join expression "
            f"{key_column} in its projection (eg, SELECT {key_column}...).\n{key_column} was "
            "added as a synthetic key column because the join criteria did not match any source "
            "column. This expression must be included in the projection and may be aliased."
        )
        equivalents = ()
    else:
        shown = [text(E.ColumnRef(n)) for n in key_refs]
        plural = "s" if len(shown) > 1 else ""
        listed = " or ".join([", ".join(shown[:-1]), shown[-1]]) if len(shown) > 1 else shown[0]
        message = (
            f"{_KEY_MISSING}The query used to build `{{sink}}` must include the join expression"
            f"{plural} {listed} in its projection (eg, SELECT {shown[0]}...)."
        )
        equivalents = ((key_column, frozenset(key_refs) - {key_column}),)

    # Key expressions over each input's own columns.
    left_own = {out: col.name for out, col in columns.items() if col.side == "L"}
    right_own = {out: col.name for out, col in columns.items() if col.side == "R"}
    left_key = left_op if left_is_join else _unprefix(left_op, left_own)
    right_key = _unprefix(right_op, right_own)

    inherited = tuple(getattr(left_node, "hidden", ())) if left_is_join else ()
    if left_join is not None and left_join.synthetic_key:
        # An inner join's synthetic key is an implementation detail: selectable, not in `*`.
        inherited += (left_join.key_column,)
    schema, hidden = join_output_schema(
        left_node.schema, right_src.schema, left_alias=left_alias, right_alias=right_alias,
        key_columns=[(key_column, key_type)], left_window=left_node.window,
        right_window=right_src.window_info, inherited_hidden=inherited,
    )
    within = None
    if relation.within is not None:
        w = relation.within
        within = (w.before_ms, w.after_ms, w.grace_ms)
    node = LJ.JoinNode(
        schema=schema, is_table=kind in (LJ.TABLE_TABLE, LJ.FOREIGN_KEY), window=left_node.window,
        ctx="Join" if depth == 1 else f"Join_{depth}",
        left=left_node, right=right_node, kind=kind, join_type=join_type,
        left_alias=left_alias, right_alias=right_alias, key_column=key_column,
        left_key=left_key, right_key=right_key, within=within,
        key_equivalents=equivalents, hidden=hidden, missing_key_message=message,
        key_equivalence=equivalence, viable_keys=key_refs, synthetic_key=synthetic,
    )
    scope_columns = dict(node.columns())
    scope = Scope(scope_columns, qualified, _select_aliases(columns))
    return FromClause(node, sources, scope, left.alias, hidden=frozenset(hidden))


def _key_equivalence(
    join_type: str, left_op: E.Expr, right_op: E.Expr, left_join: LJ.JoinNode | None
) -> tuple[frozenset[E.Expr], tuple[str, ...]]:
    """ksqlDB's join equivalence set and viable key columns (its JoinTree), over output names.

    A FULL OUTER join's key equals neither side: both are empty. Otherwise the set holds both
    join expressions, and the left join's set when it holds one of them; the viable key
    columns are the column references in it, the left join's viable ones first, then the
    left and the right join expression, each once.
    """
    if join_type == "FULL":
        return frozenset(), ()
    keys = frozenset((left_op, right_op))
    inner = left_join.key_equivalence if left_join is not None else frozenset()
    equivalence = keys | inner if keys & inner else keys
    inner_viable = tuple(E.ColumnRef(n) for n in (left_join.viable_keys if left_join is not None else ()))
    viable: list[str] = []
    for candidate in (*inner_viable, left_op, right_op):
        if isinstance(candidate, E.ColumnRef) and candidate in equivalence and candidate.name not in viable:
            viable.append(candidate.name)
    return equivalence, tuple(viable)


_NUMBERED = re.compile(r"(.*?)(?:_([0-9]+))?")


def synthetic_key_name(sources: list[DataSource]) -> str:
    """``ROWKEY``, or ``ROWKEY_n`` with the smallest n no source column of that pattern holds
    (``ROWKEY`` counts as 0), over the joined sources' own columns only: an inner join's
    synthetic key does not count, as in ksqlDB's ``ColumnNames.generateSyntheticJoinKey``."""
    used: set[int] = set()
    for source in sources:
        for column in source.schema.columns:
            found = _NUMBERED.fullmatch(column.name)
            if found is not None and found.group(1) == "ROWKEY":
                used.add(int(found.group(2) or 0))
    index = 0
    while index in used:
        index += 1
    return "ROWKEY" if index == 0 else f"ROWKEY_{index}"


def _origins(clause: FromClause) -> dict[str, _Column]:
    """Output name -> origin of every column of a join's FROM clause (for n-way joins)."""
    found = getattr(clause, "origins", None)
    if found is not None:
        return found
    out: dict[str, _Column] = {}
    for alias, names in clause.scope.qualified.items():
        for name, target in names.items():
            out.setdefault(target, _Column("L", alias, name))
    return out


def _source_node(source: DataSource) -> L.SourceNode:
    return L.SourceNode(
        schema=source.schema, is_table=source.is_table, window=source.window_info, source=source
    )


def _types_of(source: DataSource, alias: str) -> dict[str, T.SqlType]:
    return {prefixed(alias, n): t for n, t in source_columns(source).items()}


def _is_key(operand: E.Expr, schema: object, alias: str) -> bool:
    keys = [c.name for c in schema.key]  # type: ignore[attr-defined]
    return (
        isinstance(operand, E.ColumnRef) and len(keys) == 1
        and operand.name == prefixed(alias, keys[0])
    )


def _unprefix(expr: E.Expr, own: dict[str, str]) -> E.Expr:
    return rewrite(
        expr, lambda e: E.ColumnRef(own[e.name]) if isinstance(e, E.ColumnRef) and e.name in own else None
    )


def _contains_map(t: T.SqlType | None) -> bool:
    if isinstance(t, T.Map):
        return True
    if isinstance(t, T.Array):
        return _contains_map(t.item)
    if isinstance(t, T.Struct):
        return any(_contains_map(f.type) for f in t.fields)
    return False


def _check_source_windows(left_alias: str, left: DataSource, right_alias: str, right: DataSource) -> None:
    """ksqlDB's analyzer check of the windows of the two sources a join's criteria name (in the
    criteria's order): both windowed or neither, and session windows only with session windows."""
    lw, rw = left.window_info, right.window_info
    if (lw is None) != (rw is None):
        def state(alias: str, w: WindowInfo | None) -> str:
            return f"`{alias}` is {w.type} windowed" if w is not None else f"`{alias}` is not windowed"

        raise AnalysisError(
            "Can not join windowed source to non-windowed source.\n"
            f"{state(left_alias, lw)}\n{state(right_alias, rw)}"
        )
    if lw is not None and rw is not None and (lw.type == "SESSION") != (rw.type == "SESSION"):
        raise AnalysisError(
            f"Incompatible windowed sources.\nLeft source: {lw.type}\nRight source: {rw.type}\n{_SESSION_MIX}"
        )


def _check_windows(
    left: FromClause, left_node: object, right: DataSource, left_is_key: bool, right_is_key: bool,
    *, tables: bool = False,
) -> None:
    lw = left_node.window  # type: ignore[attr-defined]
    rw = right.window_info
    if lw is None and rw is None:
        return
    left_name = left.sources[-1].name
    if (lw is None) != (rw is None):
        def state(name: str, w: object) -> str:
            return f"`{name}` is {w.type} windowed" if w is not None else f"`{name}` is not windowed"  # type: ignore[attr-defined]

        raise AnalysisError(
            "Can not join windowed source to non-windowed source.\n"
            f"{state(left_name, lw)}\n{state(right.name, rw)}"
        )
    assert lw is not None and rw is not None
    if (lw.type == "SESSION") != (rw.type == "SESSION"):
        raise AnalysisError(
            f"Incompatible windowed sources.\nLeft source: {lw.type}\nRight source: {rw.type}\n{_SESSION_MIX}"
        )
    if not (left_is_key and right_is_key):
        raise AnalysisError(_REPARTITION_WINDOWED)
    # A join in a schema-registry key format repartitions both sides (their key schema ids may
    # differ); a stream can, but ksqlDB repartitions no windowed table.
    if tables and left.sources[-1].formats.key_format in SCHEMA_REGISTRY_FORMATS:
        raise AnalysisError(_REPARTITION_WINDOWED_TABLES)
    # Windows of another type or size mean another key format, and a key join of windowed
    # sources can only repartition into the left's key format when that is a schema-registry
    # format: ksqlDB repartitions both sides then anyway, keeping the window start in the key
    # (sides join on key and window start).
    if lw != rw and left.sources[-1].formats.key_format not in SCHEMA_REGISTRY_FORMATS:
        raise AnalysisError(_REPARTITION_WINDOWED)


def _resolve_criteria(
    criteria: E.Expr,
    qualified: dict[str, dict[str, str]],
    columns: dict[str, _Column],
    primary_alias: dict[str, str],
) -> E.Expr:
    for ref in E.walk(criteria):
        # ksqlDB checks every qualifier when it prepares the statement, before resolving columns.
        if isinstance(ref, E.ColumnRef) and ref.source is not None and ref.source not in qualified:
            raise AnalysisError(
                f"Failed to prepare statement: '{ref.source}' is not a valid stream/table name or alias."
            )

    def column(e: E.Expr) -> E.Expr | None:
        if not isinstance(e, E.ColumnRef):
            return None
        if e.source is not None:
            names = qualified[e.source]
            if e.name not in names:
                raise AnalysisError(f"JOIN ON column '{e.source}.{e.name}' cannot be resolved.", node=e)
            return E.ColumnRef(names[e.name])
        if e.name in columns:
            return E.ColumnRef(e.name)
        matches: dict[str, str] = {}
        for alias, names in qualified.items():
            if e.name in names and names[e.name] not in matches:
                matches[names[e.name]] = primary_alias.get(alias, alias)
        if not matches:
            raise AnalysisError(f"JOIN ON column '{e.name}' cannot be resolved.", node=e)
        if len(matches) > 1:
            could = " or ".join(f"{a}.{e.name}" for a in matches.values())
            raise AnalysisError(f"Column '{e.name}' is ambiguous. Could be {could}.", node=e, preparing=True)
        return E.ColumnRef(next(iter(matches)))

    return rewrite(criteria, column)


def _select_aliases(columns: dict[str, _Column]) -> dict[str, str]:
    """The name a selected join column gets: its source name when no other source has it."""
    owners: dict[str, set[str]] = {}
    for out, col in columns.items():
        owners.setdefault(col.name, set()).add(out)
    return {out: col.name if len(owners[col.name]) == 1 else out for out, col in columns.items()}


_ = WINDOW_BOUNDS
