"""The one function that normalises Spark physical plan text."""

from __future__ import annotations

from qtt.plans.normalise import normalise_physical_plan

PLAN_A = """MapInArrow Project(ID#33, V#34L)#43, [ID#44, V#45L], false
+- *(1) Scan ExistingRDD[ID#33,V#34L]
"""
PLAN_B = (
    "MapInArrow Project(ID#120, V#121L)#130, [ID#131, V#132L], false\n"
    "+- *(1) Scan ExistingRDD[ID#120,V#121L]   \n"  # trailing spaces are dropped
)


def test_expression_ids_from_different_runs_normalise_to_the_same_text() -> None:
    assert normalise_physical_plan(PLAN_A) == normalise_physical_plan(PLAN_B)


def test_expression_ids_are_renumbered_in_order_keeping_the_long_suffix() -> None:
    text = normalise_physical_plan(PLAN_A)
    assert text.startswith("MapInArrow Project(ID#e0, V#e1L)#e2, [ID#e3, V#e4L], false")
    assert "Scan ExistingRDD[ID#e0,V#e1L]" in text


def test_a_changed_operator_still_shows_after_normalising() -> None:
    changed = PLAN_B.replace("Project", "WhereFilter")
    assert normalise_physical_plan(PLAN_A) != normalise_physical_plan(changed)


def test_rewiring_of_expression_ids_is_visible() -> None:
    rewired = PLAN_A.replace("Scan ExistingRDD[ID#33,V#34L]", "Scan ExistingRDD[ID#34,V#33L]")
    assert normalise_physical_plan(PLAN_A) != normalise_physical_plan(rewired)


def test_plan_ids_hashes_uuids_paths_and_batch_ids_are_replaced() -> None:
    text = (
        "Exchange hashpartitioning(K#1, 2), ENSURE_REQUIREMENTS, [plan_id=57]\n"
        "StateStoreSave [K#1], state info [ checkpoint = file:/tmp/ck/state, "
        "runId = 0f8fad5b-d9cb-469f-a165-70867728950e, opId = 0, ver = 12, numPartitions = 2]\n"
        "PythonUDF org.apache.spark.Foo@1a2b3c4d batchId=3 /tmp/spark-123/x RDD[17]\n"
    )
    out = normalise_physical_plan(text)
    assert "plan_id=<PLAN_ID>" in out
    assert "checkpoint = <PATH>" in out and "/tmp" not in out
    assert "runId = <UUID>" in out
    assert "ver = <BATCH>" in out and "batchId=<BATCH>" in out
    assert "Foo@<HASH>" in out and "RDD[<RDD>]" in out
    assert "opId = 0" in out  # operator ids are stable and stay


def test_output_ends_with_one_newline_and_no_trailing_spaces() -> None:
    out = normalise_physical_plan("A#1  \n\n")
    assert out == "A#e0\n"


def test_normalising_is_idempotent() -> None:
    once = normalise_physical_plan(PLAN_A)
    assert normalise_physical_plan(once) == once


def test_lambda_variables_numbered_per_process_normalise_alike() -> None:
    first = "Project [exists(keys#1, lambdafunction((x_14 = NAME), lambda x_14, false)), filter(h#2, lambda x_15)]"
    later = "Project [exists(keys#7, lambdafunction((x_102 = NAME), lambda x_102, false)), filter(h#8, lambda x_103)]"
    assert normalise_physical_plan(first) == normalise_physical_plan(later)
    assert "lambda x_l0" in normalise_physical_plan(first) and "lambda x_l1" in normalise_physical_plan(first)
    # Two distinct variables stay distinct.
    swapped = "Project [exists(keys#1, lambdafunction((x_15 = NAME), lambda x_15, false)), filter(h#2, lambda x_15)]"
    assert normalise_physical_plan(first) != normalise_physical_plan(swapped)


def test_short_java_hashes_are_replaced_but_not_an_at_sign_alone() -> None:
    assert normalise_physical_plan("KafkaSourceProvider@e0040 and Foo@1a2b3c4d") == (
        "KafkaSourceProvider@<HASH> and Foo@<HASH>\n"
    )
    assert normalise_physical_plan("contains(NAME, 'user@ab')") == "contains(NAME, 'user@ab')\n"
