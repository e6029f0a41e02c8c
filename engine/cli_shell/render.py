"""Entities and rows as ksqlDB's CLI prints them: tables with a dashed rule under the header,
``Name : value`` blocks for descriptions, push-query rows framed one by one, or JSON.

Every function returns text; the shell writes it (to the terminal and to a spool file).
"""

from __future__ import annotations

import io
import json
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from rich.box import Box
from rich.console import Console
from rich.table import Table

# A blank first line, the header, a dashed rule, the rows, a closing dashed rule: ksqlDB's Table.
KSQL_BOX = Box("    \n || \n----\n || \n----\n----\n || \n----\n", ascii=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, width: int = 120,
          footer: str | None = None, header_line: str | None = None) -> str:
    """A table as ksqlDB's CLI draws it."""
    grid = Table(box=KSQL_BOX, show_edge=True, padding=(0, 1), pad_edge=False)
    for header in headers:
        grid.add_column(header, overflow="fold")
    for row in rows:
        grid.add_row(*("" if cell is None else str(cell) for cell in row))
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, highlight=False, emoji=False, markup=False,
            soft_wrap=False).print(grid)
    text = "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"
    if header_line:
        text = header_line + "\n" + text.lstrip("\n")
    return text + (footer + "\n" if footer else "")


def entities(items: Sequence[dict[str, Any]], *, output: str = "TABULAR", width: int = 120) -> str:
    """``/ksql``'s entities: each one printed, after its statement when there are several."""
    if output == "JSON":
        return json.dumps(list(items), indent=2) + "\n"
    parts: list[str] = []
    for entity in items:  # each after a blank line (and its statement, when there are several)
        parts.append("\n" + (str(entity.get("statementText", "")) + "\n" if len(items) > 1 else ""))
        parts.append(entity_text(entity, width=width).lstrip("\n"))
        parts.extend(f"WARNING: {w.get('message', w)}\n" for w in entity.get("warnings") or ())
    return "".join(parts)


def entity_text(entity: dict[str, Any], *, width: int = 120) -> str:
    """One entity, as its kind of ksqlDB table or description."""
    kind = entity.get("@type", "")
    printer = _PRINTERS.get(kind)
    if printer is None:
        return json.dumps(entity, indent=2) + "\n"
    return printer(entity, width)


def _message(text: str, width: int) -> str:
    return table(["Message"], [[text]], width=width)


def _current_status(e: dict[str, Any], width: int) -> str:
    return _message(str(e["commandStatus"]["message"]).split("\n", 1)[0], width)


def _sources(kind: str) -> Callable[[dict[str, Any], int], str]:
    heading = "Stream Name" if kind == "streams" else "Table Name"

    def printer(e: dict[str, Any], width: int) -> str:
        rows = [[s["name"], s["topic"], s.get("keyFormat", ""), s.get("valueFormat", ""),
                 str(bool(s.get("isWindowed"))).lower()] for s in e[kind]]
        return table([heading, "Kafka Topic", "Key Format", "Value Format", "Windowed"], rows, width=width)

    return printer


def _status_count(counts: dict[str, int]) -> str:
    return ",".join(f"{state}:{count}" for state, count in counts.items())


def _queries(e: dict[str, Any], width: int) -> str:
    rows = [[q["id"], q.get("queryType", ""), _status_count(q.get("statusCount") or {}),
             ",".join(q.get("sinks") or ()), ",".join(q.get("sinkKafkaTopics") or ()),
             " ".join(str(q.get("queryString", "")).split())] for q in e["queries"]]
    return table(["Query ID", "Query Type", "Status", "Sink Name", "Sink Kafka Topic", "Query String"], rows,
                 width=width, footer="For detailed information on a Query run: EXPLAIN <Query ID>;")


def _topics(e: dict[str, Any], width: int) -> str:
    rows = [[t["name"], len(t["replicaInfo"]), ", ".join(str(r) for r in t["replicaInfo"]) or "0"]
            for t in e["topics"]]
    return table(["Kafka Topic", "Partitions", "Partition Replicas"], rows, width=width)


