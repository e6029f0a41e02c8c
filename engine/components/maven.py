"""Fetch jars from Maven Central into kspark's cache, once, with Apache Ivy.

    lib = fetch_artifacts(["org.apache.kafka:kafka_2.13:4.4.0"], kspark_home() / "kafka-4.4.0" / "lib")

Ivy resolves the transitive runtime dependencies (Maven's ``compile`` and ``runtime``
scopes) of the artifacts a tiny generated ``ivy.xml`` lists and copies every jar into the
target directory. Ivy's jar ships inside PySpark (Spark resolves ``spark.jars.packages``
with it), so a machine needs nothing but Python and Java: no Maven. A marker file written
after a successful fetch makes later calls free; a lock file keeps two processes from
fetching into the same directory at once.

Cache layout under ``kspark_home()`` (``$KSPARK_HOME``, default ``~/.cache/kspark``)::

    ivy-cache/             Ivy's download cache (kept out of ~/.ivy2)
    <name>/lib/*.jar       one directory per fetched set of jars
    <name>/lib/.fetched    marker: the coordinates fetched, written last
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import quoteattr

from engine.components.process import file_lock
from engine.errors import ComponentError

MARKER = ".fetched"
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


def ivy_xml(artifacts: Sequence[Artifact]) -> str:
    """An Ivy module whose dependencies are ``artifacts``, their runtime jars wanted.

    The listed revisions are forced, as Maven's nearest-wins keeps a direct dependency's
    version against a transitive one."""
    dependencies = "".join(
        f"    <dependency org={quoteattr(a.group)} name={quoteattr(a.artifact)} rev={quoteattr(a.version)}"
        ' force="true" conf="default->default"/>\n'
        for a in artifacts
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<ivy-module version="2.0">\n'
        '  <info organisation="kspark.fetch" module="fetch"/>\n'
        '  <configurations><conf name="default"/></configurations>\n'
        f"  <dependencies>\n{dependencies}  </dependencies>\n"
        "</ivy-module>\n"
    )


def ivy_jar() -> Path:
    """The Ivy jar that ships with PySpark."""
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"))
    if not jars:
        raise ComponentError(f"PySpark's Ivy jar is missing from {Path(pyspark.__file__).parent / 'jars'}.")
    return jars[-1]


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
    java: str = "java",
    home: Path | None = None,
    timeout: float = 900.0,
) -> Path:
    """Copy the jars of ``coordinates`` and their runtime dependencies into ``dest``.

    Does nothing when ``dest`` already holds them. Prints one progress line on stderr
    while Ivy runs (a first fetch takes about a minute). Raises ``ComponentError``
    naming the artifacts and Ivy's reason when Java is missing or the fetch fails.
    """
    artifacts = [Artifact.parse(c) for c in coordinates]
    if not artifacts:
        raise ComponentError("No Maven artifact to fetch: expected at least one coordinate.")
    if is_fetched(dest, coordinates):
        return dest
    names = ", ".join(str(a) for a in artifacts)
    executable = shutil.which(java)
    if executable is None:
        raise ComponentError(
            f"Cannot fetch {names}: Java ('{java}') is not on PATH; install a Java 17 runtime "
            "(e.g. 'apt-get install openjdk-17-jre-headless')."
        )
    cache = (home or kspark_home()) / "ivy-cache"
    dest.mkdir(parents=True, exist_ok=True)
    with file_lock(dest / ".lock"):
        if is_fetched(dest, coordinates):  # another process fetched while we waited
            return dest
        started = time.monotonic()
        print(f"kspark: fetching {names} from Maven Central into {dest} ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="kspark-fetch-") as work:
            module = Path(work) / "ivy.xml"
            module.write_text(ivy_xml(artifacts), encoding="utf-8")
            command = [
                executable, "-jar", str(ivy_jar()),
                "-ivy", str(module), "-confs", "default", "-cache", str(cache),
                "-retrieve", f"{dest}/[artifact]-[revision](-[classifier]).[ext]",
            ]
            try:
                done = subprocess.run(
                    command, cwd=work, capture_output=True, text=True, timeout=timeout, check=False
                )
            except subprocess.TimeoutExpired:
                raise ComponentError(
                    f"Cannot fetch {names}: Ivy did not finish within {timeout:.0f} s."
                ) from None
        if done.returncode != 0:
            raise ComponentError(f"Cannot fetch {names}: {ivy_message(done.stdout + done.stderr)}")
        (dest / MARKER).write_text(
            json.dumps(sorted(str(a) for a in artifacts)) + "\n", encoding="utf-8"
        )
        print(
            f"kspark: fetched {len(list(dest.glob('*.jar')))} jars in {time.monotonic() - started:.0f} s.",
            file=sys.stderr,
            flush=True,
        )
    return dest


def ivy_message(output: str) -> str:
    """Ivy's reason for a failed fetch, on one line: the unresolved dependencies, else its
    last error line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if "UNRESOLVED DEPENDENCIES" in line), None)
    unresolved = [] if header is None else [
        line.strip(": ").strip() for line in lines[header + 1:] if line.startswith(":: ") and not set(line) <= {":"}
    ]
    if unresolved:
        text = "; ".join(unresolved) + " (on Maven Central)"
    else:
        errors = [line for line in lines if "ERROR" in line or "Exception" in line]
        text = (errors or lines or ["Ivy failed with no output."])[-1]
    return text if len(text) <= 600 else text[:597] + "..."

