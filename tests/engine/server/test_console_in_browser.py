"""The browser console of a real server on a real broker, in headless Chromium (``nox -s docs``).

Through the page's own editor: a CREATE STREAM and a CREATE STREAM AS SELECT, which the lists
and the topology then show; the query's steps with their versions on a click; a push query
whose rows appear as INSERT VALUES (run through the editor too) go through the persistent
query; its stop button closes it on the server; a failing statement shows ksqlDB's error code
and message. The server has basic authentication: the page is opened with credentials, as the
browser's prompt would give them. ``KSPARK_CONSOLE_SCREENSHOT`` names where the screenshot of
the page goes (default: the test's temporary folder).
"""

from __future__ import annotations

import base64
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.server.auth import BasicAuth
from engine.server.service import KsqlService
from tests.chromium import headless_chromium
from tests.engine.server.serving import serving

pytestmark = pytest.mark.docs
USER, PASSWORD = "fred", "letmein"
WAIT = 150.0  # a query's first batch waits for Spark's executors on a loaded machine


@pytest.fixture(scope="module")
def console_server(kafka_broker, spark, tmp_path_factory) -> Iterator[tuple[str, KsqlService]]:
    """A service behind a real uvicorn with basic authentication."""
    directory = Path(tmp_path_factory.mktemp("console"))
    (directory / "users.properties").write_text(f"{USER}: {PASSWORD}\n", encoding="utf-8")
    service = KsqlService(kafka_broker.bootstrap_servers, f"console_{uuid.uuid4().hex[:8]}", directory / "state",
                          command_timeout=60.0)
    service.start(timeout=120)
    with serving(service, BasicAuth.from_file(directory / "users.properties")) as url:
        yield url, service
    service.close()


def _until(browser: Any, condition: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """The first truthy value of ``condition`` (asked every 0.25 s), or a failure naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = condition()
        except Exception:  # noqa: BLE001 - an element replaced while being read: ask again
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            status = browser.find_element("id", "refresh-status").text
            pytest.fail(f"{what}: not seen within {timeout:g} s (refresh status: {status!r})")
        time.sleep(0.25)


def _click(browser: Any, selector: str) -> None:
    """Click ``selector``'s element, found again if a refresh redrew it meanwhile."""
    def click() -> bool:
        browser.find_element("css selector", selector).click()
        return True

    _until(browser, click, f"a click on {selector}", timeout=15)


def _texts(browser: Any, selector: str) -> list[str]:
    return [element.text for element in browser.find_elements("css selector", selector)]


def _run(browser: Any, statement: str, *, offset: str = "latest") -> None:
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "offset-reset")).select_by_value(offset)
    editor = browser.find_element("id", "statement")
    editor.clear()
    editor.send_keys(statement)
    browser.find_element("id", "run").click()


def _table_rows(browser: Any, container: str) -> list[list[str]]:
    rows = browser.find_elements("css selector", f"#{container} tbody tr")
    return [[cell.text for cell in row.find_elements("css selector", "td")] for row in rows]


