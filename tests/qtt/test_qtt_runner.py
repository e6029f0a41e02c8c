"""Runner, CLI and conformance report, against a small scripted fake engine."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from engine import errors
from engine.data.records import TopicInfo, TopicRecord
from engine.facade.api import FormatDescription, SourceInfo, StatementResult
from engine.plan.schema import LogicalSchema
from qtt import cli, runner
from qtt.loader import expand_case
from qtt.model import ExpectedException, QttCase
from qtt.runner import Status, run_case


class FakeEngine:
    """Understands a toy language, one statement at a time.

    ECHO a TO b            route records of topic a to topic b
    FAIL ErrorClass text   raise engine.errors.ErrorClass(text)
    UNSUPPORTED feature    raise UnsupportedFeatureError(feature)
    CRASH                  raise a RuntimeError
    SOURCE NAME            register a stream NAME (`K` STRING KEY, `V` INTEGER)
    STOP Failure text      a query stops: ExecutionError caused by engine.errors.Failure(text)
    """

    instances: list[FakeEngine] = []

    def __init__(self, properties: Mapping[str, Any] | None = None) -> None:
        self.properties = dict(properties or {})
        self.created: list[TopicInfo] = []
        self.routes: list[tuple[str, str]] = []
        self.inputs: list[TopicRecord] = []
        self.sources_: dict[str, SourceInfo] = {}
        self.closed = False
        FakeEngine.instances.append(self)

    def create_topic(self, topic: TopicInfo) -> None:
        self.created.append(topic)

    def execute_sql(self, text: str) -> list[StatementResult]:
        words = text.rstrip(";").split(maxsplit=2)
        match words:
            case ["ECHO", src, rest]:
                self.routes.append((src, rest.split()[-1]))
            case ["FAIL", cls, message]:
                raise getattr(errors, cls)(message)
            case ["UNSUPPORTED", *feature]:
                raise errors.UnsupportedFeatureError(" ".join(feature))
            case ["STOP", cls, message]:
                cause = getattr(errors, cls)(message)
                raise errors.ExecutionError(f"Query Q failed: Exception caught in process: {message}") from cause
            case ["CRASH"]:
                raise RuntimeError("the fake engine fell over")
            case ["SOURCE", name]:
                self.sources_[name] = SourceInfo(
                    name=name,
                    kind="STREAM",
                    schema=LogicalSchema.parse("`K` STRING KEY, `V` INTEGER"),
                    topic=name,
                    key_format=FormatDescription("KAFKA"),
                    value_format=FormatDescription("JSON"),
                )
            case _:
                raise errors.ParseError(f"Cannot parse '{text}'.", line=1, column=1)
        return [StatementResult(statement_text=text, kind="OTHER")]

    def produce(self, records: Iterable[TopicRecord]) -> None:
        self.inputs.extend(records)

    def run(self) -> dict[str, list[TopicRecord]]:
        out: dict[str, list[TopicRecord]] = {}
        for record in self.inputs:
            for src, dst in self.routes:
                if record.topic == src:
                    moved = TopicRecord(
                        dst,
                        record.key,
                        record.value,
                        record.timestamp,
                        None,
                        record.window,
                        record.headers,
                    )
                    out.setdefault(dst, []).append(moved)
        return out

    def source(self, name: str) -> SourceInfo | None:
        return self.sources_.get(name)

    def sources(self) -> list[SourceInfo]:
        return list(self.sources_.values())

    def topics(self) -> dict[str, TopicInfo]:
        return {t.name: t for t in self.created}

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def fake_engine() -> Iterator[type[FakeEngine]]:
    FakeEngine.instances = []
    previous = runner.set_engine_factory(FakeEngine)
    yield FakeEngine
    runner.set_engine_factory(previous)


def make_case(tmp_path: Path, **raw: Any) -> QttCase:
    body: dict[str, Any] = {
        "name": "c",
        "statements": ["ECHO in TO out;"],
        "inputs": [{"topic": "in", "key": "a", "value": {"V": 1}, "timestamp": 3}],
        "outputs": [{"topic": "out", "key": "a", "value": {"V": 1}, "timestamp": 3}],
    }
    body.update(raw)
    [case] = expand_case(body, tmp_path / "cases.json", 0)
    return case


# ---------------------------------------------------------------------------- runner


def test_matching_case_passes_and_closes_its_engine(tmp_path: Path) -> None:
    result = run_case(make_case(tmp_path), strict=True)
    assert result.status is Status.PASSED, result.reason
    assert result.case_id == "cases - c" and result.seconds >= 0
    [engine] = FakeEngine.instances
    assert engine.closed


def test_engine_gets_the_case_properties_and_topics(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        properties={"ksql.flag": "{CONFIG}"},
        config=["on"],
        topics=[{"name": "in", "valueFormat": "AVRO", "partitions": 2}],
    )
    run_case(case)
    [engine] = FakeEngine.instances
    assert engine.properties == {"ksql.flag": "on"}
    assert [(t.name, t.value_format, t.partitions) for t in engine.created] == [
        ("in", "AVRO", 2),
        ("out", None, 1),
    ]


class LineEngine(FakeEngine):
    """A fake engine that takes ``first_line``: it fails on FAIL with the line it was given."""

    lines: list[int] = []

    def execute_sql(self, text: str, *, first_line: int = 1) -> list[StatementResult]:
        LineEngine.lines.append(first_line)
        if text.startswith("FAIL"):
            raise errors.ParseError("Syntax error", line=first_line, column=1, syntax=True)
        return [StatementResult(statement_text=text, kind="OTHER")]


def test_each_statement_gets_the_line_it_starts_on_in_the_statements_joined_by_newlines(
    tmp_path: Path,
) -> None:
    LineEngine.lines = []
    runner.set_engine_factory(LineEngine)
    case = make_case(
        tmp_path,
        statements=["ECHO in\nTO out;", "SOURCE\n\nS;", "FAIL here;"],
        outputs=[],
        expectedException={"type": "io.confluent.ksql.parser.exception.ParseFailedException",
                           "message": "line 6:1: Syntax error"},
    )
    result = run_case(case, strict=True)
    assert LineEngine.lines == [1, 3, 6]
    assert result.status is Status.PASSED and result.message_matched, result.reason


def test_an_engine_whose_execute_sql_takes_only_the_text_still_runs(tmp_path: Path) -> None:
    result = run_case(make_case(tmp_path, statements=["ECHO\nin TO out;"]), strict=True)
    assert result.status is Status.PASSED, result.reason  # FakeEngine.execute_sql(text)


def test_output_mismatch_fails_with_reason_and_diff(tmp_path: Path) -> None:
    case = make_case(tmp_path, outputs=[{"topic": "out", "key": "a", "value": {"V": 2}}])
    result = run_case(case)
    assert result.status is Status.FAILED
    assert result.reason == "Topic 'out' record 1 of 1: value.V expected 2 but was 1."
    assert "<- value.V" in result.render()


def test_post_condition_failure_fails_the_case(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        statements=["ECHO in TO out;", "SOURCE S;"],
        post={"sources": [{"name": "S", "type": "stream", "schema": "K STRING KEY, V BIGINT"}]},
    )
    result = run_case(case)
    assert result.status is Status.FAILED
    assert "Source 'S' has schema" in result.reason


def test_strict_mode_fails_unexpected_output_topics(tmp_path: Path) -> None:
    case = make_case(tmp_path, statements=["ECHO in TO out;", "ECHO in TO spare;"])
    assert run_case(case, strict=False).status is Status.PASSED
    strict = run_case(case, strict=True)
    assert strict.status is Status.FAILED and "'spare'" in strict.reason


def test_expected_exception_passes_when_error_class_maps(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        statements=["FAIL AnalysisError Column 'X' cannot be resolved."],
        outputs=[],
        expectedException={
            "type": "io.confluent.ksql.util.KsqlStatementException",
            "message": "cannot be resolved",
        },
    )
    result = run_case(case)
    assert result.status is Status.PASSED and result.message_matched is True


def test_expected_message_mismatch_passes_leniently_and_fails_strictly_showing_both(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        statements=["FAIL AnalysisError Something else."],
        expectedException={
            "type": "io.confluent.ksql.util.KsqlException",
            "message": "ksqlDB wording",
        },
    )
    result = run_case(case)
    assert result.status is Status.PASSED and result.message_matched is False
    both = "KsqlException raised with another message: expected one containing 'ksqlDB wording', got 'Something else.'"
    assert result.reason == both
    strict = run_case(case, strict=True)
    assert strict.status is Status.FAILED and strict.message_matched is False
    assert strict.reason == both


def test_conformance_counts_other_messages_apart_and_lists_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    other = {"name": "other", "statements": ["FAIL AnalysisError Something else."],
             "expectedException": {"type": "io.confluent.ksql.util.KsqlException", "message": "ksqlDB wording"}}
    same = {"name": "same", "statements": ["FAIL AnalysisError ksqlDB wording."],
            "expectedException": {"type": "io.confluent.ksql.util.KsqlException", "message": "ksqlDB wording"}}
    (folder / "errors.json").write_text(json.dumps({"tests": [other, same]}))
    report = tmp_path / "report.json"
    assert cli.main(["conformance", str(folder), "--report", str(report), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip("\n").splitlines()[-1] == (
        "conformance: 2/2 passed (100.0%); 1/2 strictly (50.0%): "
        "1 raised the expected error with another message"
    )
    assert "expected errors raised with another message" in out and "errors - other" in out
    totals = json.loads(report.read_text())["totals"]
    assert (totals["passed"], totals["passed_strictly"], totals["other_message"]) == (2, 1, 1)


def _stopping(tmp_path: Path, statement: str, cause: str, cause_message: str) -> QttCase:
    return make_case(
        tmp_path,
        statements=[statement],
        expectedException={
            "type": "org.apache.kafka.streams.errors.StreamsException",
            "message": "Exception caught in process",
            "cause": cause,
            "causeMessage": cause_message,
        },
    )


def test_expected_cause_is_the_class_of_the_errors_direct_cause(tmp_path: Path) -> None:
    function = "io.confluent.ksql.function.KsqlFunctionException"
    serialize = "org.apache.kafka.streams.errors.StreamsException"
    result = run_case(_stopping(tmp_path, "STOP FunctionFailure Numeric field overflow", function, "overflow"))
    assert result.status is Status.PASSED and result.message_matched is True, result.reason
    result = run_case(
        _stopping(tmp_path, "STOP SinkSerializationFailure Unable to serialize record", serialize, "serialize")
    )
    assert result.status is Status.PASSED and result.message_matched is True, result.reason
    wrong = run_case(_stopping(tmp_path, "STOP SinkSerializationFailure Unable to serialize", function, "x"))
    assert wrong.status is Status.FAILED
    assert wrong.reason.startswith(
        "Expected an error caused by KsqlFunctionException (FunctionFailure), but its cause is "
        "SinkSerializationFailure: Unable to serialize"
    )


def test_an_expected_cause_fails_an_error_without_one_or_a_class_kspark_does_not_map(tmp_path: Path) -> None:
    none = run_case(_stopping(tmp_path, "FAIL ExecutionError Exception caught in process",
                              "io.confluent.ksql.function.KsqlFunctionException", "overflow"))
    assert none.status is Status.FAILED
    assert none.reason == "Expected an error caused by KsqlFunctionException, but ExecutionError has no cause."
    unknown = run_case(_stopping(tmp_path, "STOP FunctionFailure boom", "java.lang.ArithmeticException", "boom"))
    assert unknown.status is Status.FAILED
    assert unknown.reason.startswith(
        "Expected a cause java.lang.ArithmeticException, which kspark maps to none of its errors"
    )


def test_the_cause_message_is_looked_for_in_the_direct_cause_only(tmp_path: Path) -> None:
    # expectedException.causeMessage: the text is in the error's own message but not in its
    # cause's, and ksqlDB's matcher reads the cause's message only.
    case = _stopping(tmp_path, "STOP FunctionFailure Numeric field overflow",
                     "io.confluent.ksql.function.KsqlFunctionException", "Exception caught")
    lenient = run_case(case)
    assert lenient.status is Status.PASSED and lenient.message_matched is False
    assert lenient.reason == (
        "StreamsException raised with another message: expected one containing 'Exception caught in "
        "process' and 'Exception caught', got 'Query Q failed: Exception caught in process: Numeric field "
        "overflow' caused by 'Numeric field overflow'"
    )
    assert run_case(case, strict=True).status is Status.FAILED
    expected = ExpectedException(type="x", cause="c", cause_message="deep")
    inner = errors.FunctionFailure("deep")
    middle = errors.FunctionFailure("shallow")
    middle.__cause__ = inner
    outer = errors.ExecutionError("top")
    outer.__cause__ = middle
    assert runner.cause_message_matches(expected, outer) is False
    assert runner.cause_message_matches(expected, middle) is True


def test_expected_parse_failure_rejects_other_error_classes(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        statements=["FAIL AnalysisError Nope."],
        expectedException={"type": "io.confluent.ksql.parser.exception.ParseFailedException"},
    )
    result = run_case(case)
    assert result.status is Status.FAILED
    assert (
        result.reason == "Expected ParseFailedException (ParseError) but got AnalysisError: Nope."
    )


def test_expected_exception_that_is_not_raised_fails(tmp_path: Path) -> None:
    case = make_case(
        tmp_path,
        expectedException={"type": "io.confluent.ksql.util.KsqlException", "message": "boom"},
    )
    result = run_case(case)
    assert result.status is Status.FAILED
    assert (
        result.reason
        == "Expected KsqlException with a message containing 'boom', but no error was raised."
    )


def test_unexpected_engine_error_fails_naming_the_statement(tmp_path: Path) -> None:
    case = make_case(
        tmp_path, statements=["ECHO in TO out;", "FAIL MetastoreError Stream 'S' exists."]
    )
    result = run_case(case)
    assert result.status is Status.FAILED
    assert result.reason.startswith(
        "MetastoreError: Stream 'S' exists. (while executing statement 2"
    )


def test_unsupported_feature_is_its_own_verdict_even_when_an_error_is_expected(
    tmp_path: Path,
) -> None:
    for extra in ({}, {"expectedException": {"type": "io.confluent.ksql.util.KsqlException"}}):
        result = run_case(make_case(tmp_path, statements=["UNSUPPORTED session windows"], **extra))
        assert result.status is Status.UNSUPPORTED
        assert result.feature == "session windows"
        assert "session windows" in result.reason


def test_non_engine_exception_is_an_error_with_type_message_and_frame(tmp_path: Path) -> None:
    result = run_case(make_case(tmp_path, statements=["CRASH"]))
    assert result.status is Status.ERROR
    assert re.search(
        r"RuntimeError: the fake engine fell over \(at .*test_qtt_runner.py:\d+ in execute_sql\)",
        result.reason,
    )
    assert FakeEngine.instances[0].closed


def test_engine_that_cannot_start_is_an_error(tmp_path: Path) -> None:
    def broken(_: Mapping[str, Any]) -> Any:
        raise ImportError("no engine here")

    result = run_case(make_case(tmp_path), engine_factory=broken)
    assert result.status is Status.ERROR
    assert "ImportError: no engine here" in result.reason and "starting the engine" in result.reason


@pytest.mark.parametrize(
    ("java_type", "error", "matches"),
    [
        ("io.confluent.ksql.util.KsqlStatementException", errors.ParseError("x"), True),
        ("io.confluent.ksql.util.KsqlException", errors.TypeCheckError("x"), True),
        ("io.confluent.ksql.util.KsqlException", errors.UnsupportedFeatureError("f"), False),
        ("io.confluent.ksql.parser.exception.ParseFailedException", errors.ParseError("x"), True),
        (
            "io.confluent.ksql.parser.exception.ParseFailedException",
            errors.AnalysisError("x"),
            False,
        ),
        ("org.apache.kafka.streams.errors.StreamsException", errors.EvaluationError("x"), True),
        ("org.apache.kafka.streams.errors.StreamsException", errors.RecordSerdeError("x"), True),
        ("org.apache.kafka.streams.errors.StreamsException", errors.AnalysisError("x"), False),
        ("com.example.SomethingNew", errors.PlanError("x"), True),
    ],
)
def test_expected_exception_table(java_type: str, error: Exception, matches: bool) -> None:
    assert runner.error_matches(ExpectedException(type=java_type), error) is matches


# ---------------------------------------------------------------------------- CLI


def write_cases(folder: Path, name: str, cases: list[Any] | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(
        cases if isinstance(cases, str) else json.dumps({"tests": cases}), encoding="utf-8"
    )
    return path


def echo(name: str, value: int = 1, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "statements": ["ECHO in TO out;"],
        "inputs": [{"topic": "in", "key": "k", "value": 1}],
        "outputs": [{"topic": "out", "key": "k", "value": value}],
    }
    body.update(extra)
    return body


def test_cli_run_passes_when_every_case_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_cases(tmp_path, "good.json", [echo("one"), echo("two")])
    assert cli.main(["run", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["PASS good - one", "PASS good - two"]
    assert lines[-1].startswith("2 cases: 2 passed, 0 failed, 0 errors, 0 unsupported")


def test_cli_run_fails_on_any_failure_and_prints_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_cases(
        tmp_path,
        "mixed.json",
        [
            echo("ok"),
            echo("wrong", value=2),
            echo("gap", statements=["UNSUPPORTED joins"]),
            echo("boom", statements=["CRASH"]),
        ],
    )
    assert cli.main(["run", str(tmp_path), "--diff"]) == 1
    out = capsys.readouterr().out
    assert "PASS mixed - ok\n" in out
    assert "FAIL mixed - wrong - Topic 'out' record 1 of 1: value expected 2 but was 1." in out
    assert "UNSUPPORTED mixed - gap - Unsupported feature: joins." in out
    assert "ERROR mixed - boom - Unexpected RuntimeError" in out
    assert "<- value" in out
    assert "4 cases: 1 passed, 1 failed, 1 errors, 1 unsupported" in out


def test_cli_run_filter_selects_cases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_cases(tmp_path, "f.json", [echo("keep"), echo("drop", value=9)])
    assert cli.main(["run", str(tmp_path), "--filter", "keep"]) == 0
    assert "drop" not in capsys.readouterr().out


def test_cli_run_reports_a_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", str(tmp_path / "missing")]) == 2
    assert "missing" in capsys.readouterr().err


def test_cli_run_with_no_cases_does_not_pass(tmp_path: Path) -> None:
    assert cli.main(["run", str(tmp_path)]) == 1


# ---------------------------------------------------------------------------- conformance


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    write_cases(
        folder,
        "alpha.json",
        [
            echo("ok"),
            echo("wrong", value=2),
            echo("gap", statements=["UNSUPPORTED joins"]),
            echo("gap too", statements=["UNSUPPORTED joins"]),
            echo("old", versions={"max": "5.0.0"}),
            echo("off", enabled=False),
            echo(
                "err",
                statements=["FAIL AnalysisError Bad column."],
                expectedException={
                    "type": "io.confluent.ksql.util.KsqlStatementException",
                    "message": "Bad column",
                },
            ),
        ],
    )
    write_cases(folder, "beta.json", '{"tests": [ // broken\n {"name": }]}')
    # Non-strict: records on a topic the case does not mention are not checked.
    write_cases(
        folder, "gamma.json", [echo("extra", statements=["ECHO in TO out;", "ECHO in TO other;"])]
    )
    return folder


def test_conformance_never_fails_for_cases_and_ends_with_the_rate(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    assert cli.main(["conformance", str(corpus), "--report", str(report), "--no-progress"]) == 0
    out = capsys.readouterr().out
    lines = out.rstrip("\n").splitlines()
    assert lines[-1] == "conformance: 3/7 passed (42.9%)"
    assert "not applicable (versions): 1, disabled: 1" in out
    assert re.search(r"wall time: \d+\.\ds, \d+\.\d\d cases/s", out)
    assert "top unsupported features" in out and "joins" in out
    assert "alpha.json" in out and "TOTAL" in out


def test_conformance_report_shape(corpus: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    cli.main(["conformance", str(corpus), "--report", str(report), "--no-progress"])
    text = report.read_text()
    data = json.loads(text)
    assert text.endswith("}\n") and list(data) == sorted(data)
    assert set(data) >= {"cases", "files", "totals", "wall_seconds"}
    assert data["totals"] == {
        "passed": 3,
        "failed": 1,
        "error": 1,
        "unsupported": 2,
        "total": 7,
        "not_applicable": 1,
        "disabled": 1,
        "passed_strictly": 3,
        "other_message": 0,
    }
    assert data["files"]["beta.json"]["error"] == 1
    by_name = {c["name"]: c for c in data["cases"]}
    assert by_name["alpha - gap"] == {
        "file": "alpha.json",
        "name": "alpha - gap",
        "status": "unsupported",
        "reason": "Unsupported feature: joins.",
        "seconds": by_name["alpha - gap"]["seconds"],
    }
    assert by_name["alpha - err"]["message_matched"] is True
    assert by_name["alpha - wrong"]["status"] == "failed"
    assert by_name["beta"]["status"] == "error" and "Invalid JSON" in by_name["beta"]["reason"]
    assert by_name["gamma - extra"]["status"] == "passed"
    assert data["top_unsupported"] == [{"count": 2, "feature": "joins"}]
    assert all(list(c) == sorted(c) for c in data["cases"])


def test_conformance_missing_path_is_a_runner_error(tmp_path: Path) -> None:
    assert cli.main(["conformance", str(tmp_path / "nope"), "--no-progress"]) == 2


def test_conformance_filter_and_empty_total(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["conformance", str(corpus), "--filter", "no such case", "--no-progress"]) == 0
    assert capsys.readouterr().out.rstrip("\n").splitlines()[-1] == "conformance: 0/0 passed (0.0%)"


def test_an_input_that_does_not_fit_its_topics_schema_is_an_error_naming_it(tmp_path: Path) -> None:
    schema = {"type": "record", "name": "V", "fields": [{"name": "B", "type": "bytes"}]}
    case = make_case(tmp_path, topics=[{"name": "in", "valueFormat": "AVRO", "valueSchema": schema}],
                     inputs=[{"topic": "in", "key": "a", "value": {"B": "%%"}}])
    result = run_case(case)
    assert result.status is Status.ERROR
    assert result.reason == (
        "Cannot use the case while producing the input records: Input record 1 (topic 'in'): field 'B' is "
        "BYTES in the topic's schema, so its text must be base64, but '%%' is not."
    )
