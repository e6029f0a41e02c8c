"""Expression typing and evaluation (lower layer: no pyspark, no parser or planner imports).

- ``infer_type(expr, columns)``: the SQL type of an expression, with ksqlDB's type checks.
- ``compile_expression(expr, columns)``: a closure ``fn(row) -> value`` for per-record use.
- ``cast_value`` / ``coerce_value``: CAST semantics and implicit widening of single values.
"""

from __future__ import annotations

from engine.expressions.cast import cast_value, coerce_value
from engine.expressions.evaluator import compile_expression, compile_typed
from engine.expressions.typer import infer_type

__all__ = ["cast_value", "coerce_value", "compile_expression", "compile_typed", "infer_type"]
