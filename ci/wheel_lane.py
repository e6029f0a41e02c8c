"""The wheel lane: kspark as a user installs it, checked from outside the checkout.

``nox -s wheel`` builds the wheel, installs it without extras into a fresh virtualenv and runs
this script there, from a temporary directory, so that nothing of the checkout or of the test
extras is importable. Each check prints one line; the last line counts them
(``wheel-lane: N passed, M failed``) and the exit code is 1 if any failed.

    python ci/wheel_lane.py --repo PATH [--only NAME ...]

Checks:
- installed: ``engine`` and ``qtt`` come from the virtualenv, pytest is not there;
- main-job: ``qtt run`` of the project's QTT cases on embedded local Spark;
- extra-named: a tool that needs the test extra says so in one line;
- bad-input: ``kspark run --input`` with a bad record is one line, no traceback;
- kafka-run: ``kspark run`` of a stateless and a stateful query on a broker, outputs exact;
- server-race: three ``kspark server`` processes of one service (tables metastore) with
  CREATE STREAM requests racing on all three: one success per name, one metastore everywhere;
- console: ``GET /console`` of a ``kspark server`` with ``--auth-file`` asks for credentials
  (401, Basic realm), then answers the page, and every script, style sheet and icon the page and
  its modules name loads from the installed package.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

BIN = Path(sys.executable).parent
KSPARK = str(BIN / "kspark")
QTT = str(BIN / "qtt")


class Failed(Exception):
    """A check's finding, in one line."""


