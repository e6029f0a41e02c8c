"""A CLI session: its properties, variables, output format and spool, what runs each line, and
the interactive loop (prompt_toolkit: history, multi-line statements ended by ``;``,
completion of keywords and of the server's streams, tables, queries and functions).

Statements go to the server as ksqlDB's CLI sends them: consecutive ones in one ``/ksql``
request, a SELECT or PRINT on ``/query`` read as it streams (Ctrl-C closes the query on the
server and the shell goes on); SET/UNSET and DEFINE/UNDEFINE change the session, whose
properties and variables go with every request (``streamsProperties``, ``sessionVariables``).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from prompt_toolkit.completion import Completer, Completion

from engine.cli_shell import render
from engine.cli_shell.client import KsqlClient, ShellError
from engine.cli_shell.statements import (
    LocalCommand,
    Statement,
    classify,
    is_complete,
    local_command,
    split_statements,
    substitute,
)

OUTPUT_FORMATS = ("JSON", "TABULAR")
HISTORY_FILE = Path("~/.kspark/cli_history")

HELP = """
Description:
    The kspark CLI: statements run on the kspark server it connects to, as in ksqlDB's CLI.
    A statement ends with a semicolon and may span lines; several may share a line.

CLI commands (one a line, the semicolon optional):
    help                    this text
    history                 the statements typed before, numbered
    output [JSON|TABULAR]   show, or set, how results are printed
    run script 'FILE'       run the statements of FILE
    spool FILE | spool off  copy what is typed and printed to FILE, or stop
    version                 the CLI's version
    clear                   clear the screen
    exit                    leave the CLI (Ctrl-D too)

Statements the CLI keeps for its session (sent with every request):
    SET 'property' = 'value';   UNSET 'property';
    DEFINE name = 'value';      UNDEFINE name;      SHOW VARIABLES;

