"""ksqlDB's alternatives lists: Java's hashes and HashMap order, ParamType spelling."""

from __future__ import annotations

import json

from qtt.parity.functions import (
    ALTERNATIVES_FILE,
    Overload,
    Ty,
    java_hash_map_order,
    java_string_hash,
    ksqldb_alternatives,
    param_type,
)


def test_java_string_hash_is_javas():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("T") == 84
    assert java_string_hash("polygenelubricants") == -2147483648  # wraps in 32 bits


def test_param_types_print_and_hash_as_ksqldbs():
    assert param_type(Ty("INTEGER")) == ("INT", 4)
    assert param_type(Ty("STRING")) == ("VARCHAR", 6)
    assert param_type(Ty("ARRAY", (Ty("T", generic=True),))) == ("ARRAY<T>", 31 + 31 + 84)
    assert param_type(Ty("MAP", (Ty("STRING"), Ty("INTEGER"))))[0] == "MAP<VARCHAR, INT>"
    lam = Ty("LAMBDA", (Ty("T", generic=True), Ty("R", generic=True)))
    assert param_type(lam)[0] == "LAMBDA (T) => R"


def test_hash_map_order_is_by_bucket_then_insertion():
    # 16 buckets: 17 and 1 share bucket 1 (inserted first, listed first), 2 is bucket 2.
    assert java_hash_map_order([2, 17, 1]) == [1, 2, 0]
    # Past 12 keys the table has 32 buckets: 1 (bucket 1) then 100..110 (4..14) then 17.
    assert java_hash_map_order([17, 1, *range(100, 111)]) == [1, *range(2, 13), 0]


def test_alternatives_name_parameters_and_list_variadics_as_ksqldb():
    decimals = Overload("EXPLODE", "table", (Ty("ARRAY", (Ty("DECIMAL"),)),), None, None, "x", ("input",), "explode")
    generic = Overload("EXPLODE", "table", (Ty("ARRAY", (Ty("T", generic=True),)),), None, None, "x", ("list",), "explode")
    joined = Overload("CONCAT_WS", "scalar", (Ty("STRING"),), Ty("STRING"), 0, "x", ("inputs",), "concat_ws")
    listed = ksqldb_alternatives([generic, decimals, joined])
    assert listed["EXPLODE"] == ["explode(ARRAY<DECIMAL> input)", "explode(ARRAY<T> list)"]
    assert listed["CONCAT_WS"] == ["concat_ws(VARCHAR... inputs)"]


def test_the_committed_alternatives_are_sorted_lists_of_lines():
    data = json.loads(ALTERNATIVES_FILE.read_text(encoding="utf-8"))
    assert ALTERNATIVES_FILE.read_text(encoding="utf-8") == json.dumps(data, indent=2, sort_keys=True) + "\n"
    assert data["EXPLODE"] == ["explode(ARRAY<DECIMAL> input)", "explode(ARRAY<T> list)"]
