"""qtt plans replay-ksqldb: verdicts, tables and report over a small corpus written here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.data.records import TopicInfo
from qtt.cli import main
from qtt.plans.ksqldb_replay import (
    FAILED,
    PASSED,
    UNSUPPORTED,
    ConfigReads,
    _sink_topics,
    _TopicFormats,
    case_of,
    compare_schemas,
    discover,
    run,
    run_key,
    sample,
)

FORMATS = {"keyFormat": {"format": "KAFKA", "properties": {}}, "valueFormat": {"format": "JSON", "properties": {}}}
SCHEMA = "`ID` INTEGER KEY, `QTY` INTEGER"


def _create(name: str, topic: str) -> dict[str, Any]:
    return {"@type": "createStreamV1", "sourceName": name, "schema": SCHEMA, "topicName": topic,
            "formats": FORMATS, "timestampColumn": None, "windowInfo": None, "orReplace": False, "isSource": False}


def _plan(middle: dict[str, Any] | None = None) -> dict[str, Any]:
    source = {"@type": "streamSourceV1", "properties": {"queryContext": "KsqlTopic/Source"}, "topicName": "input",
              "formats": FORMATS, "timestampColumn": None, "sourceSchema": SCHEMA}
    if middle is not None:
        source = {**middle, "source": source}
    select = {"@type": "streamSelectV1", "properties": {"queryContext": "Project"}, "source": source,
              "keyColumnNames": ["ID"], "selectedKeys": None, "selectExpressions": ["(QTY + 1) AS QTY"]}
    sink = {"@type": "streamSinkV1", "properties": {"queryContext": "OUTPUT"}, "source": select,
            "formats": FORMATS, "topicName": "OUTPUT", "timestampColumn": None}
    return {"plan": [
        {"@type": "ksqlPlanV1", "statementText": "-", "ddlCommand": _create("INPUT", "input"), "queryPlan": None},
        {"@type": "ksqlPlanV1", "statementText": "-", "ddlCommand": _create("OUTPUT", "OUTPUT"),
         "queryPlan": {"sources": ["INPUT"], "sink": "OUTPUT", "physicalPlan": sink, "queryId": "CSAS_OUTPUT_0"}},
    ], "configs": {"ksql.streams.cache.max.bytes.buffering": "0"}}


POST_FORMATS = {"keyFormat": {"format": "KAFKA"}, "valueFormat": {"format": "JSON"}}


def _spec(release: str, expected_qty: int) -> dict[str, Any]:
    return {
        "version": release,
        "schemas": {
            "CSAS_OUTPUT_0.Project": {"schema": SCHEMA},
            "CSAS_OUTPUT_0.KsqlTopic.Source": {"schema": "`ID` INTEGER KEY, `QTY` BIGINT"},
        },
        "testCase": {
            "name": "t",
            "inputs": [{"topic": "input", "key": 1, "value": {"QTY": 1}, "timestamp": 5}],
            "outputs": [{"topic": "OUTPUT", "key": 1, "value": {"QTY": expected_qty}, "timestamp": 5}],
            # ksqlDB's test runner made a query's sink topic 4 partitions, whatever the case declared
            "topics": [{"name": "input", "numPartitions": 2}, {"name": "OUTPUT", "numPartitions": 1}],
            "post": {"sources": [{"name": "OUTPUT", "type": "STREAM", "schema": SCHEMA}],
                     # ksqlDB's PostTopicNode requires both formats
                     "topics": {"topics": [{"name": "input", **POST_FORMATS, "partitions": 2},
                                           {"name": "OUTPUT", **POST_FORMATS, "partitions": 4},
                                           {"name": "_confluent-ksql-internal-changelog", **POST_FORMATS}]}},
        },
    }


def _write(root: Path, case: str, version: str, plan: Any, spec: Any) -> None:
    folder = root / case / version
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text(plan if isinstance(plan, str) else json.dumps(plan))
    (folder / "spec.json").write_text(json.dumps(spec))


def _corpus(root: Path) -> Path:
    _write(root, "project_-_adds_one", "7.1.0_1", _plan(), _spec("7.1.0", 2))
    _write(root, "project_-_wrong_expectation", "8.0.0_2", _plan(), _spec("8.0.0", 7))
    rekey = {"@type": "tableSelectKeyV1", "properties": {"queryContext": "PartitionBy"}, "keyExpression": ["QTY"],
             "internalFormats": FORMATS}
    _write(root, "project_-_rekeys_a_table", "8.0.0_3", _plan(rekey), _spec("8.0.0", 2))
    _write(root, "project_-_broken", "8.0.0_4", "{not json", _spec("8.0.0", 2))
    (root / "no_spec" / "8.0.0_5").mkdir(parents=True)
    (root / "no_spec" / "8.0.0_5" / "plan.json").write_text("{}")
    return root


def test_each_version_is_passed_failed_or_unsupported_and_the_tables_count_them(tmp_path: Path, spark: Any) -> None:
    replay = run(_corpus(tmp_path), workers=1)
    verdicts = {r.case: r for r in replay.results}
    assert set(verdicts) == {"project_-_adds_one", "project_-_wrong_expectation", "project_-_rekeys_a_table", "project_-_broken"}
    assert verdicts["project_-_adds_one"].status == PASSED
    wrong = verdicts["project_-_wrong_expectation"]
    assert wrong.status == FAILED and wrong.category == "output records differ" and "QTY" in wrong.details
    unsupported = verdicts["project_-_rekeys_a_table"]
    assert unsupported.status == UNSUPPORTED and unsupported.category == "step tableSelectKeyV1"
    assert verdicts["project_-_broken"].status == FAILED and verdicts["project_-_broken"].category == "cannot load"
    assert replay.by_release()["8.0.0"] == {PASSED: 0, FAILED: 2, UNSUPPORTED: 1}
    assert replay.by_step()["streamSelectV1"][PASSED] == 1
    # the saved source schema says BIGINT where kspark reads INTEGER: counted, not fatal
    passed = verdicts["project_-_adds_one"]
    assert passed.schemas_compared == 2 and len(passed.schema_differences) == 1


def test_the_cli_writes_a_json_report_and_filters_by_pattern(tmp_path: Path, spark: Any, capsys: Any) -> None:
    report = tmp_path / "out" / "report.json"
    code = main(["plans", "replay-ksqldb", str(_corpus(tmp_path / "corpus")), "-k", "adds_one",
                 "--report", str(report), "--workers", "1", "--no-progress"])
    assert code == 0
    data = json.loads(report.read_text())
    assert data["counts"] == {PASSED: 1, FAILED: 0, UNSUPPORTED: 0}
    assert data["releases"] == {"7.1.0": {PASSED: 1, FAILED: 0, UNSUPPORTED: 0}}
    assert data["versions"][0]["case"] == "project_-_adds_one"
    assert "1 versions: 1 passed" in capsys.readouterr().out


def test_bad_arguments_are_one_line_errors(tmp_path: Path, capsys: Any) -> None:
    assert main(["plans", "replay-ksqldb", str(tmp_path / "missing")]) == 2
    assert "is not a folder of saved ksqlDB plans" in capsys.readouterr().err
    assert main(["plans", "replay-ksqldb", str(tmp_path), "--sample", "0"]) == 2
    assert "--sample must be a positive number" in capsys.readouterr().err
    assert main(["plans", "replay-ksqldb", str(tmp_path), "--no-progress"]) == 1
    assert "no saved ksqlDB plan versions" in capsys.readouterr().err


def test_a_sample_is_spread_over_the_corpus_and_stable(tmp_path: Path) -> None:
    plans = discover(_corpus(tmp_path))
    assert len(plans) == 4  # the folder without spec.json is not a version
    assert sample(plans, 2) == sample(plans, 2) == [plans[0], plans[1]]


def test_a_sample_gives_every_release_a_proportional_share_of_at_least_one(tmp_path: Path) -> None:
    spec = _spec("x", 2)
    for i in range(12):
        _write(tmp_path, f"file{i % 4}_-_case{i}", f"6.0.0_{i}", _plan(), spec)
    for i in range(6):
        _write(tmp_path, f"file{i % 3}_-_case{i}", f"8.0.0_{i}", _plan(), spec)
    _write(tmp_path, "file0_-_rare", "5.5.1_1", _plan(), spec)
    plans = discover(tmp_path)
    chosen = sample(plans, 7)
    releases = [p.version.split("_")[0] for p in chosen]
    assert len(chosen) == 7 and releases.count("5.5.1") == 1
    assert releases.count("6.0.0") == 4 and releases.count("8.0.0") == 2
    assert chosen == sorted(chosen, key=plans.index)  # corpus order kept
    assert {p.case.split("_-_")[0] for p in chosen if p.version.startswith("6.0.0")} == {"file0", "file1", "file2", "file3"}


def test_schemas_compare_step_outputs_and_aggregate_stores() -> None:
    saved = {"Q.Aggregate.Aggregate.Materialize": {"schema": "`K` STRING KEY, `N` BIGINT"},
             "Q.Other": {"schema": "`A` INTEGER"}}
    compared, differences = compare_schemas(saved, {"Q.Aggregate.Aggregate": "`K` STRING KEY, `N` INTEGER"})
    assert compared == 1 and differences == ["Q.Aggregate.Aggregate.Materialize: ksqlDB `K` STRING KEY, `N` BIGINT | kspark `K` STRING KEY, `N` INTEGER"]


def test_schemas_compare_the_key_and_value_formats_of_steps_with_a_topic_whole() -> None:
    from engine.plan.schema import LogicalSchema
    from engine.plan.steps import Formats, WindowedStreamSource, WindowInfo
    from qtt.plans.ksqldb_replay import step_formats

    source = WindowedStreamSource(
        ctx="KsqlTopic/Source", topic="in", source_schema=LogicalSchema.parse("`K` INTEGER KEY, `V` INTEGER"),
        formats=Formats(key_format="AVRO", value_format="PROTOBUF", key_features=("UNWRAP_SINGLES",),
                        value_properties=(("nullable_representation", "OPTIONAL"),)),
        window_info=WindowInfo(type="HOPPING", size_ms=5000),
    )
    described = step_formats(source)
    assert described is not None
    schema = "`K` INTEGER KEY, `V` INTEGER"
    same = {"Q.KsqlTopic.Source": {
        "schema": schema,
        "keyFormat": {"format": "AVRO", "features": ["UNWRAP_SINGLES"], "windowInfo": {"type": "HOPPING", "size": 5.0}},
        "valueFormat": {"format": "PROTOBUF",
                        "properties": {"unwrapPrimitives": "true", "nullableRepresentation": "optional"}}}}
    assert compare_schemas(same, {"Q.KsqlTopic.Source": schema}, {"Q.KsqlTopic.Source": described}) == (1, [])
    bare = {"Q.KsqlTopic.Source": {"schema": schema, "keyFormat": {"format": "AVRO"}, "valueFormat": {"format": "JSON"}}}
    _, differences = compare_schemas(bare, {"Q.KsqlTopic.Source": schema}, {"Q.KsqlTopic.Source": described})
    assert differences == [
        "Q.KsqlTopic.Source: keyFormat features are ['UNWRAP_SINGLES'] but expected [].",
        "Q.KsqlTopic.Source: keyFormat window type is HOPPING but expected none.",
        "Q.KsqlTopic.Source: valueFormat format is PROTOBUF but expected JSON.",
        "Q.KsqlTopic.Source: valueFormat format properties are {'nullableRepresentation': 'optional', "
        "'unwrapPrimitives': 'true'} but expected {}.",
    ]
    assert step_formats(replace_topicless()) is None


def replace_topicless() -> object:
    from engine.plan.steps import Formats

    class NoTopic:
        formats = Formats(key_format="KAFKA", value_format="JSON")

    return NoTopic()


def test_records_of_ksqldb_internal_topics_are_not_compared_and_header_indexes_follow(tmp_path: Path) -> None:
    internal = "_confluent-ksql-svc_query_CTAS_T_0-Aggregate-Aggregate-Materialize-changelog"
    spec = {"testCase": {"name": "c", "inputs": [{"topic": "in", "key": 1, "value": {"A": 1}}], "outputs": [
        {"topic": internal, "key": 1, "value": {"A": 1}},
        {"topic": "T", "key": 1, "value": {"A": 1}, "headers": []},
    ]}}
    case = case_of(spec, tmp_path)
    assert [r.topic for r in case.outputs] == ["T"]
    assert case.outputs_with_headers == frozenset({0})


def test_a_query_sink_topic_gets_the_statement_partitions_else_four_as_ksqldb_test_runner_made_it() -> None:
    from engine.ksqldb_import import import_plan

    plan = _plan()
    assert _sink_topics(import_plan(plan).statements) == {"OUTPUT": 4}
    plan["plan"][1]["statementText"] = "CREATE STREAM OUTPUT WITH (KAFKA_TOPIC='OUTPUT', PARTITIONS=3) AS SELECT * FROM INPUT;"
    assert _sink_topics(import_plan(plan).statements) == {"OUTPUT": 3}


def test_an_insert_into_sink_topic_gets_four_partitions_whatever_its_create_statement_declared() -> None:
    from engine.ksqldb_import import import_plan

    plan = _plan()
    create, query = plan["plan"]
    plan["plan"] = [
        create,
        {**create, "statementText": "CREATE STREAM OUTPUT (ID INT KEY, QTY BIGINT) WITH (KAFKA_TOPIC='OUTPUT', PARTITIONS=1);",
         "ddlCommand": _create("OUTPUT", "OUTPUT")},
        {**query, "statementText": "INSERT INTO OUTPUT SELECT * FROM INPUT;", "ddlCommand": None,
         "queryPlan": {**query["queryPlan"], "queryId": "INSERTQUERY_0"}},
    ]
    assert _sink_topics(import_plan(plan).statements) == {"OUTPUT": 4}


def test_post_conditions_see_a_topic_in_the_formats_of_its_source_not_of_its_declared_schema() -> None:
    from types import SimpleNamespace

    def fmt(name: str) -> Any:
        return SimpleNamespace(format=name)

    engine = SimpleNamespace(
        topics=lambda: {"in": TopicInfo("in", value_format="JSON"), "other": TopicInfo("other", value_format="AVRO")},
        sources=lambda: [SimpleNamespace(topic="in", key_format=fmt("KAFKA"), value_format=fmt("JSON_SR"))],
    )
    topics = _TopicFormats(engine).topics()
    assert (topics["in"].key_format, topics["in"].value_format) == ("KAFKA", "JSON_SR")
    assert topics["other"].value_format == "AVRO"  # no source on it: the declared format


def test_versions_of_a_case_with_equal_plans_and_inputs_share_one_run_and_keep_their_own_verdicts(
    tmp_path: Path, spark: Any
) -> None:
    _write(tmp_path, "project_-_adds_one", "7.1.0_1", _plan(), _spec("7.1.0", 2))
    _write(tmp_path, "project_-_adds_one", "8.0.0_2", _plan(), _spec("8.0.0", 7))  # expects another record
    first, second = run(tmp_path, workers=1).results
    assert second.shared_run == first.label and not first.shared_run
    assert (first.status, second.status) == (PASSED, FAILED)
    assert second.category == "output records differ" and "7" in second.details


def test_versions_differing_in_one_plan_field_are_not_merged(tmp_path: Path, spark: Any) -> None:
    plus_two = _plan()
    plus_two["plan"][1]["queryPlan"]["physicalPlan"]["source"]["selectExpressions"] = ["(QTY + 2) AS QTY"]
    _write(tmp_path, "project_-_adds", "7.1.0_1", _plan(), _spec("7.1.0", 3))
    _write(tmp_path, "project_-_adds", "8.0.0_2", plus_two, _spec("8.0.0", 3))
    first, second = run(tmp_path, workers=1).results
    assert not second.shared_run
    assert (first.status, second.status) == (FAILED, PASSED)


def test_the_run_key_covers_plans_inputs_and_output_topics_but_not_expected_records() -> None:
    from engine.ksqldb_import import import_plan

    def key(plan: dict[str, Any], spec: dict[str, Any]) -> str:
        return run_key(import_plan(plan).statements, spec)

    base = key(_plan(), _spec("8.0.0", 2))
    assert key(_plan(), _spec("7.1.0", 9)) == base
    renamed = _plan()
    renamed["plan"][1]["queryPlan"]["queryId"] = "CSAS_OUTPUT_1"
    assert key(renamed, _spec("8.0.0", 2)) != base
    other_input = _spec("8.0.0", 2)
    other_input["testCase"]["inputs"][0]["timestamp"] = 6
    assert key(_plan(), other_input) != base
    other_output_topic = _spec("8.0.0", 2)
    other_output_topic["testCase"]["outputs"][0]["topic"] = "ELSEWHERE"
    assert key(_plan(), other_output_topic) != base
    partitions = _plan()
    partitions["plan"][1]["statementText"] = "CREATE STREAM OUTPUT WITH (PARTITIONS=3) AS SELECT * FROM INPUT;"
    assert key(partitions, _spec("8.0.0", 2)) != base
    reformatted = _plan()
    reformatted["plan"][1]["statementText"] = "CREATE STREAM OUTPUT AS SELECT *  FROM INPUT;"
    assert key(reformatted, _spec("8.0.0", 2)) == base  # the text is not built, only its PARTITIONS


def test_configs_agree_on_what_a_run_read_and_all_of_them_once_it_was_copied() -> None:
    reads = ConfigReads({"a": "1", "b": "2"})
    assert reads.get("a") == "1" and "c" not in reads
    assert reads.agree({"a": "1", "b": "2"}, {"a": "1", "b": "other"})  # b was never read
    assert not reads.agree({"a": "1"}, {"a": "2"})
    assert not reads.agree({"a": "1"}, {"a": "1", "c": "now set"})  # read while absent
    dict(reads)
    assert reads.read_all and not reads.agree({"a": "1", "b": "2"}, {"a": "1", "b": "other"})


def test_a_version_whose_read_config_differs_runs_again(tmp_path: Path, spark: Any, monkeypatch: Any) -> None:
    from engine.facade.engine import KsqlEngine

    real_run = KsqlEngine.run

    def reading_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.config.get("ksql.example.read")  # a config the run reads
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(KsqlEngine, "run", reading_run)
    for i, (release, value) in enumerate([("7.1.0", "x"), ("7.2.0", "x"), ("8.0.0", "y")]):
        plan = _plan()
        plan["configs"] = {**plan["configs"], "ksql.example.read": value, "ksql.unread": str(i)}
        _write(tmp_path, "project_-_adds_one", f"{release}_{i}", plan, _spec(release, 2))
    results = run(tmp_path, workers=1).results
    assert [r.shared_run for r in results] == ["", results[0].label, ""]
    assert [r.status for r in results] == [PASSED] * 3


def test_cases_replayed_side_by_side_keep_the_corpus_order(tmp_path: Path, spark: Any) -> None:
    for case in ("a_-_first", "b_-_second"):
        _write(tmp_path, case, "7.1.0_1", _plan(), _spec("7.1.0", 2))
        _write(tmp_path, case, "8.0.0_2", _plan(), _spec("8.0.0", 2))
    replay = run(tmp_path, workers=2)
    assert [r.label for r in replay.results] == [p.label for p in discover(tmp_path)]
    assert [bool(r.shared_run) for r in replay.results] == [False, True, False, True]
    assert replay.to_json()["sharedRuns"] == 2 and replay.counts()[PASSED] == 4


def test_the_replay_runs_on_the_interpreted_session_and_leaves_the_shared_one_as_it_was(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import qtt.runner
    from engine.runtime.session import interpreted_session

    sessions: list[object] = []
    real = qtt.runner.interpreted_engine_factory

    def factory(properties: Any) -> Any:
        engine = real(properties)
        sessions.append(engine.runtime().spark)
        return engine

    monkeypatch.setattr(qtt.runner, "interpreted_engine_factory", factory)
    seen: list[str] = []
    before = spark.conf.get("spark.sql.codegen.wholeStage")
    run(_corpus(tmp_path), workers=2, on_result=lambda _: seen.append(spark.conf.get("spark.sql.codegen.wholeStage")))
    assert sessions and all(s is interpreted_session() for s in sessions)
    assert seen and set(seen) == {before}


def test_a_version_runs_with_its_saved_configs_and_the_case_properties_they_do_not_set() -> None:
    from types import SimpleNamespace

    from qtt.plans.ksqldb_replay import _configs

    loaded = SimpleNamespace(
        case=SimpleNamespace(properties={"ksql.functions.collect_list.limit": 1, "ksql.service.id": "case"}),
        imported=SimpleNamespace(configs={"ksql.service.id": "saved", "ksql.udf.collect.metrics": "false"}),
    )
    assert _configs(loaded) == {  # type: ignore[arg-type]
        "ksql.functions.collect_list.limit": 1, "ksql.service.id": "saved", "ksql.udf.collect.metrics": "false",
    }


def test_numbers_with_a_fraction_keep_every_digit_as_ksqldb_test_driver_reads_them(tmp_path: Path, spark: Any) -> None:
    # A float would read 98765432123456789.1234567891234567 as 98765432123456784.
    wide = "`ID` INTEGER KEY, `V` DECIMAL(33, 16)"
    plan = json.loads(json.dumps(_plan()).replace(SCHEMA, wide).replace("(QTY + 1) AS QTY", "CAST(V AS BIGINT) AS B"))
    plan["plan"][1]["ddlCommand"]["schema"] = "`ID` INTEGER KEY, `B` BIGINT"
    spec = _spec("8.0.0", 0)
    spec["schemas"] = {}
    spec["testCase"]["post"] = {}
    spec["testCase"]["inputs"][0]["value"] = {"V": "DIGITS"}
    spec["testCase"]["outputs"][0]["value"] = {"B": 98765432123456789}
    text = json.dumps(spec).replace('"DIGITS"', "98765432123456789.1234567891234567")
    folder = tmp_path / "project_-_wide_decimal" / "8.0.0_1"
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text(json.dumps(plan))
    (folder / "spec.json").write_text(text)
    [result] = run(tmp_path, workers=1).results
    assert result.status == PASSED, result.details


def test_a_sink_naming_a_schema_id_writes_the_fields_of_the_schema_the_case_registered(
    tmp_path: Path, spark: Any
) -> None:
    avro = {"keyFormat": {"format": "KAFKA", "properties": {}},
            "valueFormat": {"format": "AVRO", "properties": {"schemaId": "1"}}}
    plan = _plan()
    plan["plan"][1]["queryPlan"]["physicalPlan"]["formats"] = avro
    spec = _spec("7.2.0", 2)
    registered = {"type": "record", "name": "blah", "fields": [
        {"name": "QTY", "type": ["null", "int"], "default": None}, {"name": "EXTRA", "type": "int", "default": 100}]}
    spec["testCase"]["topics"][1].update(valueSchema=registered, valueFormat="AVRO")
    spec["testCase"]["outputs"][0]["value"] = {"QTY": 2, "EXTRA": 100}
    del spec["testCase"]["post"]
    _write(tmp_path, "elements_-_extra_field_with_default", "7.2.0_1", plan, spec)
    (result,) = run(tmp_path, workers=1).results
    assert result.status == PASSED, result.details


def test_the_run_key_covers_the_schemas_the_run_registers() -> None:
    from engine.ksqldb_import import import_plan

    def key(spec: dict[str, Any]) -> str:
        return run_key(import_plan(_plan()).statements, spec, case_of(spec, Path("spec.json")))

    base = _spec("8.0.0", 2)
    # The test case's own statements are not in the plans, but the runner registers the
    # schema of a topic a CREATE of theirs declares in a registry format.
    avro = _spec("8.0.0", 2)
    avro["testCase"]["statements"] = ["CREATE STREAM S (ID INT KEY, QTY INT) WITH (kafka_topic='other', value_format='AVRO');"]
    json_only = _spec("8.0.0", 2)
    json_only["testCase"]["statements"] = ["CREATE STREAM S (ID INT KEY, QTY INT) WITH (kafka_topic='other', value_format='JSON');"]
    assert key(avro) != key(base)
    assert key(json_only) == key(base)