Every other statement runs on the server: CREATE, INSERT, SHOW/LIST, DESCRIBE [EXTENDED],
EXPLAIN, TERMINATE, DROP, pull queries, and push queries (SELECT ... EMIT CHANGES), whose rows
print as they arrive until their LIMIT or Ctrl-C.
"""

KEYWORDS = (
    "SELECT", "FROM", "WHERE", "GROUP", "BY", "HAVING", "EMIT", "CHANGES", "FINAL", "LIMIT", "WINDOW",
    "TUMBLING", "HOPPING", "SESSION", "SIZE", "ADVANCE", "GRACE", "PERIOD", "RETENTION", "JOIN", "LEFT",
    "RIGHT", "FULL", "OUTER", "INNER", "ON", "WITHIN", "PARTITION", "AS", "AND", "OR", "NOT", "NULL",
    "IS", "IN", "BETWEEN", "LIKE", "CASE", "WHEN", "THEN", "ELSE", "END", "CAST", "CREATE", "OR REPLACE",
    "STREAM", "STREAMS", "TABLE", "TABLES", "SOURCE", "TYPE", "TYPES", "WITH", "KEY", "PRIMARY",
    "HEADERS", "HEADER", "INSERT", "INTO", "VALUES", "DROP", "DELETE", "TOPIC", "TOPICS", "IF", "EXISTS",
    "TERMINATE", "ALL", "SHOW", "LIST", "DESCRIBE", "EXTENDED", "EXPLAIN", "QUERIES", "FUNCTIONS",
    "FUNCTION", "PROPERTIES", "VARIABLES", "PRINT", "BEGINNING", "INTERVAL", "SET", "UNSET", "DEFINE",
    "UNDEFINE", "ASSERT", "SCHEMA", "TIMEOUT", "ALTER", "ADD", "COLUMN", "STRUCT", "ARRAY", "MAP",
    "BOOLEAN", "INT", "INTEGER", "BIGINT", "DOUBLE", "DECIMAL", "STRING", "VARCHAR", "BYTES", "DATE",
    "TIME", "TIMESTAMP", "KAFKA_TOPIC", "VALUE_FORMAT", "KEY_FORMAT", "FORMAT", "PARTITIONS",
    "REPLICAS", "TIMESTAMP_FORMAT", "WRAP_SINGLE_VALUE", "ROWTIME", "ROWPARTITION", "ROWOFFSET",
    "WINDOWSTART", "WINDOWEND", "help", "history", "output", "run script", "spool", "version", "exit",
)


class Shell:
    """One CLI session against one server."""

    def __init__(self, client: KsqlClient, *, output: str = "TABULAR", variables: dict[str, str] | None = None,
                 properties: dict[str, str] | None = None, out: IO[str] | None = None,
                 err: IO[str] | None = None, width: int | None = None, stop_on_error: bool = False) -> None:
        self.client = client
        self.output = output.upper()
        self.variables: dict[str, str] = dict(variables or {})
        self.properties: dict[str, str] = dict(properties or {})
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._width = width
        self.stop_on_error = stop_on_error
        self.failed = False
        self.spool: IO[str] | None = None
        self.spool_path: Path | None = None
        self.history: list[str] = []
        self.names: set[str] = set()  # the server's sources, queries and functions, for completion

    # ------------------------------------------------------------------ output

    @property
    def width(self) -> int:
        return self._width or shutil.get_terminal_size((120, 40)).columns

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        if self.spool is not None:
            self.spool.write(text)
            self.spool.flush()

    def error(self, text: str) -> None:
        self.failed = True
        self.err.write(text.rstrip("\n") + "\n")
        self.err.flush()
        if self.spool is not None:
            self.spool.write(text.rstrip("\n") + "\n")

    # ------------------------------------------------------------------ running text

    def run_text(self, text: str, *, lenient_end: bool = False) -> bool:
        """Run what one prompt (or a script) holds; False once ``exit`` ran or (with
        ``stop_on_error``) a statement failed."""
        command = local_command(text)
        if command is not None:
            return self.run_local(command)
        split = split_statements(text)
        statements = list(split.statements)
        if split.rest:
            if not lenient_end:
                self.error(f"The statement is not ended by a semicolon: {split.rest.strip()}")
                return not self.stop_on_error
            statements.append(split.rest.strip() + ";")
        return self.run_statements(statements)

    def run_lines(self, lines: Iterable[str]) -> bool:
        """A script's lines: CLI commands on lines of their own, statements across lines."""
        buffer = ""
        for line in lines:
            if not buffer.strip() and local_command(line) is not None:
                if not self.run_local(local_command(line)):  # type: ignore[arg-type]
                    return False
                continue
            buffer += line if line.endswith("\n") else line + "\n"
            split = split_statements(buffer)
            if split.statements and not split.rest:
                if not self.run_statements(list(split.statements)):
                    return False
                buffer = ""
        if buffer.strip():
            return self.run_text(buffer, lenient_end=True)
        return True

    def run_statements(self, statements: list[str]) -> bool:
        """Run statements in order: runs of server statements in one ``/ksql`` request each."""
        pending: list[str] = []

        def flush() -> bool:
            if not pending:
                return True
            text = "\n".join(pending)
            pending.clear()
            return self._guarded(self._server, text)

        for text in statements:
            statement = classify(substitute(text, self.variables))
            statement = Statement(text, statement.kind, statement.name, statement.value, statement.push)
            if statement.kind == "server":
                pending.append(text)
                continue
            if not flush():
                return False
            if not self._guarded(self._local_statement, statement):
                return False
        return flush()

    def _guarded(self, action: Any, argument: Any) -> bool:
        try:
            action(argument)
        except ShellError as exc:
            for entity in exc.entities:
                self.write(render.entities([entity], output=self.output, width=self.width))
            self.error(exc.line())
            return not self.stop_on_error
        return True

    def _server(self, text: str) -> None:
        entities = self.client.ksql(text, self.properties, self.variables)
        for entity in entities:  # a statement the server accepted but failed to execute
            status = entity.get("commandStatus") if entity.get("@type") == "currentStatus" else None
            if status is not None and status.get("status") == "ERROR":
                raise ShellError(str(status.get("message", "")).split("\n", 1)[0])
        self.write(render.entities(entities, output=self.output, width=self.width))
        self.refresh_names()

    def _local_statement(self, statement: Statement) -> None:
        kind = statement.kind
        if kind == "set":
            assert statement.name is not None and statement.value is not None
            self.client.is_valid_property(statement.name)
            prior = self.properties.get(statement.name)
            self.properties[statement.name] = statement.value
            before = f" from '{prior}'" if prior is not None else ""
            hint = " Use the UNSET command to revert your change." if prior is None else ""
            self.write(f"Successfully changed local property '{statement.name}'{before} to '{statement.value}'.{hint}\n")
        elif kind == "unset":
            assert statement.name is not None
            if statement.name not in self.properties:
                raise ShellError(f"Cannot unset local property '{statement.name}' which was never set in the "
                                 "first place")
            old = self.properties.pop(statement.name)
            self.write(f"Successfully unset local property '{statement.name}' (value was '{old}').\n")
        elif kind == "define":
            assert statement.name is not None and statement.value is not None
            self.variables[statement.name] = statement.value
        elif kind == "undefine":
            if self.variables.pop(statement.name or "", None) is None:
                self.write(f"Cannot undefine variable '{statement.name}' which was never defined.\n")
        elif kind == "variables":
            entity = {"@type": "variables", "statementText": statement.text, "warnings": [],
                      "variables": [{"name": k, "value": v} for k, v in self.variables.items()]}
            self.write(render.entities([entity], output=self.output, width=self.width))
        else:
            self._query(statement)

    def _query(self, statement: Statement) -> None:
        """A SELECT or PRINT on ``/query``, printed as it streams; Ctrl-C closes it."""
        with self.client.query(statement.text, self.properties, self.variables,
                               text_lines=statement.kind == "print") as stream:
            if statement.kind == "print":
                try:
                    for message in stream.messages():
                        self.write(message.get("text", json.dumps(message)).rstrip("\n") + "\n")
                except KeyboardInterrupt:
                    pass
                self.write("Topic printing ceased\n")
                return
            rows = RowPrinter(self, stream.columns, stream.query_id)
            try:
                for message in stream.messages():
                    rows.message(message)
                if not statement.push:
                    rows.close()
            except KeyboardInterrupt:
                if stream.query_id:
                    self.client.close_query(stream.query_id)
            finally:
                self.write("Query terminated\n")

    # ------------------------------------------------------------------ CLI commands

    def run_local(self, command: LocalCommand) -> bool:
        name, argument = command.name, command.argument
        if name == "exit":
            return False
        if name == "help":
            self.write(HELP)
        elif name == "history":
            self.write("".join(f"{i:>4}: {' '.join(line.split())}\n" for i, line in enumerate(self.history, 1)))
        elif name == "version":
            from engine import __version__

            self.write(f"Version: {__version__}\n")
        elif name == "clear":
            self.out.write("\x1b[2J\x1b[H")
            self.out.flush()
        elif name == "output":
            self._output(argument)
        elif name == "spool":
            self._spool(argument)
        elif name == "run_script":
            return self.run_script(argument or "")
        return True

    def _output(self, argument: str | None) -> None:
        if argument is None:
            self.write(f"Output format: {self.output}\n")
        elif argument.upper() in OUTPUT_FORMATS:
            self.output = argument.upper()
            self.write(f"Output format set to {self.output}\n")
        else:
            self.write(f"Invalid output format: '{argument}' (valid formats: {', '.join(OUTPUT_FORMATS)})\n")

    def _spool(self, argument: str | None) -> None:
        if argument is None:
            state = f"ON (to {self.spool_path})" if self.spool_path else "OFF"
            self.write(f"Spool is {state}\n")
            return
        if argument.upper() == "OFF":
            if self.spool is None:
                self.write("Spool is not on.\n")
                return
            self.spool.close()
            self.spool = None
            self.write(f"Spool written to {self.spool_path}\n")
            self.spool_path = None
            return
        if self.spool is not None:
            self.error(f"Spool is already on, to {self.spool_path}; SPOOL OFF first.")
            return
        path = Path(argument).expanduser().absolute()
        try:
            self.spool = path.open("a", encoding="utf-8")
        except OSError as exc:
            self.error(f"Cannot spool to {path}: {exc.strerror}.")
            return
        self.spool_path = path
        self.write(f"Session will be spooled to {path}\nEnter SPOOL OFF to disable\n")

    def run_script(self, path: str) -> bool:
        """RUN SCRIPT 'path': the file's statements, as if typed."""
        try:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            self.error(f"Cannot run script {path}: {exc.strerror or exc}.")
            return not self.stop_on_error
        return self.run_lines(text.splitlines(keepends=True))

    def typed(self, text: str) -> None:
        """What the user typed: kept for ``history`` and copied to the spool."""
        self.history.append(text.strip())
        if self.spool is not None:
            self.spool.write(f"ksql> {text.strip()}\n")

    # ------------------------------------------------------------------ completion names

    def refresh_names(self) -> None:
        """The server's streams, tables, queries and functions, for completion (silent on failure)."""
        try:
            entities = self.client.ksql("SHOW STREAMS; SHOW TABLES; SHOW QUERIES; SHOW FUNCTIONS;", {}, {})
        except ShellError:
            return
        names: set[str] = set()
        for entity in entities:
            for key, field in (("streams", "name"), ("tables", "name"), ("queries", "id"), ("functions", "name")):
                names.update(str(item[field]) for item in entity.get(key) or () if field in item)
        self.names = names