def _run(command: list[str], *, timeout: float = 900, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise Failed(message)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def check_installed(repo: Path, work: Path) -> str:
    import importlib.util

    import engine
    import qtt

    for module in (engine, qtt):
        _expect(Path(sys.prefix) in Path(module.__file__).resolve().parents,
                f"{module.__name__} is imported from {module.__file__}, not from the virtualenv {sys.prefix}")
    _expect(importlib.util.find_spec("pytest") is None, "pytest is installed: this lane must run without extras")
    return f"engine {engine.__version__} from {Path(engine.__file__).parent}"


def check_main_job(repo: Path, work: Path) -> str:
    done = _run([QTT, "run", str(repo / "tests" / "qtt_cases")], cwd=work, timeout=1500)
    failures = [line for line in done.stdout.splitlines() if not line.startswith("PASS")]
    _expect(done.returncode == 0, f"qtt run exited {done.returncode}:\n" + "\n".join(failures[-20:]))
    return done.stdout.strip().splitlines()[-1]


def check_extra_named(repo: Path, work: Path) -> str:
    done = _run([sys.executable, "-m", "qtt.plans.mutation", "--count", "1"], cwd=work, timeout=120)
    err = done.stderr.strip()
    _expect(done.returncode != 0 and "Traceback" not in err and len(err.splitlines()) == 1,
            f"the mutation check without the test extra answered {done.returncode}: {err!r}")
    _expect("pip install 'kspark[test]'" in err, f"the message does not name the extra: {err!r}")
    return err


def check_bad_input(repo: Path, work: Path) -> str:
    sql = work / "bad.sql"
    sql.write_text("CREATE STREAM S (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');\n"
                   "CREATE STREAM T AS SELECT ID, V FROM S;\n", encoding="utf-8")
    records = work / "bad.json"
    records.write_text(json.dumps([{"topic": "s", "key": "a", "value": {"V": 1}, "timestamp": "noon"}]))
    done = _run([KSPARK, "run", str(sql), "--input", str(records)], cwd=work, timeout=300)
    err = done.stderr.strip()
    _expect(done.returncode != 0 and "Traceback" not in err, f"exit {done.returncode}: {_tail(err)}")
    _expect("record 1 of" in err and "'timestamp'" in err, f"the error does not name the record and field: {err!r}")
    return err.splitlines()[-1]


@contextmanager
def _broker(work: Path) -> Iterator[str]:
    directory = work / "broker"
    done = _run([KSPARK, "broker", "start", "--dir", str(directory), "--timeout", "180"], timeout=600)
    _expect(done.returncode == 0, f"kspark broker start exited {done.returncode}: {_tail(done.stderr)}")
    bootstrap = next(line.split("=", 1)[1] for line in done.stdout.splitlines() if line.startswith("bootstrap.servers="))
    try:
        yield bootstrap
    finally:
        _run([KSPARK, "broker", "stop", "--dir", str(directory)], timeout=120)


def _committed(bootstrap: str, topic: str) -> list[dict]:
    from engine.kafka.consume import read_topic

    return [json.loads(r.value) if r.value is not None else None for r in read_topic(bootstrap, topic, timeout=30)]


def check_kafka_run(repo: Path, work: Path, bootstrap: str) -> str:
    suffix = uuid.uuid4().hex[:6]
    inserts = "".join(f"INSERT INTO ORDERS (ID, ITEM, QTY) VALUES ('o{i}', 'i{i % 3}', {i});\n" for i in range(30))
    sql = work / "app.sql"
    sql.write_text(
        f"CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT) WITH (KAFKA_TOPIC='orders_{suffix}', "
        "VALUE_FORMAT='JSON', PARTITIONS=2);\n" + inserts
        + f"CREATE STREAM BIG WITH (KAFKA_TOPIC='big_{suffix}') AS SELECT ID, QTY * 10 AS Q FROM ORDERS WHERE QTY >= 20;\n"
        f"CREATE TABLE TOTALS WITH (KAFKA_TOPIC='totals_{suffix}') AS SELECT ITEM, COUNT(*) AS N, SUM(QTY) AS S "
        "FROM ORDERS GROUP BY ITEM;\n",
        encoding="utf-8",
    )
    done = _run([KSPARK, "run", str(sql), "--bootstrap-servers", bootstrap, "--state-dir", str(work / "state"),
                 "--property", "auto.offset.reset=earliest", "--until-caught-up"], cwd=work, timeout=900)
    _expect(done.returncode == 0, f"kspark run exited {done.returncode}:\n{_tail(done.stdout + done.stderr)}")
    big = sorted(v["Q"] for v in _committed(bootstrap, f"big_{suffix}"))
    _expect(big == [q * 10 for q in range(20, 30)], f"the stateless query wrote {big}")
    totals: dict[str, tuple[int, int]] = {}
    from engine.kafka.consume import read_topic

    for record in read_topic(bootstrap, f"totals_{suffix}", timeout=30):
        value = json.loads(record.value)
        totals[json.loads(record.key) if record.key.startswith(b'"') else record.key.decode()] = (value["N"], value["S"])
    expected = {f"i{k}": (10, sum(i for i in range(30) if i % 3 == k)) for k in range(3)}
    _expect(totals == expected, f"the aggregate's last values are {totals}, expected {expected}")
    return f"stateless: {len(big)} records; aggregate: {totals}"


def check_server_race(repo: Path, work: Path, bootstrap: str) -> str:
    import httpx

    from engine.components.kspark_server import ServerProcess, stop_all
    from engine.errors import ComponentError

    service_id = f"wheel_{uuid.uuid4().hex[:8]}"
    logs = [work / f"server{n}.log" for n in range(3)]
    servers = [ServerProcess(bootstrap, service_id, work / f"s{n}", log=logs[n], cwd=work,
                             args=("--spark-master", "local[1]")) for n in range(3)]
    try:
        for server in servers:
            try:
                server.start(timeout=240)
            except ComponentError as exc:
                raise Failed(str(exc)) from None
        urls = [server.url for server in servers]

        def create(job: tuple[str, str]) -> tuple[int, str]:
            url, name = job
            statement = (f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{service_id}_t', "
                         "VALUE_FORMAT='JSON', PARTITIONS=1);")
            started = time.monotonic()
            try:
                answer = httpx.post(f"{url}/ksql", json={"ksql": statement}, timeout=300)
            except httpx.HTTPError as exc:
                raise Failed(f"CREATE STREAM {name} on {url}: {type(exc).__name__} after "
                             f"{time.monotonic() - started:.0f} s") from None
            return answer.status_code, answer.text

        jobs = [(urls[i % 3], f"S{i}") for i in range(9)] + [(url, "SAME") for url in urls]
        with ThreadPoolExecutor(len(jobs)) as pool:
            answers = list(pool.map(create, jobs))
        distinct, same = answers[:9], answers[9:]
        bad = [(name, status, text) for (_, name), (status, text) in zip(jobs, distinct, strict=False) if status != 200]
        _expect(not bad, f"racing CREATE STREAM answered {bad[:3]}")
        statuses = sorted(status for status, _ in same)
        _expect(statuses == [200, 400, 400], f"the same name on three servers answered {same}")
        _expect(all("already exists" in text for status, text in same if status == 400), f"refusals: {same}")
        views = set()
        for url in urls:
            answer = httpx.post(f"{url}/ksql", json={"ksql": "SHOW STREAMS;"}, timeout=120)
            _expect(answer.status_code == 200, f"SHOW STREAMS on {url}: {answer.text}")
            views.add(tuple(sorted(s["name"] for s in answer.json()[0]["streams"])))
        expected = tuple(sorted([f"S{i}" for i in range(9)] + ["SAME"]))
        _expect(views == {expected}, f"the servers see {views}, expected {expected}")
    except Failed as exc:
        errors = "\n".join(f"{log.name}: {line}" for log in logs if log.exists()
                           for line in log.read_text(errors="replace").splitlines()
                           if "ERROR" in line or "Error" in line)
        raise Failed(f"{exc}\nthe servers' errors:\n{errors[-4000:]}") from None
    finally:
        codes = stop_all(servers)
    _expect(codes == [0, 0, 0], f"the servers stopped with {codes}:\n" + "\n".join(_tail(log.read_text(), 5) for log in logs))
    return "12 racing CREATE STREAM requests on 3 servers: 10 created once, 2 refused, one metastore"


def check_console(repo: Path, work: Path, bootstrap: str) -> str:
    import httpx

    from engine.components.kspark_server import ServerProcess
    from engine.errors import ComponentError

    users = work / "console-users.properties"
    users.write_text("fred: letmein\n", encoding="utf-8")
    log = work / "console-server.log"
    server = ServerProcess(bootstrap, f"wheel_console_{uuid.uuid4().hex[:8]}", work / "console", log=log, cwd=work,
                           args=("--spark-master", "local[1]", "--auth-file", str(users)))
    try:
        try:
            server.start(timeout=240)
        except ComponentError as exc:
            raise Failed(str(exc)) from None
        refused = httpx.get(f"{server.url}/console", timeout=60)
        _expect(refused.status_code == 401 and refused.headers.get("www-authenticate", "").startswith("Basic realm="),
                f"/console without credentials answered {refused.status_code} {dict(refused.headers)}")
        with httpx.Client(base_url=server.url, auth=("fred", "letmein"), timeout=60) as http:
            page = http.get("/console")
            _expect(page.status_code == 200 and "<title>kspark console</title>" in page.text,
                    f"/console answered {page.status_code}: {page.text[:200]!r}")
            pending = re.findall(r'(?:src|href)="/console/assets/([^"]+)"', page.text)
            loaded: dict[str, str] = {}
            while pending:
                name = pending.pop()
                if name in loaded:
                    continue
                asset = http.get(f"/console/assets/{name}")
                _expect(asset.status_code == 200 and asset.content,
                        f"/console/assets/{name} answered {asset.status_code}: {asset.text[:200]!r}")
                loaded[name] = asset.headers["content-type"].split(";")[0]
                if name.endswith(".js"):
                    pending += re.findall(r'from "\./([^"]+)"', asset.text)
        _expect({"console.js", "console.css"} <= set(loaded), f"the page names only {sorted(loaded)}")
    finally:
        code = server.stop()
    _expect(code == 0, f"the server stopped with {code}:\n{_tail(log.read_text())}")
    return "the page and " + ", ".join(f"{name} ({kind})" for name, kind in sorted(loaded.items()))


LOCAL: dict[str, Callable[[Path, Path], str]] = {
    "installed": check_installed,
    "extra-named": check_extra_named,
    "bad-input": check_bad_input,
    "main-job": check_main_job,
}
ON_KAFKA: dict[str, Callable[[Path, Path, str], str]] = {
    "kafka-run": check_kafka_run,
    "server-race": check_server_race,
    "console": check_console,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True, type=Path, help="the checkout (for its QTT cases)")
    parser.add_argument("--only", action="append", choices=[*LOCAL, *ON_KAFKA], help="run only this check")
    args = parser.parse_args(argv)
    wanted = args.only or [*LOCAL, *ON_KAFKA]
    results: list[bool] = []

    def record(name: str, run: Callable[[], str]) -> None:
        started = time.monotonic()
        try:
            detail = run()
            results.append(True)
            print(f"PASSED {name} ({time.monotonic() - started:.0f} s): {detail}", flush=True)
        except Exception as exc:  # noqa: BLE001 - every check reports, whatever it met
            results.append(False)
            what = str(exc) if isinstance(exc, Failed) else f"{type(exc).__name__}: {exc}"
            print(f"FAILED {name} ({time.monotonic() - started:.0f} s): {what}", flush=True)

    with tempfile.TemporaryDirectory(prefix="kspark-wheel-") as tmp:
        work = Path(tmp)
        os.chdir(work)  # nothing of the checkout is importable from here
        for name, check in LOCAL.items():
            if name in wanted:
                record(name, lambda check=check: check(args.repo.resolve(), work))
        if any(name in wanted for name in ON_KAFKA):
            try:
                with _broker(work) as bootstrap:
                    for name, kafka_check in ON_KAFKA.items():
                        if name in wanted:
                            record(name, lambda kafka_check=kafka_check: kafka_check(args.repo.resolve(), work, bootstrap))
            except Failed as exc:
                results.append(False)
                print(f"FAILED broker: {exc}", flush=True)
    print(f"wheel-lane: {sum(results)} passed, {len(results) - sum(results)} failed", flush=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
