"""Parity table ``harness``: every field of ksqlDB's test-file models, as ksqlDB's runner reads
and applies it, and whether kspark's harness (``qtt``) does the same.

One row per

- field of a QTT test model (``ksqldb-functional-tests/src/main/.../test/model``): a
  ``@JsonProperty`` constructor parameter (``required = true`` marks required ones) or a
  ``JsonParsingUtil.getRequired``/``getOptional`` key of a custom deserializer (``RecordNode``,
  ``SourceNode``), placed by the model class at its JSON location (``qtt: case.versions``,
  ``qtt: record.window.type``, ``qtt: post.topics.blacklist``, ...);
- rule of ksqlDB's loader and runner that is not a field (unknown keys, comments, ``{FORMAT}``
  and ``{CONFIG}`` expansion, duplicate names, how errors and outputs are matched), each with
  the text of ksqlDB's source it is read from, which must still be there;
- key of a REST QTT case: ksqlDB's ``RestQueryTranslationTest`` model is not part of the
  reference sources (it lives under ``src/test``), so its keys come from the corpus' README
  (``ksqldb-rest-qtt/README.md``, its "Case keys" paragraph and its ``responses`` forms);
- field of a saved plan (``plan.json``, ``spec.json``, the topology file): ksqlDB's
  ``TestCasePlan``/``PlannedTestLoader`` classes are under ``src/test`` too, so the fields come
  from the historical plans' README (``ksqldb-historical-plans/README.md``), each checked to be
  named there; ``spec.json``'s ``schemas`` entries are ksqlDB's ``SchemaNode`` (in ``model``).

The READMEs are found under ``$QTT_CORPORA_DIR`` (default ``/work/shared``).

The generator checks kspark itself: a field is read when kspark's reader for its kind of file
(``qtt/loader.py`` for QTT, ``qtt/rest/loader.py`` for REST QTT, ``qtt/plans`` for saved
plans) holds its key as a string. The test is the committed ``harness_map.json`` (item -> the
kspark test that shows kspark reading and applying the field as ksqlDB does, and ``applies``:
how ksqlDB's runner applies it; or item -> reason for what kspark deliberately does
otherwise), and the generator checks that the test exists and names the key in its text. A
row failing a check stays missing, with the reason saying which.
"""

from __future__ import annotations

import ast
import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from qtt.parity import Row, table

MAP_FILE = Path(__file__).with_name("harness_map.json")
ROOT = Path(__file__).resolve().parents[2]
TEST_DIR = "ksqldb-functional-tests/src/main/java/io/confluent/ksql/test"
MODEL_DIR = f"{TEST_DIR}/model"
REST_README = "ksqldb-rest-qtt/README.md"
PLANS_README = "ksqldb-historical-plans/README.md"

# Where each model class sits in a test file: the prefix of its fields' items.
PLACES: dict[str, str] = {
    "QttTestFile": "qtt: file",
    "TestCaseNode": "qtt: case",
    "VersionBoundsNode": "qtt: case.versions",
    "RecordNode": "qtt: record",
    "WindowData": "qtt: record.window",
    "TestHeader": "qtt: record.headers[]",
    "TopicNode": "qtt: topics[]",
    "SchemaReferencesNode": "qtt: topics[].keySchemaReferences[]|valueSchemaReferences[]",
    "ExpectedExceptionNode": "qtt: expectedException",
    "PostConditionsNode": "qtt: post",
    "PostTopicsNode": "qtt: post.topics",
    "PostTopicNode": "qtt: post.topics.topics[]",
    "SourceNode": "qtt: post.sources[]",
    "KeyFormatNode": "qtt: post.sources[].keyFormat",
    "SchemaNode": "plan: spec.json schemas{}",
    "InputRecordsNode": "tool: input file",
    "OutputRecordsNode": "tool: output file",
}