def _topics_extended(e: dict[str, Any], width: int) -> str:
    rows = [[t["name"], len(t["replicaInfo"]), ", ".join(str(r) for r in t["replicaInfo"]) or "0",
             t.get("consumerCount", 0), t.get("consumerGroupCount", 0)] for t in e["topics"]]
    return table(["Kafka Topic", "Partitions", "Partition Replicas", "Consumers", "ConsumerGroups"], rows,
                 width=width)


def _properties(e: dict[str, Any], width: int) -> str:
    overwritten = set(e.get("overwrittenProperties") or ())
    defaults = set(e.get("defaultProperties") or ())
    rows = []
    for p in sorted(e["properties"], key=lambda p: p["name"]):
        override = "SESSION" if p["name"] in overwritten else "" if p["name"] in defaults else "SERVER"
        rows.append([p["name"], p.get("scope", ""), override, "NULL" if p.get("value") is None else p["value"]])
    return table(["Property", "Scope", "Default override", "Effective Value"], rows, width=width)


def _functions(e: dict[str, Any], width: int) -> str:
    functions = sorted(e["functions"], key=lambda f: (f.get("category", ""), f["name"]))
    rows: list[list[str]] = []
    previous = functions[0].get("category", "") if functions else ""
    for f in functions:
        if f.get("category", "") != previous:
            rows.append([" ", " "])
        rows.append([f["name"], f.get("category", "")])
        previous = f.get("category", "")
    return table(["Function Name", "Category"], rows, width=width,
                 footer="For detailed information about a function, run: DESCRIBE FUNCTION <Function Name>;")


def variables(e: dict[str, Any], width: int = 120) -> str:
    """``variables``: SHOW VARIABLES."""
    return table(["Variable Name", "Value"], [[v["name"], v["value"]] for v in e["variables"]], width=width)


def _types(e: dict[str, Any], width: int) -> str:
    return table(["Type Name", "Schema"], [[name, type_string(s)] for name, s in e["types"].items()], width=width)


def type_string(schema: dict[str, Any]) -> str:
    """A ``SchemaInfo`` as SQL type text (``ARRAY<INTEGER>``, ``STRUCT<`A` STRING>``, ``DECIMAL(4, 2)``)."""
    kind = schema.get("type", "")
    if kind == "STRUCT":
        fields = ", ".join(f"`{f['name']}` {type_string(f['schema'])}" for f in schema.get("fields") or ())
        return f"STRUCT<{fields}>"
    if kind == "ARRAY":
        return f"ARRAY<{type_string(schema['memberSchema'])}>"
    if kind == "MAP":
        return f"MAP<STRING, {type_string(schema['memberSchema'])}>"
    if kind == "DECIMAL" and schema.get("parameters"):
        p = schema["parameters"]
        return f"DECIMAL({p.get('precision')}, {p.get('scale')})"
    return kind


def _field_type(f: dict[str, Any], window: str | None, is_table: bool) -> str:
    text = type_string(f["schema"])
    if f.get("type") == "HEADER":
        header = f"(header('{f['headerKey']}'))" if f.get("headerKey") else "(headers)"
        return f"{text:<16} {header}"
    if f.get("type") == "KEY":
        suffix = f" (Window type: {window})" if window else ""
        return f"{text:<16} {'(primary key)' if is_table else '(key)'}{suffix}"
    return text


def _schema(fields: Sequence[dict[str, Any]], window: str | None, is_table: bool, width: int) -> str:
    if not fields:
        return ""
    return table(["Field", "Type"], [[f["name"], _field_type(f, window, is_table)] for f in fields], width=width)


def _line(label: str, value: Any) -> str:
    return f"{label:<20} : {value}\n"


def _query_lines(queries: Sequence[dict[str, Any]], kind: str, operation: str) -> str:
    if not queries:
        return ""
    text = f"\n{'Queries that ' + operation + ' from this ' + kind:<20}\n{'-' * 35}\n"
    for q in queries:
        text += f"{q['id']} ({q.get('state') or 'N/A'}) : {' '.join(str(q.get('queryString', '')).split())}\n"
    return text + "\nFor query topology and execution plan please run: EXPLAIN <QueryId>\n"


