"""A schema registry for development and tests: Apicurio Registry with its Confluent API.

    registry = SchemaRegistry("/tmp/registry", port=None)   # None or 0: a free port
    registry.start()                                         # background JVM
    registry.wait_ready(timeout=120)
    registry.url                     # 'http://127.0.0.1:40125/apis/ccompat/v7'
    registry.stop()

Apicurio Registry 3.0.9 (a Quarkus application, Java 17) serves the Confluent Schema
Registry REST API under ``/apis/ccompat/v7``: confluent-kafka's clients and serdes talk to
it as to Confluent's. Its schemas are kept in an H2 database file in the registry's
directory (``storage/``), so a registry stopped and started again answers the same ids, as
Confluent's keeps them in its ``_schemas`` topic; a new directory is an empty registry.

The distribution is one tar.gz on Maven Central
(``io.apicurio:apicurio-registry-app:3.0.9:all@tar.gz``; its parent POM is not published,
so Ivy cannot resolve it and it is downloaded directly, its SHA-1 checked) unpacked once
into ``kspark_home()/apicurio-registry-3.0.9``, beside the broker's jars. Files in the
registry directory::

    registry.log    the JVM's stdout and stderr (Quarkus logs to the console)
    registry.pid    pid of the running registry; removed by stop()
    registry.json   the last port used, reused by the next start when free
    storage/        the H2 database of the schemas (``registry.mv.db``), kept across restarts
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from engine.components.maven import kspark_home
from engine.components.process import HOST, JvmComponent, file_lock
from engine.components.process import java as java_executable
from engine.errors import ComponentError

APICURIO_VERSION = "3.0.9"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
DISTRIBUTION = (
    f"io/apicurio/apicurio-registry-app/{APICURIO_VERSION}/"
    f"apicurio-registry-app-{APICURIO_VERSION}-all.tar.gz"
)
API_PATH = "/apis/ccompat/v7"
PID_FILE = "registry.pid"
LOG_FILE = "registry.log"
STATE_FILE = "registry.json"
STORAGE_DIR = "storage"
MARKER = ".unpacked"
JVM_OPTIONS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]


@dataclass(frozen=True, slots=True)
class RegistryStatus:
    """Whether a registry runs in a directory, and its URL."""

    running: bool
    pid: int | None = None
    port: int | None = None

    @property
    def url(self) -> str | None:
        return registry_url(self.port) if self.port else None

    def __str__(self) -> str:
        if not self.running:
            return "stopped"
        return f"running (pid {self.pid}), ksql.schema.registry.url={self.url}"


def registry_url(port: int) -> str:
    """The Confluent-compatible API's base URL on ``port``."""
    return f"http://{HOST}:{port}{API_PATH}"


def distribution_dir(home: Path | None = None) -> Path:
    """Where the unpacked Apicurio distribution lives in kspark's cache."""
    return (home or kspark_home()) / f"apicurio-registry-{APICURIO_VERSION}"


def fetch_distribution(home: Path | None = None, *, base_url: str = MAVEN_CENTRAL,
                       timeout: float = 600.0) -> Path:
    """The runnable jar (``apicurio-registry-app-3.0.9-runner.jar`` beside ``lib/``) of Apicurio, downloaded and unpacked on first use.

    Raises ``ComponentError`` naming the URL when the download fails or the checksum differs.
    """
    root = distribution_dir(home)
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / ".lock"):
        if (root / MARKER).exists():
            return _run_jar(root)
        url = f"{base_url}/{DISTRIBUTION}"
        print(f"kspark: fetching Apicurio Registry {APICURIO_VERSION} from {url} ...",
              file=sys.stderr, flush=True)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=root, prefix="fetch-") as work:
            archive = Path(work) / "registry.tar.gz"
            expected = _download_text(f"{url}.sha1", timeout).split()[0].strip().lower()
            digest = _download(url, archive, timeout)
            if digest != expected:
                raise ComponentError(
                    f"Cannot fetch Apicurio Registry from {url}: SHA-1 {digest} differs from "
                    f"the published {expected}."
                )
            unpacked = Path(work) / "unpacked"
            try:
                with tarfile.open(archive) as tar:
                    tar.extractall(unpacked, filter="data")
            except (tarfile.TarError, OSError) as exc:
                raise ComponentError(f"Cannot unpack {url}: {exc}") from None
            for entry in root.iterdir():
                if entry.name not in {".lock", Path(work).name}:
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            for entry in unpacked.iterdir():
                shutil.move(str(entry), root / entry.name)
        jar = _run_jar(root)
        (root / MARKER).write_text(f"{APICURIO_VERSION}\n", encoding="utf-8")
        print(f"kspark: fetched Apicurio Registry in {time.monotonic() - started:.0f} s.",
              file=sys.stderr, flush=True)
        return jar


