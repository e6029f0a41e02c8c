from __future__ import annotations

from decimal import Decimal as D

import pytest

from engine.errors import AnalysisError, TypeCheckError, UnknownFunctionError
from engine.expressions import infer_type
from engine.plan import types as T
from engine.plan.expr import (
    Arithmetic,
    Case,
    Cast,
    ColumnRef,
    Comparison,
    CreateArray,
    CreateMap,
    CreateStruct,
    Dereference,
    FunctionCall,
    IntervalUnit,
    Lambda,
    LambdaVariable,
    Literal,
    Logical,
    MapEntry,
    StructField,
    Subscript,
    WhenClause,
)

COLUMNS = {
    "I": T.INTEGER,
    "L": T.BIGINT,
    "D": T.DOUBLE,
    "S": T.STRING,
    "B": T.BOOLEAN,
    "TS": T.TIMESTAMP,
    "ARR": T.Array(T.INTEGER),
    "M": T.Map(T.STRING, T.DOUBLE),
    "ST": T.Struct((T.Field("A", T.INTEGER),)),
    "ROWTIME": T.BIGINT,
}


def dec(p: int, s: int) -> T.Decimal:
    return T.Decimal(p, s)


def col(name: str) -> ColumnRef:
    return ColumnRef(name)


def typed(left: T.SqlType, op: str, right: T.SqlType) -> T.SqlType | None:
    return infer_type(Arithmetic(op, col("X"), col("Y")), {"X": left, "Y": right})


def test_bare_null_literal_has_no_type() -> None:
    assert infer_type(Literal(None, None), COLUMNS) is None


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (T.INTEGER, T.INTEGER, T.INTEGER),
        (T.INTEGER, T.BIGINT, T.BIGINT),
        (T.BIGINT, T.DOUBLE, T.DOUBLE),
        (dec(4, 2), T.DOUBLE, T.DOUBLE),
        (T.STRING, T.STRING, T.STRING),
    ],
)
def test_addition_types(left: T.SqlType, right: T.SqlType, expected: T.SqlType) -> None:
    assert typed(left, "+", right) == expected


@pytest.mark.parametrize(
    ("op", "expected"),
    [("+", dec(5, 2)), ("-", dec(5, 2)), ("*", dec(9, 4)), ("/", dec(11, 7)), ("%", dec(4, 2))],
)
def test_decimal_result_types_follow_ksqldb(op: str, expected: T.Decimal) -> None:
    assert typed(dec(4, 2), op, dec(4, 2)) == expected


def test_decimal_with_integer_widens_integer_to_decimal_10_0() -> None:
    assert typed(dec(4, 2), "+", T.INTEGER) == dec(13, 2)
    assert typed(dec(4, 2), "+", T.BIGINT) == dec(22, 2)


def test_string_minus_string_is_rejected() -> None:
    with pytest.raises(TypeCheckError, match="Unsupported arithmetic types. STRING STRING"):
        typed(T.STRING, "-", T.STRING)


def test_boolean_arithmetic_message_names_expression_and_types() -> None:
    expr = Arithmetic("+", Literal(True, T.BOOLEAN), Literal(D("1.5"), dec(2, 1)))
    with pytest.raises(TypeCheckError) as info:
        infer_type(expr, COLUMNS)
    assert str(info.value) == (
        "Error processing expression: (true + 1.5). Unsupported arithmetic types. BOOLEAN DECIMAL"
    )


def test_comparing_integer_to_string_is_a_type_error() -> None:
    expr = Comparison(">=", col("I"), Literal("x", T.STRING))
    with pytest.raises(TypeCheckError) as info:
        infer_type(expr, COLUMNS)
    assert str(info.value) == "Cannot compare I (INTEGER) to 'x' (STRING) with GREATER_THAN_OR_EQUAL."


def test_ordering_arrays_is_rejected_but_equality_allowed() -> None:
    with pytest.raises(TypeCheckError, match="with LESS_THAN"):
        infer_type(Comparison("<", col("ARR"), col("ARR")), COLUMNS)
    assert infer_type(Comparison("=", col("ARR"), col("ARR")), COLUMNS) == T.BOOLEAN


def test_timestamp_and_rowtime_compare_with_strings() -> None:
    assert infer_type(Comparison("<", col("TS"), Literal("2020", T.STRING)), COLUMNS) == T.BOOLEAN
    expr = Comparison("<", col("ROWTIME"), Literal("2020", T.STRING))
    assert infer_type(expr, COLUMNS) == T.BOOLEAN


def test_rowtime_compares_with_a_timestamp_string_on_either_side_but_not_with_other_types() -> None:
    expr = Comparison(">", Literal("2020-01-01", T.STRING), col("ROWTIME"))
    assert infer_type(expr, COLUMNS) == T.BOOLEAN
    with pytest.raises(TypeCheckError) as info:
        infer_type(Comparison("=", col("B"), col("ROWTIME")), COLUMNS)
    assert str(info.value) == "Cannot compare B (BOOLEAN) to ROWTIME (BIGINT) with EQUAL."


def test_logical_operands_must_be_boolean() -> None:
    with pytest.raises(TypeCheckError, match="must be a BOOLEAN"):
        infer_type(Logical("AND", col("B"), col("I")), COLUMNS)


