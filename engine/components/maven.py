"""Fetch jars from Maven Central into kspark's cache, once, with the ``mvn`` client.

    lib = fetch_artifacts(["org.apache.kafka:kafka_2.13:4.4.0"], kspark_home() / "kafka-4.4.0" / "lib")

Maven resolves the transitive runtime dependencies: a tiny generated pom lists the
artifacts and ``mvn dependency:copy-dependencies`` copies every jar into the target
directory. A marker file written after a successful fetch makes later calls free; a lock
file keeps two processes from fetching into the same directory at once.

Cache layout under ``kspark_home()`` (``$KSPARK_HOME``, default ``~/.cache/kspark``)::

    maven-repo/            Maven's local repository (kept out of ~/.m2)
    <name>/lib/*.jar       one directory per fetched set of jars
    <name>/lib/.fetched    marker: the coordinates fetched, written last
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from engine.errors import ComponentError

MARKER = ".fetched"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MAVEN_BOILERPLATE = ("->", "[Help", "To see the full", "Re-run Maven", "For more information")
_COORDINATE = re.compile(r"^[A-Za-z0-9_.\-]+:[A-Za-z0-9_.\-]+:[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True, slots=True)
class Artifact:
    """A Maven artifact ``group:artifact:version`` (a jar)."""

    group: str
    artifact: str
    version: str

    @classmethod
    def parse(cls, coordinate: str) -> Artifact:
        """``Artifact`` from ``'group:artifact:version'``."""
        if not _COORDINATE.match(coordinate):
            raise ComponentError(
                f"'{coordinate}' is not a Maven coordinate: expected 'group:artifact:version'."
            )
        group, artifact, version = coordinate.split(":")
        return cls(group, artifact, version)

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


def kspark_home() -> Path:
    """kspark's cache directory: ``$KSPARK_HOME`` if set, else ``~/.cache/kspark``."""
    configured = os.environ.get("KSPARK_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "kspark"


def pom_xml(artifacts: Sequence[Artifact]) -> str:
    """A pom whose dependencies are ``artifacts`` (nothing is built from it)."""
    group, name, version = DEPENDENCY_PLUGIN.split(":")
    dependencies = "".join(
        "    <dependency>"
        f"<groupId>{escape(a.group)}</groupId>"
        f"<artifactId>{escape(a.artifact)}</artifactId>"
        f"<version>{escape(a.version)}</version>"
        "</dependency>\n"
        for a in artifacts
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>kspark.fetch</groupId><artifactId>fetch</artifactId><version>0</version>\n"
        "  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{dependencies}  </dependencies>\n"
        "  <build><plugins><plugin>"
        f"<groupId>{group}</groupId><artifactId>{name}</artifactId><version>{version}</version>"
        "</plugin></plugins></build>\n"
        "</project>\n"
    )


def is_fetched(dest: Path, coordinates: Sequence[str]) -> bool:
    """True if ``dest`` already holds exactly these coordinates' jars from an earlier fetch."""
    try:
        recorded = json.loads((dest / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(recorded == sorted(str(Artifact.parse(c)) for c in coordinates))


def fetch_artifacts(
    coordinates: Sequence[str],
    dest: Path,
    *,
    mvn: str = "mvn",
    home: Path | None = None,
    timeout: float = 900.0,
) -> Path:
    """Copy the jars of ``coordinates`` and their runtime dependencies into ``dest``.

    Does nothing when ``dest`` already holds them. Prints one progress line on stderr
    while Maven runs (a first fetch takes about a minute). Raises ``ComponentError``
    naming the artifacts and Maven's message when ``mvn`` is missing or the fetch fails.
    """
    artifacts = [Artifact.parse(c) for c in coordinates]
    if not artifacts:
        raise ComponentError("No Maven artifact to fetch: expected at least one coordinate.")
    if is_fetched(dest, coordinates):
        return dest
    names = ", ".join(str(a) for a in artifacts)
    executable = shutil.which(mvn)
    if executable is None:
        raise ComponentError(
            f"Cannot fetch {names}: Maven ('{mvn}') is not on PATH; install Maven 3 "
            "(e.g. 'apt-get install maven')."
        )
    repo = (home or kspark_home()) / "maven-repo"
    dest.mkdir(parents=True, exist_ok=True)
    with _locked(dest / ".lock"):
        if is_fetched(dest, coordinates):  # another process fetched while we waited
            return dest
        started = time.monotonic()
        print(f"kspark: fetching {names} from Maven Central into {dest} ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="kspark-fetch-") as work:
            (Path(work) / "pom.xml").write_text(pom_xml(artifacts), encoding="utf-8")
            command = [
                executable, "-q", "-B", "-U",  # -U: retry failures Maven cached
                f"-Dmaven.repo.local={repo}",
                "dependency:copy-dependencies",
                f"-DoutputDirectory={dest}",
                "-DincludeScope=runtime",
            ]
            try:
                done = subprocess.run(
                    command, cwd=work, capture_output=True, text=True, timeout=timeout, check=False
                )
            except subprocess.TimeoutExpired:
                raise ComponentError(
                    f"Cannot fetch {names}: Maven did not finish within {timeout:.0f} s."
                ) from None
        if done.returncode != 0:
            raise ComponentError(f"Cannot fetch {names}: {_maven_message(done.stdout + done.stderr)}")
        (dest / MARKER).write_text(
            json.dumps(sorted(str(a) for a in artifacts)) + "\n", encoding="utf-8"
        )
        print(
            f"kspark: fetched {len(list(dest.glob('*.jar')))} jars in {time.monotonic() - started:.0f} s.",
            file=sys.stderr,
            flush=True,
        )
    return dest


def _maven_message(output: str) -> str:
    """Maven's first ``[ERROR]`` line, without its boilerplate, on one line."""
    errors = []
    for raw in output.splitlines():
        line = _ANSI.sub("", raw)
        if line.startswith("[ERROR]"):
            text = line.removeprefix("[ERROR]").strip()
            if text and not text.startswith(_MAVEN_BOILERPLATE):
                errors.append(text)
    if not errors:
        tail = [_ANSI.sub("", line).strip() for line in output.splitlines() if line.strip()]
        return tail[-1] if tail else "mvn failed with no output."
    text = errors[0].removesuffix("-> [Help 1]").strip()
    text = text.replace("Failed to execute goal on project fetch: ", "")
    text = text.replace(" for project kspark.fetch:fetch:pom:0", "")
    return text if len(text) <= 600 else text[:597] + "..."


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