class SchemaRegistry(JvmComponent):
    """An Apicurio Registry living in ``directory``, listening on ``port`` (None: a free one).

    With ``stop_with_parent`` the JVM is killed when the starting process dies (Linux only),
    for test fixtures; otherwise it outlives the starting process, for the CLI.
    """

    WHAT = "The schema registry"
    PID_FILE = PID_FILE
    STATE_FILE = STATE_FILE

    def __init__(
        self,
        directory: str | os.PathLike[str],
        port: int | None = None,
        *,
        heap: str = "384m",
        home: Path | None = None,
        stop_with_parent: bool = False,
    ) -> None:
        self.directory = Path(directory).resolve()
        self.port = port or None
        self.heap = heap
        self.home = home
        self.stop_with_parent = stop_with_parent
        self._process: subprocess.Popen[bytes] | None = None
        if self.port is None and self.running_pid() is not None:
            self.port = self.saved_port()

    def command_marker(self) -> str:
        return f"-Dkspark.registry.dir={self.directory}"  # a registry JVM started here names it

    @property
    def url(self) -> str:
        """The base URL for ``ksql.schema.registry.url`` / confluent-kafka's ``url``."""
        if self.port is None:
            raise ComponentError(
                f"The schema registry in {self.directory} has no port yet: start it first."
            )
        return registry_url(self.port)

    @property
    def database_url(self) -> str:
        """The JDBC URL of the registry's H2 database file (``storage/registry.mv.db``).

        ``WRITE_DELAY=0`` writes each commit to the file at once, so a registry killed right
        after it answered still has the schema it registered."""
        return f"jdbc:h2:file:{self.directory / STORAGE_DIR / 'registry'};WRITE_DELAY=0"

    def start(self) -> bool:
        """Start the registry in the background; False if one already runs in this directory."""
        if self.running_pid() is not None:
            self.port = self.saved_port() or self.port
            return False
        java = java_executable("the schema registry")
        self.directory.mkdir(parents=True, exist_ok=True)
        port = self._choose_port()
        jar = fetch_distribution(self.home)
        command = [
            java, f"-Xmx{self.heap}", *JVM_OPTIONS,
            f"-Dquarkus.http.port={port}", f"-Dquarkus.http.host={HOST}",
            "-Dquarkus.management.enabled=false",
            "-Dapicurio.storage.kind=sql", "-Dapicurio.storage.sql.kind=h2",
            f"-Dapicurio.datasource.url={self.database_url}",
            "-Dapicurio.rest.deletion.artifact.enabled=true",
            "-Dapicurio.rest.deletion.artifact-version.enabled=true",
            "-Dquarkus.log.level=WARN", "-Dquarkus.banner.enabled=false",
            f"-Dkspark.registry.dir={self.directory}",
            "-jar", str(jar),
        ]
        self._spawn(command, self.directory / LOG_FILE, port=port)
        self.port = port
        return True

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Block until the Confluent API answers; raise if the JVM dies or the time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            if self.running_pid() is None:
                if self._process is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self._process.wait(timeout=10)
                raise ComponentError(
                    f"The schema registry in {self.directory} exited during start-up: {self._failure()}"
                )
            with contextlib.suppress(OSError, urllib.error.URLError):
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as answer:
                    if answer.status == 200:
                        return
            if time.monotonic() >= deadline:
                raise ComponentError(
                    f"The schema registry in {self.directory} did not answer on {self.url} "
                    f"within {timeout:.0f} s; see {self.directory / LOG_FILE}."
                )
            time.sleep(0.3)

    def status(self) -> RegistryStatus:
        """Running or stopped, with the pid and port of a running registry."""
        pid = self.running_pid()
        if pid is None:
            return RegistryStatus(running=False)
        return RegistryStatus(running=True, pid=pid, port=self.saved_port())

    def _failure(self) -> str:
        try:
            lines = (self.directory / LOG_FILE).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return f"no log output; see {self.directory}"
        errors = [line.strip() for line in lines if "ERROR" in line or "Exception" in line]
        text = (errors or [line.strip() for line in lines if line.strip()] or ["no log output"])[-1]
        return text if len(text) <= 400 else text[:397] + "..."


def _run_jar(root: Path) -> Path:
    jars = sorted(root.glob("*-runner.jar")) or sorted(root.glob("**/quarkus-run.jar"))
    if not jars:
        raise ComponentError(f"The Apicurio distribution in {root} has no runnable jar (*-runner.jar).")
    return jars[0]


def _download_text(url: str, timeout: float) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return str(answer.read().decode("ascii", errors="replace"))
    except (OSError, urllib.error.URLError) as exc:
        raise ComponentError(f"Cannot fetch {url}: {_reason(exc)}") from None


def _download(url: str, target: Path, timeout: float) -> str:
    """Stream ``url`` into ``target``; the SHA-1 of the bytes."""
    sha1 = hashlib.sha1()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer, open(target, "wb") as out:
            while chunk := answer.read(1 << 20):
                sha1.update(chunk)
                out.write(chunk)
    except (OSError, urllib.error.URLError) as exc:
        raise ComponentError(f"Cannot fetch {url}: {_reason(exc)}") from None
    return sha1.hexdigest()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc)