# Rules of ksqlDB's loader and runner that are no field: (item, source file under the test
# folder, a regex that must match in it, what the rule is).
RULES: tuple[tuple[str, str, str, str], ...] = (
    ("qtt: rule: unknown keys are ignored", "tools/TestJsonMapper.java",
     r"disable\(DeserializationFeature\.FAIL_ON_UNKNOWN_PROPERTIES\)",
     "the test mapper does not fail on unknown properties: a key no model reads is ignored"),
    ("qtt: rule: comments in the JSON", "tools/TestJsonMapper.java", r"enable\(Feature\.ALLOW_COMMENTS\)",
     "// and /* */ comments are allowed outside strings"),
    ("qtt: rule: decimal numbers are read exactly", "tools/TestJsonMapper.java",
     r"USE_BIG_DECIMAL_FOR_FLOATS", "a number with a fraction is a BigDecimal, never a double"),
    ("qtt: rule: case names expand with format and config", "tools/TestCaseBuilderUtil.java",
     r"prefix \+ testName \+ pf \+ pc",
     "'<file stem> - <name>[ - <format>][ - <property>=<config>]', formats outer, configs inner"),
    ("qtt: rule: {FORMAT} without a format list", "tools/TestCaseBuilderUtil.java",
     r"FORMAT_REPLACE_ERROR\s*=", "{FORMAT} is replaced by a sentence asking for a 'format' list, "
     "so the statement fails to parse"),
    ("qtt: rule: {CONFIG} names the property a config list sets", "tools/TestCaseBuilder.java",
     r"\"\{CONFIG\}\"\.equalsIgnoreCase",
     "exactly one property has the value {CONFIG}, in any letter case; each config entry sets it"),
    ("qtt: rule: disabled cases are not built", "tools/TestCaseBuilder.java", r"if \(!test\.isEnabled\(\)\)",
     "a case with enabled false yields no test at all"),
    ("qtt: rule: duplicate case names are refused", "loader/JsonTestLoader.java", r"throwOnDuplicateNames",
     "two expanded cases of the loaded files with one name fail the load"),
    ("qtt: rule: topics are inferred from CREATE statements", "tools/TestCaseBuilderUtil.java",
     r"createTopicFromStatement",
     "a CREATE with columns declares its topic, key and value schemas and serde features when the "
     "case's topics do not"),
    ("qtt: rule: inputs go through their topic's schema", "model/RecordNode.java", r"coerceRecord",
     "an input record whose topic has an AVRO or PROTOBUF schema has its BYTES fields decoded from base64"),
    ("qtt: rule: an expected message matches the message or the unlogged message",
     "tools/exceptions/KsqlExpectedException.java", r"getUnloggedMessage\(\)",
     "expectedException.message is a substring of the error's message or of its unlogged message"),
    ("qtt: rule: outputs are compared per topic, in order, count first", "tools/TestExecutor.java",
     r"Expected <\" \+ expected\.size\(\)",
     "the records of each expected topic are read back and compared one by one after the counts agree"),
    ("qtt: rule: the topic blacklist is searched, not matched whole", "model/PostConditionsNode.java",
     r"Pattern\.compile\(blackList", "a topic fails the blacklist when the regex is found anywhere in its name"),
    ("qtt: rule: version bounds are inclusive", "tools/VersionBounds.java", r"Range\.closed",
     "min and max both belong to the range; a missing bound leaves that side open"),
    ("qtt: rule: an empty file is refused", "model/QttTestFile.java", r"test file did not contain any tests",
     "a file whose tests list is empty fails to load"),
)

# Fields of a saved plan's files (ksqlDB's TestCasePlan model is not in the reference sources;
# each is checked to be named in the historical plans' README): (item, key, what it holds).
PLAN_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("plan: plan.json plan", "plan", "one ksqlPlanV1 entry per statement, built in order without re-planning"),
    ("plan: plan.json configs", "configs", "the properties in force when the plan was saved, applied when it is built"),
    ("plan: plan.json plan[].statementText", "statementText", "the statement the entry was planned from"),
    ("plan: plan.json plan[].ddlCommand", "ddlCommand", "the metastore command of the statement, or null"),
    ("plan: plan.json plan[].queryPlan", "queryPlan", "the persistent query of the statement (sources, sink, "
     "queryId, physicalPlan), or null"),
    ("plan: spec.json version", "version", "the ksqlDB release that saved the plan"),
    ("plan: spec.json timestamp", "timestamp", "when the plan was saved; orders versions of one release"),
    ("plan: spec.json path", "path", "the QTT file the case came from"),
    ("plan: spec.json schemas", "schemas", "the schema and formats of every internal topic and state store, "
     "compared with the ones the plan builds"),
    ("plan: spec.json testCase", "testCase", "the QTT case the plan was saved from (its inputs are fed, its "
     "outputs and post-conditions checked)"),
    ("plan: topology", "topology", "the Kafka Streams topology description the plan built, compared as text"),
)

