"""The functions parity table: reading overloads from Java sources, and matching kspark's."""

from __future__ import annotations

from pathlib import Path

import pytest

from qtt.parity.functions import (
    SOURCE_DIRS,
    Overload,
    Ty,
    kspark_overloads,
    match,
    read_ksqldb_functions,
    rows,
)

# Java written for this test in the shapes ksqlDB's function classes take.
SCALAR = """
package example;

@UdfDescription(name = Shout.NAME, description = "a" + "b")
public class Shout {
  static final String NAME = "shout";

  @Udf
  public String shout(@UdfParameter(description = "text") final String text) { return text; }

  @Udf(schemaProvider = "provide")
  public BigDecimal shout(final BigDecimal value, final int places) { return value; }

  @Udf
  public <T> List<T> shout(final List<T> items, final Function<T, Long> f, final long... more) {
    return items;
  }

  @Udf(schema = "ARRAY<STRUCT<K STRING, V INT>>")
  public List<Struct> shout(final Map<String, Integer> m, final java.sql.Timestamp at) { return null; }

  public String helper(final String s) { return s; }
}
"""

AGGREGATE = """
package example;

@UdafDescription(name = "gather", description = "x")
public final class Gather {
  @UdafFactory(description = "two columns, an init argument")
  public static Udaf<Pair<Integer, VariadicArgs<String>>, Long, Double> make(final int start) {
    return null;
  }

  @UdafFactory(description = "struct", paramSchema = "STRUCT<A INT>", returnSchema = "STRUCT<A INT>")
  public static TableUdaf<Struct, Struct, Struct> structs() { return null; }
}
"""

TABLE = """
package example;

@UdtfDescription(name = "spread", description = "x")
public class Spread {
  @Udtf
  public <T> List<T> spread(final List<T> values) { return values; }
}
"""


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    main, plugins = tmp_path / SOURCE_DIRS[0], tmp_path / SOURCE_DIRS[2]
    (main / "udf").mkdir(parents=True)
    plugins.mkdir(parents=True)
    (main / "udf" / "Shout.java").write_text(SCALAR, encoding="utf-8")
    (main / "udf" / "Spread.java").write_text(TABLE, encoding="utf-8")
    (plugins / "Gather.java").write_text(AGGREGATE, encoding="utf-8")
    (main / "udf" / "Other.java").write_text("class Other {}", encoding="utf-8")
    return tmp_path


def test_overloads_are_read_with_their_sql_types(sources: Path) -> None:
    described = sorted(o.describe() for o in read_ksqldb_functions(sources))
    assert described == [
        "GATHER(INTEGER, STRING..., INTEGER) -> DOUBLE",
        "GATHER(STRUCT<`A` INTEGER>) -> STRUCT<`A` INTEGER>",
        "SHOUT(ARRAY<T>, LAMBDA<(T) => BIGINT>, BIGINT...) -> ARRAY<T>",
        "SHOUT(DECIMAL, INTEGER) -> (computed)",
        "SHOUT(MAP<STRING, INTEGER>, TIMESTAMP) -> ARRAY<STRUCT<`K` STRING, `V` INTEGER>>",
        "SHOUT(STRING) -> STRING",
        "SPREAD(ARRAY<T>) -> T",
    ]
    kinds = {o.name: o.kind for o in read_ksqldb_functions(sources)}
    assert kinds == {"SHOUT": "scalar", "GATHER": "aggregate", "SPREAD": "table"}


def _overload(name: str, params: tuple[Ty, ...], returns: Ty | None, variadic_at: int | None = None,
              kind: str = "scalar") -> Overload:
    return Overload(name, kind, params, returns, variadic_at, "x.java")


def test_a_kspark_overload_matches_when_it_takes_the_same_or_more_general_arguments() -> None:
    kspark = kspark_overloads()
    abs_int = _overload("ABS", (Ty("INTEGER"),), Ty("INTEGER"))
    assert match(abs_int, kspark["ABS"])[0] is not None
    # ENTRIES takes MAP<STRING, V> in kspark: it takes ksqlDB's MAP<STRING, INTEGER> overload
    entries = _overload("ENTRIES", (Ty("MAP", (Ty("STRING"), Ty("INTEGER"))), Ty("BOOLEAN")), None)
    assert match(entries, kspark["ENTRIES"])[0] is not None
    # a variadic in the middle compares at 0, 1 and 2 repeats (kspark: one overload per count)
    mid = _overload(
        "MID_VAR_ARG", (Ty("BIGINT"), Ty("STRING"), Ty("INTEGER"), Ty("INTEGER")), Ty("BIGINT"), 1, "aggregate"
    )
    assert match(mid, kspark["MID_VAR_ARG"])[0] is not None
    # a concrete kspark parameter does not take a ksqlDB generic
    generic = _overload("ABS", (Ty("T", generic=True),), None)
    assert match(generic, kspark["ABS"])[0] is None


def test_a_differing_return_type_is_noted() -> None:
    kspark = kspark_overloads()
    wrong = _overload("LEN", (Ty("STRING"),), Ty("BIGINT"))
    sig, note = match(wrong, kspark["LEN"])
    assert sig is not None and note == "kspark returns INTEGER"


def test_rows_are_covered_only_with_a_test_and_reasoned_from_the_map() -> None:
    kspark = kspark_overloads()
    abs_int = _overload("ABS", (Ty("INTEGER"),), Ty("INTEGER"))
    unknown = _overload("NO_SUCH_FN", (), Ty("STRING"))
    out = rows([abs_int, unknown, abs_int], kspark, {"ABS": "tests/x.py::test_abs"}, {"NO_SUCH_FN": "why"})
    assert [(r.item, r.status) for r in out] == [
        ("ABS(INTEGER) -> INTEGER", "covered"),
        ("NO_SUCH_FN() -> STRING", "reasoned"),
        ("ABS(INTEGER) -> INTEGER #2", "covered"),
    ]
    untested = rows([abs_int], kspark, {}, {})
    assert untested[0].status == "missing" and untested[0].reason == "no kspark test exercises the function"
