"""The harness parity table's readers: model fields from Java sources, REST keys from a README."""

from __future__ import annotations

from pathlib import Path

import pytest

from qtt.parity import read_rows
from qtt.parity.harness import MODEL_DIR, PLACES, model_fields, rest_keys

JAVA = '''
public final class TopicNode {
  public TopicNode(
      @JsonProperty("name") final String name,
      @JsonProperty(value = "partitions", required = true) final Optional<Integer> numPartitions
  ) {}
  @JsonProperty("name")
  public String getName() { return name; }
  public static final class WindowData {
    public WindowData(@JsonProperty("start") final long start) {}
  }
}
'''

DESERIALIZER = '''
public final class RecordNode {
  public static class Deserializer extends JsonDeserializer<RecordNode> {
    public RecordNode deserialize(final JsonParser jp) {
      final String topic = JsonParsingUtil.getRequired("topic", node, jp, String.class);
      final Optional<List<TestHeader>> headers = JsonParsingUtil
          .getOptional("headers", node, jp, new TypeReference<List<TestHeader>>() {});
    }
  }
}
'''


def _sources(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / MODEL_DIR
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / f"{name}.java").write_text(text, encoding="utf-8")
    return tmp_path


def test_constructor_properties_and_deserializer_keys_are_read_with_their_class(tmp_path: Path) -> None:
    src = _sources(tmp_path, TopicNode=JAVA, RecordNode=DESERIALIZER)
    found = {(cls, key): (java_type, required) for cls, key, java_type, required, _ in model_fields(src)}
    assert found == {
        ("TopicNode", "name"): ("String", False),  # the getter's annotation is no field
        ("TopicNode", "partitions"): ("Optional<Integer>", True),
        ("WindowData", "start"): ("long", False),
        ("RecordNode", "topic"): ("String", True),
        ("RecordNode", "headers"): ("List<TestHeader>", False),
    }


def test_a_model_class_the_table_does_not_place_is_an_error(tmp_path: Path) -> None:
    src = _sources(tmp_path, NewNode='class NewNode { NewNode(@JsonProperty("x") final String x) {} }')
    with pytest.raises(ValueError, match="NewNode"):
        model_fields(src)
    assert "NewNode" not in PLACES


def test_rest_case_keys_come_from_the_readme_paragraph_and_its_response_forms() -> None:
    readme = (
        "## Format facts\n\nCase keys: `name`, `statements` (run in order), `format` (as in QTT: `{FORMAT}`),\n"
        "`expectedError` (`type`, `message` contained in the error, `status` the HTTP status), `notes`.\n\n"
        "`responses`: one entry per statement.\n"
        '- `{"admin": {"@type": "currentStatus"}}`: a DDL statement.\n'
        '- `{"query": [...]}`: a query.\n'
    )
    keys = [key for key, _ in rest_keys(readme)]
    assert keys == ["name", "statements", "format", "expectedError", "expectedError.type",
                    "expectedError.message", "expectedError.status", "notes",
                    "responses[].admin", "responses[].query"]
    assert dict(rest_keys(readme))["statements"] == "run in order"
    with pytest.raises(ValueError, match="Case keys"):
        rest_keys("no such paragraph")


def test_the_committed_table_covers_qtt_rest_and_saved_plan_files() -> None:
    rows = read_rows("harness")
    kinds = {row.item.split(":", 1)[0] for row in rows}
    assert kinds == {"qtt", "rest", "plan", "tool"}
    by_item = {row.item: row for row in rows}
    assert by_item["qtt: record.window.type"].status == "covered"
    assert by_item["qtt: rule: unknown keys are ignored"].status == "covered"
    assert all(row.detail for row in rows if row.item.startswith("qtt: ") and "rule" not in row.item)