_CLASS = re.compile(r"\bclass\s+(\w+)")
_PROPERTY = re.compile(
    r"@JsonProperty\(\s*(?:value\s*=\s*)?\"([^\"]+)\"\s*(,\s*required\s*=\s*true)?\s*\)\s*final\s+([\w<>, ?\[\]]+?)\s+\w+\s*[,)]"
)
_GETTER = re.compile(r"JsonParsingUtil\s*\.\s*get(Required|Optional)\(\s*\"(\w+)\"\s*,\s*\w+\s*,\s*\w+\s*,\s*([^)]*?)\s*[)]")


def _class_at(text: str, position: int) -> str:
    """The innermost class declared before ``position``; a custom ``Deserializer`` reads for
    the class it is nested in."""
    names = [m.group(1) for m in _CLASS.finditer(text, 0, position)]
    names = [n for n in names if n not in ("Deserializer", "Serializer")]
    return names[-1] if names else ""


def model_fields(src: Path) -> list[tuple[str, str, str, bool, str]]:
    """(class, key, Java type, required, file) of every field ksqlDB's QTT models read."""
    fields = []
    for path in sorted((src / MODEL_DIR).glob("*.java")):
        text = path.read_text(encoding="utf-8")
        relative = path.relative_to(src).as_posix()
        for match in _PROPERTY.finditer(text):
            fields.append((_class_at(text, match.start()), match.group(1), " ".join(match.group(3).split()),
                           bool(match.group(2)), relative))
        for match in _GETTER.finditer(text):
            java_type = match.group(3).replace(".class", "").strip()
            if java_type.startswith("new TypeReference<"):  # new TypeReference<T>() {}: T
                java_type = java_type[len("new TypeReference<"):].rstrip("(").strip()[:-1]
            fields.append((_class_at(text, match.start()), match.group(2), java_type,
                           match.group(1) == "Required", relative))
    unplaced = sorted({cls for cls, *_ in fields if cls not in PLACES})
    if unplaced:
        raise ValueError(f"ksqlDB's test model has classes the harness table does not place: {', '.join(unplaced)}; "
                         "add them to qtt.parity.harness.PLACES.")
    return fields


def _corpora() -> Path:
    return Path(os.environ.get("QTT_CORPORA_DIR", "/work/shared"))


def _readme(name: str) -> tuple[str, str]:
    path = _corpora() / name
    if not path.is_file():
        raise FileNotFoundError(f"The harness table reads {name} under $QTT_CORPORA_DIR ({_corpora()}); "
                                f"{path} does not exist.")
    return path.read_text(encoding="utf-8"), f"$QTT_CORPORA_DIR/{name}"


def rest_keys(readme: str) -> list[tuple[str, str]]:
    """(key path, what the README says) of every REST QTT case key of the README: the
    backquoted names of its "Case keys:" paragraph (a name in the parentheses after a key is a
    key of that key's object), and the forms of a ``responses`` entry."""
    match = re.search(r"^Case keys:(.*?)(?:\n\s*\n)", readme, re.S | re.M)
    if match is None:
        raise ValueError("The REST QTT README has no 'Case keys:' paragraph.")
    text = " ".join(match.group(1).split())
    keys: list[tuple[str, str]] = []
    depth, last, note_start = 0, "", 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == "(":
            depth += 1
            if depth == 1:
                note_start = index + 1
        elif char == ")":
            depth -= 1
            if depth == 0 and keys and keys[-1][0] == last:
                keys[-1] = (last, text[note_start:index])
        elif char == "`":
            end = text.index("`", index + 1)
            name = text[index + 1:end]
            if depth == 0:
                last = name
                keys.append((name, ""))
            elif re.fullmatch(r"[A-Za-z]+", name):
                keys.append((f"{last}.{name}", ""))
            index = end
        index += 1
    for form in re.findall(r"^- `\{\"(\w+)\":", readme, re.M):
        keys.append((f"responses[].{form}", ""))
    return keys