def test_case_branches_must_have_one_type_as_in_ksqldb() -> None:
    same = Case(None, (WhenClause(col("B"), col("L")),), col("L"))
    assert infer_type(same, COLUMNS) == T.BIGINT
    widened = Case(None, (WhenClause(col("B"), col("I")),), col("L"))  # ksqlDB does not widen
    with pytest.raises(TypeCheckError, match="Type for the default clause should be the same as for 'THEN' clauses"):
        infer_type(widened, COLUMNS)


def test_case_with_incompatible_branches_is_rejected() -> None:
    expr = Case(None, (WhenClause(col("B"), col("I")),), col("B"))
    with pytest.raises(TypeCheckError, match="Invalid Case expression"):
        infer_type(expr, COLUMNS)


def test_case_condition_may_be_a_bare_null() -> None:
    # A NULL condition has no type and is never true; only a typed non-BOOLEAN is refused.
    expr = Case(None, (WhenClause(Literal(None, None), col("I")),), col("I"))
    assert infer_type(expr, COLUMNS) == T.INTEGER


def test_case_condition_must_be_boolean() -> None:
    expr = Case(None, (WhenClause(col("I"), col("I")),))
    with pytest.raises(TypeCheckError, match="WHEN operand type should be boolean"):
        infer_type(expr, COLUMNS)


def test_unsupported_cast_is_a_type_error() -> None:
    with pytest.raises(TypeCheckError, match=r"Cast of STRING to ARRAY<INTEGER> is not supported"):
        infer_type(Cast(col("S"), T.Array(T.INTEGER)), COLUMNS)


def test_empty_and_all_null_array_constructors_are_rejected() -> None:
    with pytest.raises(TypeCheckError, match="Array constructor cannot be empty"):
        infer_type(CreateArray(()), COLUMNS)
    with pytest.raises(TypeCheckError, match="all NULL elements"):
        infer_type(CreateArray((Literal(None, None),)), COLUMNS)


def test_array_constructor_rejects_unparseable_string_literal() -> None:
    expr = CreateArray((Literal(1, T.INTEGER), Literal("one", T.STRING)))
    with pytest.raises(TypeCheckError, match='invalid input syntax for type INTEGER: "one"'):
        infer_type(expr, COLUMNS)


def test_map_constructor_errors() -> None:
    with pytest.raises(TypeCheckError, match="Map constructor cannot be empty"):
        infer_type(CreateMap(()), COLUMNS)
    null_values = CreateMap((MapEntry(col("S"), Literal(None, None)),))
    with pytest.raises(TypeCheckError, match="all NULL values"):
        infer_type(null_values, COLUMNS)
    null_keys = CreateMap((MapEntry(Literal(None, None), col("I")),))
    with pytest.raises(TypeCheckError, match="all NULL keys"):
        infer_type(null_keys, COLUMNS)


def test_struct_constructor_types_fields_and_rejects_duplicates() -> None:
    expr = CreateStruct((StructField("A", col("I")), StructField("b", col("S"))))
    assert infer_type(expr, COLUMNS) == T.Struct((T.Field("A", T.INTEGER), T.Field("b", T.STRING)))
    dup = CreateStruct((StructField("A", col("I")), StructField("A", col("S"))))
    with pytest.raises(TypeCheckError, match="Duplicate field names found in STRUCT"):
        infer_type(dup, COLUMNS)


def test_access_types() -> None:
    assert infer_type(Subscript(col("ARR"), Literal(1, T.INTEGER)), COLUMNS) == T.INTEGER
    assert infer_type(Subscript(col("M"), Literal("k", T.STRING)), COLUMNS) == T.DOUBLE
    assert infer_type(Dereference(col("ST"), "A"), COLUMNS) == T.INTEGER
    with pytest.raises(TypeCheckError, match="Could not find field 'Z'"):
        infer_type(Dereference(col("ST"), "Z"), COLUMNS)


def test_unknown_column_and_function() -> None:
    with pytest.raises(AnalysisError, match="'NOPE' cannot be resolved"):
        infer_type(col("NOPE"), COLUMNS)
    with pytest.raises(UnknownFunctionError, match="Can't find any functions with the name 'NOPE'"):
        infer_type(FunctionCall("nope", ()), COLUMNS)


def test_lambda_body_is_typed_with_its_parameters() -> None:
    body = Arithmetic("*", LambdaVariable("X"), Literal(1.5, T.DOUBLE))
    expr = FunctionCall("TRANSFORM", (col("ARR"), Lambda(("X",), body)))
    assert infer_type(expr, COLUMNS) == T.Array(T.DOUBLE)


def test_lambda_vars_argument_puts_variables_in_scope() -> None:
    assert infer_type(LambdaVariable("X"), {}, lambda_vars={"X": T.STRING}) == T.STRING


def test_a_call_refused_names_a_time_unit_argument_interval_unit_as_ksqldb_does() -> None:
    call = FunctionCall("DATEADD", (IntervalUnit("DAYS"), col("L"), col("S")), semantics=2)
    with pytest.raises(TypeCheckError) as raised:
        infer_type(call, COLUMNS)
    assert str(raised.value).startswith(
        "Function 'dateadd' does not accept parameters (INTERVAL UNIT, BIGINT, STRING).\n"
    )
