"""``kspark cli`` as a terminal program against a real server on a real broker: the interactive
shell driven with pexpect in a pseudo-terminal, and ``--execute``/``--file`` as subprocesses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pexpect
import pytest

from engine.server.auth import BasicAuth
from engine.server.service import KsqlService
from tests.engine.server.serving import serving

pytestmark = [pytest.mark.long, pytest.mark.system]

CLI = [sys.executable, "-m", "engine.cli", "cli"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[>=]|\r")


@pytest.fixture(scope="module")
def live(kafka_broker, spark, tmp_path_factory) -> Iterator[tuple[str, KsqlService, str]]:
    """A service running queries behind a real uvicorn; its stream CLICKS holds ('a', 1) and ('b', 2)."""
    service = KsqlService(kafka_broker.bootstrap_servers, f"cli_{uuid.uuid4().hex[:8]}",
                          Path(tmp_path_factory.mktemp("cli")), command_timeout=60.0)
    service.start(timeout=120)
    topic = f"clicks_{service.service_id}"
    with serving(service) as url:
        with httpx.Client(base_url=url, timeout=120) as http:
            for statement in (f"CREATE STREAM CLICKS (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', "
                              "VALUE_FORMAT='JSON', PARTITIONS=1);",
                              "INSERT INTO CLICKS (ID, V) VALUES ('a', 1); INSERT INTO CLICKS (ID, V) VALUES ('b', 2);"):
                answer = http.post("/ksql", json={"ksql": statement})
                assert answer.status_code == 200, answer.text
        yield url, service, topic
    service.close()


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp_path), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm",
            "COLUMNS": "120", "LINES": "40"}


def _cli(*args: str, tmp_path: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=_env(tmp_path),
                          stdin=subprocess.DEVNULL)


class Terminal:
    """The CLI in a pseudo-terminal: type lines, wait for text on the screen (escapes removed)."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.child = pexpect.spawn(CLI[0], [*CLI[1:], url, "--history-file", str(tmp_path / "history")],
                                   env=_env(tmp_path), dimensions=(40, 120), encoding="utf-8", timeout=180)
        self.seen = ""

    def wait_for(self, text: str, timeout: float = 180) -> str:
        """Read until ``text`` shows; what came before it (from the last match on)."""
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not show; the screen had:\n{self.seen[-3000:]}")
            try:
                self.seen += ANSI.sub("", self.child.read_nonblocking(65536, timeout=1))
            except pexpect.TIMEOUT:
                continue
        before, _, self.seen = self.seen.partition(text)
        return before

    def prompt(self, timeout: float = 180) -> str:
        """Wait for the next prompt (the screen ends in it and stays quiet); what came before it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.seen += ANSI.sub("", self.child.read_nonblocking(65536, timeout=0.5))
                continue
            except pexpect.TIMEOUT:
                if self.seen.rstrip().endswith("ksql>"):
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"no prompt came; the screen had:\n{self.seen[-3000:]}")
        before = self.seen.rstrip()[:-len("ksql>")]
        self.seen = ""
        return before

    def type(self, text: str) -> None:
        self.child.send(text)

    def line(self, text: str) -> None:
        self.child.send(text + "\r")


def test_the_interactive_shell_against_a_live_server(live, tmp_path) -> None:
    url, service, topic = live
    term = Terminal(url, tmp_path)
    try:
        assert "Server Status: RUNNING" in term.prompt()
        # a statement over two lines: the first Enter only starts a new line
        term.line("CREATE STREAM TYPED (ID STRING KEY, V INT)")
        term.line(f"  WITH (KAFKA_TOPIC='typed_{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")
        assert "Stream created" in term.prompt()
        term.line("INSERT INTO TYPED (ID, V) VALUES ('x', 7); INSERT INTO TYPED (ID, V) VALUES ('y', 8);")
        term.prompt()
        term.line("SET 'auto.offset.reset' = 'earliest';")
        assert "Successfully changed local property 'auto.offset.reset' to 'earliest'." in term.prompt()

        # DEFINE, and the variable in a push query with LIMIT: every row, then the CLI's last lines
        term.line("DEFINE source = 'TYPED';")
        term.prompt()
        term.line("SHOW VARIABLES;")
        assert re.search(r"source\s+\|\s+TYPED", term.prompt())
        term.line("SELECT ID, V FROM ${source} EMIT CHANGES LIMIT 2;")
        shown = term.prompt()
        assert re.search(r"\|ID\s+\|V\s+\|", shown), shown
        assert re.search(r"\|x\s+\|7\s+\|", shown) and re.search(r"\|y\s+\|8\s+\|", shown), shown
        assert shown.index("Limit Reached") < shown.index("Query terminated")

        # TAB completes the stream's name; Ctrl-C ends a push query without LIMIT, the shell stays
        term.type("SELECT * FROM CLIC")
        term.type("\t")
        term.line(" WHERE V = 2 EMIT CHANGES;")  # its one row is the last one the server has sent
        term.wait_for("|b")
        assert len(service._push_queries) == 1
        term.child.sendintr()
        assert "Query terminated" in term.prompt()
        deadline = time.monotonic() + 3
        while service._push_queries and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not service._push_queries, "Ctrl-C left the push query open on the server"
        term.line("SHOW QUERIES;")
        assert "PUSH" not in term.prompt()

        term.line("DESCRIBE CLICKS;")
        shown = term.prompt()
        assert "Name                 : CLICKS" in shown and re.search(r"ID\s+\|\s+VARCHAR\(STRING\)|ID\s+\|\s+STRING", shown)
        term.line("SELECT * FROM NOPE EMIT CHANGES;")
        assert re.search(r"NOPE does not exist.*\(error 40001\)", term.prompt())
        term.line("help")
        assert "RUN SCRIPT".lower() in term.prompt().lower()
        term.line("history")
        assert "DEFINE source = 'TYPED';" in term.prompt()
        term.line("exit")
        term.child.expect(pexpect.EOF, timeout=30)
    finally:
        term.child.close(force=True)
    assert term.child.exitstatus == 0
    assert "DESCRIBE CLICKS;" in (tmp_path / "history").read_text()


def test_execute_and_file_run_statements_and_exit(live, tmp_path) -> None:
    url, service, topic = live
    ran = _cli(url, "--execute", "SHOW STREAMS; DESCRIBE CLICKS", tmp_path=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"CLICKS\s+\|\s+" + re.escape(topic), ran.stdout) and "Name                 : CLICKS" in ran.stdout
    assert ran.stdout.index("SHOW STREAMS;") < ran.stdout.index("DESCRIBE CLICKS;")  # each after its statement

    script = tmp_path / "script.sql"
    script.write_text("SET 'auto.offset.reset'='earliest';\n"
                      "-- a comment\n"
                      "SELECT V FROM ${source}\n  WHERE ID = '${key}' EMIT CHANGES LIMIT 1;\n"
                      "SPOOL '" + str(tmp_path / "spool.txt") + "'\n"
                      "SHOW VARIABLES;\n"
                      "SPOOL OFF\n")
    ran = _cli(url, "--file", str(script), "--define", "source=CLICKS", "--define", "key=b", tmp_path=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"\|2\s+\|", ran.stdout) and "Limit Reached" in ran.stdout, ran.stdout
    spooled = (tmp_path / "spool.txt").read_text()
    assert re.search(r"key\s+\|\s+b", spooled) and "Limit Reached" not in spooled

    ran = _cli(url, "--output", "json", "-e", "SHOW STREAMS;", tmp_path=tmp_path)
    assert ran.returncode == 0 and json.loads(ran.stdout)[0]["@type"] == "streams"


def test_a_pull_query_prints_as_a_table(live, tmp_path) -> None:
    url, _service, _topic = live
    with httpx.Client(base_url=url, timeout=120) as http:
        answer = http.post("/ksql", json={"ksql": "CREATE TABLE COUNTS_BY_ID AS SELECT ID, COUNT(*) AS N "
                                                   "FROM CLICKS GROUP BY ID;",
                                          "streamsProperties": {"auto.offset.reset": "earliest"}})
        assert answer.status_code == 200, answer.text
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until the table has caught up with CLICKS
            rows = http.post("/query", json={"ksql": "SELECT * FROM COUNTS_BY_ID WHERE ID = 'a';"}).json()
            if any("row" in m for m in rows):
                break
            time.sleep(1)
    ran = _cli(url, "-e", "SELECT * FROM COUNTS_BY_ID WHERE ID = 'a';", tmp_path=tmp_path)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert re.fullmatch(r"\|ID\s+\|N\s+\|", lines[1]) and re.fullmatch(r"\|a\s+\|1\s+\|", lines[3]), ran.stdout
    assert lines[0] == lines[2] == lines[4] and lines[5] == "Query terminated"

    described = _cli(url, "-e", "DESCRIBE COUNTS_BY_ID EXTENDED;", tmp_path=tmp_path)
    assert described.returncode == 0, described.stderr
    assert "Type                 : TABLE" in described.stdout and "Kafka topic          : " in described.stdout
    assert re.search(r"ID\s+\|\s+STRING\s+\(primary key\)", described.stdout), described.stdout
    [query_id] = re.findall(r"^(CTAS_COUNTS_BY_ID_\d+) \(RUNNING\) : CREATE TABLE", described.stdout, re.M)
    explained = _cli(url, "-e", f"EXPLAIN {query_id};", tmp_path=tmp_path)
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.startswith(f"\nID                   : {query_id}\nQuery Type           : PERSISTENT\n")
    assert "Sources that this query reads from: " in explained.stdout and "\nCLICKS\n" in explained.stdout
    assert "Execution plan" in explained.stdout


def test_errors_are_one_line_without_a_traceback_and_exit_non_zero(live, tmp_path) -> None:
    url, service, topic = live
    # on the stream's own topic: a topic that does not exist is refused first, as in ksqlDB
    bad = _cli(url, "-e", f"CREATE STREAM CLICKS (A INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON'); SHOW STREAMS;",
               tmp_path=tmp_path)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert re.fullmatch(r".*already exists.*\(error 40001\)\n", bad.stderr), bad.stderr
    assert "Stream Name" not in bad.stdout  # the statements after a failed one do not run

    gone = _cli("http://127.0.0.1:9", "-e", "SHOW STREAMS;", tmp_path=tmp_path)
    assert gone.returncode == 1 and gone.stdout == ""
    assert gone.stderr.startswith("kspark cli: Could not connect to the server at http://127.0.0.1:9")
    assert gone.stderr.count("\n") == 1

    missing = _cli(url, "--file", str(tmp_path / "none.sql"), tmp_path=tmp_path)
    assert missing.returncode == 1 and missing.stderr.startswith("kspark cli: Cannot read ")

    users = tmp_path / "users.txt"
    users.write_text("fred: letmein\n")
    with serving(service, auth=BasicAuth.from_file(users)) as secured:
        refused = _cli(secured, "-u", "fred", "-p", "wrong", "-e", "SHOW STREAMS;", tmp_path=tmp_path)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert refused.stderr == ("kspark cli: The server refused the credentials: Unauthorized "
                                  "(use --user and --password). (error 40100)\n")
        allowed = _cli(secured, "-u", "fred", "-p", "letmein", "-e", "SHOW STREAMS;", tmp_path=tmp_path)
        assert allowed.returncode == 0 and "CLICKS" in allowed.stdout, allowed.stderr