def source_description(s: dict[str, Any], width: int = 120) -> str:
    """DESCRIBE source [EXTENDED]."""
    is_table = str(s.get("type", "")).upper() == "TABLE"
    text = _line("Name", s["name"])
    if not s.get("extended"):
        return (text + _schema(s.get("fields") or (), s.get("windowType"), is_table, width)
                + "For runtime statistics and query details run: DESCRIBE <Stream,Table> EXTENDED;\n")
    text += _line("Type", s.get("type"))
    text += _line("Timestamp field", s.get("timestamp") or "Not set - using <ROWTIME>")
    text += _line("Key format", s.get("keyFormat")) + _line("Value format", s.get("valueFormat"))
    if s.get("topic"):
        topic = f"{'Kafka topic':<20} : {s['topic']}"
        if s.get("partitions"):
            topic += f" (partitions: {s['partitions']}, replication: {s.get('replication', 0)})"
        text += topic + "\n"
    text += _line("Statement", s.get("statement", "")) + "\n"
    text += _schema(s.get("fields") or (), s.get("windowType"), is_table, width)
    kind = s.get("type", "")
    text += _query_lines(s.get("readQueries") or (), kind, "read")
    text += _query_lines(s.get("writeQueries") or (), kind, "write")
    stats, errors = s.get("clusterStatistics") or [], s.get("clusterErrorStats") or []
    if not stats and not errors:
        text += f"\n{'Local runtime statistics':<20}\n{'-' * 24}\n{s.get('statistics', '')}\n{s.get('errorStats', '')}\n"
    else:
        rows = [[m.get("host", ""), m["name"], f"{float(m['value']):10.0f}", m.get("timestamp", "")]
                for m in sorted(stats + errors, key=lambda m: (str(m.get("host", "")), m["name"]))]
        text += f"\n{'Runtime statistics by host':<20}\n{'-' * 25}\n"
        text += table(["Host", "Metric", "Value", "Last Message"], rows, width=width)
    return text


def query_description(q: dict[str, Any], width: int = 120) -> str:
    """EXPLAIN: a query's id, type, SQL, schema, sources, sinks and plan."""
    text = _line("ID", q["id"]) + _line("Query Type", q.get("queryType"))
    if q.get("statementText"):
        text += _line("SQL", q["statementText"])
    if q.get("ksqlHostQueryStatus"):
        statuses = ", ".join(f"{host}={state}" for host, state in q["ksqlHostQueryStatus"].items())
        text += _line("Host Query Status", "{" + statuses + "}")
    text += "\n" + _schema(q.get("fields") or (), q.get("windowType"), False, width)
    if q.get("sources"):
        text += f"\n{'Sources that this query reads from: ':<20}\n{'-' * 35}\n" + "".join(f"{s}\n" for s in q["sources"])
        text += "\nFor source description please run: DESCRIBE [EXTENDED] <SourceId>\n"
    if q.get("sinks"):
        text += f"\n{'Sinks that this query writes to: ':<20}\n{'-' * 35}\n" + "".join(f"{s}\n" for s in q["sinks"])
        text += "\nFor sink description please run: DESCRIBE [EXTENDED] <SinkId>\n"
    if q.get("executionPlan"):
        text += f"\n{'Execution plan':<20}\n{'-' * 14:<20}\n{q['executionPlan']}\n"
    if q.get("topology"):
        text += f"\n{'Processing topology':<20}\n{'-' * 19:<20}\n{q['topology']}\n"
    overridden = q.get("overriddenProperties") or {}
    if overridden:
        text += table(["Property", "Value"], sorted([k, str(v)] for k, v in overridden.items()), width=width,
                      header_line=f"\n{'Overridden Properties':<20}\n{'-' * 21:<20}")
    return text