class RowPrinter:
    """A query's header and rows, printed as they arrive (tabular or JSON)."""

    def __init__(self, shell: Shell, columns: list[str], query_id: str | None) -> None:
        self.shell = shell
        self.format = render.RowFormat(columns, shell.width)
        if shell.output == "JSON":
            shell.write(json.dumps({"header": {"queryId": query_id, "columns": columns}}) + "\n")
        else:
            shell.write(self.format.header())

    def message(self, message: dict[str, Any]) -> None:
        shell = self.shell
        if "row" in message:
            row = message["row"]
            if shell.output == "JSON":
                shell.write(json.dumps(row.get("columns")) + "\n")
            else:
                shell.write(self.format.row(row.get("columns") or [], bool(row.get("tombstone"))))
        elif "finalMessage" in message:
            shell.write(str(message["finalMessage"]) + "\n")
        elif "errorMessage" in message:
            error = message["errorMessage"] or {}
            raise ShellError(str(error.get("message", error)), code=error.get("error_code"))

    def close(self) -> None:
        if self.shell.output != "JSON":
            self.shell.write(self.format.rule())


# ---------------------------------------------------------------------------- interactive


def interactive(shell: Shell, history_file: Path | None) -> int:
    """The prompt loop, until ``exit`` or Ctrl-D; 0."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings

    history: Any = InMemoryHistory()
    if history_file is not None:
        try:
            history_file.parent.mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(history_file))
        except OSError as exc:
            shell.error(f"History is not kept: {history_file}: {exc.strerror}.")
    shell.history = list(reversed(list(history.load_history_strings())))

    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event: Any) -> None:
        buffer = event.current_buffer
        if not buffer.text.strip() or is_complete(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    session: PromptSession[str] = PromptSession(
        history=history, completer=NameCompleter(shell), complete_while_typing=False, multiline=True,
        key_bindings=bindings, prompt_continuation=lambda width, line, wrap: ">".ljust(width),
        enable_history_search=False,
    )
    shell.refresh_names()
    while True:
        try:
            text = session.prompt("ksql> ")
        except KeyboardInterrupt:
            shell.write("^C\n")
            continue
        except EOFError:
            break
        if not text.strip():
            continue
        shell.typed(text)
        try:
            if not shell.run_text(text):
                break
        except KeyboardInterrupt:
            shell.write("^C\n")
    shell.write("Exiting kspark CLI.\n")
    return 0


class NameCompleter(Completer):
    """Completes the word at the cursor with keywords and the server's names."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    def get_completions(self, document: Any, complete_event: Any) -> Iterator[Completion]:
        word = document.get_word_before_cursor(pattern=_WORD)
        if not word:
            return
        prefix = word.lstrip("`").upper()
        candidates = sorted(self.shell.names) + [k for k in KEYWORDS if k.upper() not in self.shell.names]
        for candidate in candidates:
            if candidate.upper().startswith(prefix) and candidate.upper() != prefix:
                yield Completion(candidate, start_position=-len(word))


_WORD = re.compile(r"[`A-Za-z0-9_]+")


def banner(shell: Shell, info: dict[str, Any]) -> str:
    """What the CLI prints as it starts: versions, the server's URL and status, the help hint."""
    from engine import __version__

    return (f"\nCLI v{__version__}, Server v{info.get('version', '<unknown>')} located at {shell.client.url}\n"
            f"Server Status: {info.get('serverStatus', '<unknown>')}\n\n"
            "Having trouble? Type 'help' (case-insensitive) for a rundown of how things work!\n\n")