def test_the_console_runs_statements_shows_sources_queries_topology_steps_and_push_rows(
        console_server, tmp_path) -> None:
    url, service = console_server
    suffix = uuid.uuid4().hex[:6]
    host = url.removeprefix("http://")
    credentials = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    api = httpx.Client(base_url=url, headers={"authorization": credentials}, timeout=120)
    screenshot = Path(os.environ.get("KSPARK_CONSOLE_SCREENSHOT", tmp_path / "console.png"))
    with headless_chromium(1500, 1250) as browser:
        browser.get(f"http://{USER}:{PASSWORD}@{host}/console")
        _until(browser, lambda: browser.find_element("id", "refresh-status").text.startswith("Updated"),
               "the first refresh of the lists")

        _run(browser, f"CREATE STREAM CONSOLE_ORDERS (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='console_orders_{suffix}', "
                      "VALUE_FORMAT='JSON', PARTITIONS=1);")
        _until(browser, lambda: "Stream created" in " ".join(_texts(browser, "#response .entity")), "CREATE STREAM's answer")
        _run(browser, f"CREATE STREAM CONSOLE_LARGE WITH (KAFKA_TOPIC='console_large_{suffix}') AS "
                      "SELECT ID, V FROM CONSOLE_ORDERS WHERE V > 2;", offset="earliest")
        _until(browser, lambda: "Created query" in " ".join(_texts(browser, "#response .entity")), "the CSAS's answer")
        [query] = [info for info in service.query_infos() if info.sink == "CONSOLE_LARGE"]

        # The lists and the graph, refreshed from the server.
        _until(browser, lambda: {"CONSOLE_ORDERS", "CONSOLE_LARGE"} <= {row[0] for row in _table_rows(browser, "sources")},
               "both streams in the sources list")
        _until(browser, lambda: [r for r in _table_rows(browser, "queries") if r[:3] == [query.query_id, "PERSISTENT", "RUNNING"]],
               "the CSAS's query RUNNING in the queries list")
        sources = {row[0]: row for row in _table_rows(browser, "sources")}
        assert sources["CONSOLE_ORDERS"][1:4] == ["STREAM", f"console_orders_{suffix}", "KAFKA / JSON"]
        assert sources["CONSOLE_ORDERS"][5] == query.query_id and sources["CONSOLE_LARGE"][4] == query.query_id
        nodes = {(g.get_attribute("data-kind"), g.get_attribute("data-name"))
                 for g in browser.find_elements("css selector", "#topology g.node")}
        assert {("STREAM", "CONSOLE_ORDERS"), ("STREAM", "CONSOLE_LARGE"), ("QUERY", query.query_id)} <= nodes
        edges = {(p.get_attribute("data-from"), p.get_attribute("data-to"))
                 for p in browser.find_elements("css selector", "#topology path.edge")}
        assert {("CONSOLE_ORDERS", query.query_id), (query.query_id, "CONSOLE_LARGE")} <= edges

        # A click on the query's node: its steps with their versions, as EXPLAIN names them.
        _click(browser, f'#topology g.node-query[data-name="{query.query_id}"]')
        _until(browser, lambda: browser.find_elements("css selector", "#steps li.step"), "the query's steps")
        explained = api.post("/ksql", json={"ksql": f"EXPLAIN {query.query_id};"}).json()[0]
        wire_names = re.findall(r"\[ (\S+) \]", explained["queryDescription"]["executionPlan"])
        shown = browser.find_elements("css selector", "#steps li.step")
        assert [step.get_attribute("data-type") for step in shown] == wire_names
        for step, wire in zip(shown, wire_names, strict=True):
            name, version = re.fullmatch(r"(\w+?)V(\d+)", wire).groups()
            assert step.find_element("css selector", ".step-name").text == name
            assert step.find_element("css selector", ".step-version").text == f"V{version}"

        # A push query on the sink, then rows inserted through the editor reach it.
        _run(browser, "SELECT ID, V FROM CONSOLE_LARGE EMIT CHANGES;", offset="earliest")
        _until(browser, lambda: "running" in browser.find_element("css selector", "#stream .query-status").text,
               "the push query running")
        push_id = browser.find_element("css selector", "#stream .query-status").get_attribute("data-query-id")
        assert [info.query_id for info in service.transient_infos()] == [push_id]
        assert _texts(browser, "#stream thead th") == ["ID", "V"]
        _run(browser, "INSERT INTO CONSOLE_ORDERS (ID, V) VALUES ('a', 1); INSERT INTO CONSOLE_ORDERS (ID, V) VALUES ('b', 5); "
                      "INSERT INTO CONSOLE_ORDERS (ID, V) VALUES ('c', 7);")
        _until(browser, lambda: _texts(browser, "#response .done") == ["Done."], "the inserts' answer")
        _until(browser, lambda: sorted(_table_rows(browser, "stream")) == [["b", "5"], ["c", "7"]],
               "the inserted rows in the push query's table")
        _until(browser, lambda: [r for r in _table_rows(browser, "queries") if r[0] == push_id and r[1] == "PUSH"],
               "the push query in the queries list")
        _until(browser, lambda: [r for r in _table_rows(browser, "queries")
                                 if r[0] == query.query_id and r[3] == "0" and r[6:] == ["3", "2"]],
               "the CSAS's lag and records consumed and produced")
        browser.save_screenshot(str(screenshot))

        # Stop: the query closes on the server and its table keeps the rows.
        _click(browser, "#stop")
        _until(browser, lambda: "stopped" in browser.find_element("css selector", "#stream .query-status").text,
               "the push query stopped")
        _until(browser, lambda: not service.transient_infos(), "the push query closed on the server", timeout=30)
        assert sorted(_table_rows(browser, "stream")) == [["b", "5"], ["c", "7"]]
        assert browser.find_element("id", "stop").get_attribute("disabled") is not None

        # A failing statement: ksqlDB's code and message, as the API answers them; no trace.
        failing = "CREATE STREAM NOTHING_HERE AS SELECT * FROM NOWHERE;"
        expected = api.post("/ksql", json={"ksql": failing}).json()
        _run(browser, failing)
        box = _until(browser, lambda: browser.find_elements("css selector", "#response .error"), "the error")[0]
        assert box.get_attribute("data-error-code") == str(expected["error_code"])
        assert box.text == f"Error {expected['error_code']} {expected['message']}"
        assert "Traceback" not in browser.find_element("tag name", "body").text
    api.close()