def _describe_function(e: dict[str, Any], width: int) -> str:
    text = _line("Name", e["name"])
    if e.get("author"):
        text += _line("Author", e["author"])
    if e.get("version"):
        text += _line("Version", e["version"])
    text += _wrapped("Overview", e.get("description", ""), width)
    text += _line("Type", e.get("type")) + _line("Jar", e.get("path")) + _line("Variations", "")
    for variation in e.get("functions") or ():
        arguments = ", ".join(f"{a['name']} {a['type']}".strip() for a in variation.get("arguments") or ())
        text += f"\n\t{'Variation':<12}: {e['name']}({arguments})\n\t{'Returns':<12}: {variation.get('returnType')}\n"
        if variation.get("description"):
            text += f"\t{'Description':<12}: {variation['description']}\n"
    return text


def _wrapped(label: str, description: str, width: int) -> str:
    if not description:
        return ""
    indent = " " * 23
    lines = textwrap.wrap(description, max(20, width - len(indent))) or [""]
    return f"{label:<20} : " + ("\n" + indent).join(lines) + "\n"


_PRINTERS: dict[str, Callable[[dict[str, Any], int], str]] = {
    "currentStatus": _current_status,
    "streams": _sources("streams"),
    "tables": _sources("tables"),
    "queries": _queries,
    "kafka_topics": _topics,
    "kafka_topics_extended": _topics_extended,
    "properties": _properties,
    "function_names": _functions,
    "variables": variables,
    "type_list": _types,
    "warning_entity": lambda e, width: _message(e["message"], width),
    "terminate_query": lambda e, width: _message(f'Terminated query "{e["queryId"]}"', width),
    "sourceDescription": lambda e, width: source_description(e["sourceDescription"], width),
    "source_descriptions": lambda e, width: "".join(source_description(s, width) + "\n"
                                                    for s in e["sourceDescriptions"]),
    "queryDescription": lambda e, width: query_description(e["queryDescription"], width),
    "query_descriptions": lambda e, width: "".join(query_description(q, width) + "\n"
                                                   for q in e["queryDescriptions"]),
    "describe_function": _describe_function,
    "assert_topic": lambda e, width: f"Topic {e['topicName']} {'exists' if e.get('exists') else 'does not exist'}.\n",
    "assert_schema": lambda e, width: _assert_schema(e),
}


def _assert_schema(e: dict[str, Any]) -> str:
    subject = f" subject {e['subject']}" if e.get("subject") else ""
    schema_id = f" id {e['id']}" if e.get("id") is not None else ""
    return f"Schema with{subject}{schema_id} {'exists' if e.get('exists') else 'does not exist'}.\n"


# ------------------------------------------------------------------------- query rows


class RowFormat:
    """A query's rows framed as ksqlDB's CLI frames them, one ``|cell |cell |`` line a row:
    columns share the terminal's width, a value too long for its column wraps."""

    def __init__(self, columns: Sequence[str], width: int) -> None:
        self.columns = list(columns)
        count = max(1, len(self.columns))
        self.column_width = max(4, (width - count - 1) // count)

    def rule(self) -> str:
        return "+" + "+".join("-" * self.column_width for _ in self.columns) + "+\n"

    def header(self) -> str:
        return self.rule() + self._line(self.columns) + self.rule()

    def row(self, values: Sequence[Any], tombstone: bool = False) -> str:
        cells = ["<TOMBSTONE>" if tombstone and v is None else cell_text(v) for v in values]
        return self._line(cells)

    def _line(self, cells: Sequence[str]) -> str:
        w = self.column_width
        wrapped = [[cell[i:i + w] for i in range(0, len(cell), w)] or [""] for cell in cells]
        height = max((len(c) for c in wrapped), default=1)
        return "".join("|" + "|".join(f"{(c[i] if i < len(c) else ''):<{w}}" for c in wrapped) + "|\n"
                       for i in range(height))


def cell_text(value: Any) -> str:
    """A value in a query row: JSON for structures, ``null`` for NULL, text as it is."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)