@cache
def reader_names(kind: str) -> frozenset[str]:
    """Every string constant in kspark's reader of one kind of file."""
    paths = {
        "qtt": [ROOT / "qtt" / "loader.py", ROOT / "qtt" / "schemas.py"],
        "rest": [ROOT / "qtt" / "rest" / "loader.py", ROOT / "qtt" / "loader.py"],
        "plan": sorted((ROOT / "qtt" / "plans").glob("*.py")) + sorted((ROOT / "engine" / "ksqldb_import").glob("*.py"))
        + [ROOT / "qtt" / "loader.py"],
        "tool": [ROOT / "qtt" / "loader.py"],
    }[kind]
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
    return frozenset(names)


def _test_problem(test: str, needle: str) -> str | None:
    """Why ``test`` does not show ``needle`` (None: it exists and names it)."""
    if test.startswith("qtt:"):
        _, file, name = test.split(":", 2)
        path = ROOT / "tests" / "qtt_cases" / file
        if not path.is_file() or json.dumps(name) not in path.read_text(encoding="utf-8"):
            return f"the mapped QTT case {test} does not exist"
        return None
    file, _, name = test.partition("::")
    path = ROOT / file
    if not path.exists():
        return f"the mapped test file {file} does not exist"
    text = path.read_text(encoding="utf-8")
    function = next((n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if function is None:
        return f"the mapped test {test} does not exist"
    if needle not in (ast.get_source_segment(text, function) or ""):
        return f"the mapped test {test} does not name {needle}"
    return None


def _row(item: str, source: str, key: str | None, kind: str, definition: str, mapping: dict[str, Any]) -> Row:
    entry = mapping.get(item, {})
    applies = entry.get("applies", "")
    detail = "; ".join(part for part in (definition, applies) if part)
    if "reason" in entry:
        return Row(item=item, status="reasoned", source=source, reason=entry["reason"], detail=detail)
    if key is not None and key not in reader_names(kind) and "names" not in entry:
        note = entry.get("missing")
        reason = f"kspark's {kind} reader never reads '{key}'"
        return Row(item=item, status="missing", source=source, reason=f"{reason}: {note}" if note else reason,
                   detail=detail)
    test = entry.get("test", "")
    if not test:
        return Row(item=item, status="missing", source=source, reason=entry.get("missing", "no test is mapped"),
                   detail=detail)
    problem = _test_problem(test, entry.get("names", key or ""))
    if problem is not None:
        return Row(item=item, status="missing", source=source, reason=problem, detail=detail)
    return Row(item=item, status="covered", source=source, test=test, detail=detail)


@table("harness")
def harness_rows(src: Path) -> list[Row]:
    mapping: dict[str, Any] = json.loads(MAP_FILE.read_text(encoding="utf-8"))
    rows = []
    for cls, key, java_type, required, file in model_fields(src):
        place = PLACES[cls]
        kind = place.split(":", 1)[0]
        definition = f"{cls}.{key}: {java_type}" + (", required" if required else "")
        rows.append(_row(f"{place}.{key}", file, key, kind, definition, mapping))
    for item, file, evidence, rule in RULES:
        path = src / TEST_DIR / file
        if not path.is_file() or re.search(evidence, path.read_text(encoding="utf-8")) is None:
            raise ValueError(f"The harness rule {item!r} is no longer in ksqlDB's {TEST_DIR}/{file} "
                             f"(looked for /{evidence}/); read the runner again and update RULES.")
        rows.append(_row(item, f"{TEST_DIR}/{file}", None, "qtt", rule, mapping))
    readme, source = _readme(REST_README)
    for key, note in rest_keys(readme):
        rows.append(_row(f"rest: case.{key}", source, key.rsplit(".", 1)[-1], "rest", note, mapping))
    readme, source = _readme(PLANS_README)
    for item, key, holds in PLAN_FIELDS:
        if f"`{key}`" not in readme and f'"{key}"' not in readme and key not in readme:
            raise ValueError(f"The saved-plan field {key!r} is not named in {PLANS_README}; update PLAN_FIELDS.")
        rows.append(_row(item, source, key, "plan", holds, mapping))
    return rows
