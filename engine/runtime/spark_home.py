"""The Spark home kspark starts Spark from: pip's pyspark, with its Python code importable compiled.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of every Python process
it starts. Python compiles each module it imports from a zip archive, at every import (no
bytecode cache is kept for archives): about 0.9 s of CPU for each such process to import
pyspark, against 0.4 s from the installed package. Spark starts one for its worker daemon,
and one more for each ``transformWithState`` operator at every start of a streaming query
(the processor's state variables are read in Python while the query is planned), so a
table aggregate, with two such operators, pays the import twice at each start.

``spark_home()`` makes, once per pyspark installation, a Spark home in kspark's cache
(``$KSPARK_HOME/spark-home/<version>-<digest of the installation's path>``): links to the
installation's ``bin``, ``jars`` and every other entry, and at ``python/lib/pyspark.zip`` a
*directory* holding a link to the installed ``pyspark`` package. Python finds packages in
a directory on its path as well as in an archive, so the workers import the very files the
driver does, with the ``.pyc`` files pip compiled at installation. ``python/lib``'s other
archives (py4j's) are links to the originals.

A ``SPARK_HOME`` set to anything else (a Spark distribution) is used as it is; so is the
installation's own home when the cache cannot hold links (the start is then slower, never
different).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import uuid
from pathlib import Path

LOG = logging.getLogger(__name__)

ARCHIVE = "pyspark.zip"
_MARK = ".kspark-spark-home"  # written last: a home without it is incomplete


def installed_spark_home() -> Path:
    """The Spark home pip's pyspark carries: the directory of the ``pyspark`` package."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_home(cache: Path | None = None) -> Path | None:
    """kspark's Spark home for the installed pyspark (made on first use), or None: use
    ``SPARK_HOME`` or pyspark's own home as they are."""
    import pyspark

    installed = installed_spark_home()
    configured = os.environ.get("SPARK_HOME")
    if configured and Path(configured).resolve() != installed:
        return None
    if not (installed / "python" / "lib" / ARCHIVE).is_file():
        return None
    if cache is None:
        from engine.components.maven import kspark_home

        cache = kspark_home()
    digest = hashlib.sha1(str(installed).encode()).hexdigest()[:12]
    home = cache / "spark-home" / f"{pyspark.__version__}-{digest}"
    if (home / _MARK).is_file():
        return home
    try:
        _make(home, installed)
    except OSError as exc:
        LOG.info("Spark starts from %s: cannot make %s (%s).", installed, home, exc)
        return None
    return home


def _make(home: Path, installed: Path) -> None:
    """Make ``home`` in a directory of its own, then move it in place (another process may
    have made it meanwhile: its copy is as good)."""
    home.parent.mkdir(parents=True, exist_ok=True)
    building = home.parent / f".{home.name}-{uuid.uuid4().hex}"
    building.mkdir()
    try:
        for entry in installed.iterdir():
            if entry.name != "python":
                (building / entry.name).symlink_to(entry)
        lib = building / "python" / "lib"
        (lib / ARCHIVE).mkdir(parents=True)
        (lib / ARCHIVE / "pyspark").symlink_to(installed, target_is_directory=True)
        for entry in (installed / "python" / "lib").iterdir():
            if entry.name != ARCHIVE:
                (lib / entry.name).symlink_to(entry)
        (building / _MARK).write_text(f"{installed}\n", encoding="utf-8")
        try:
            building.rename(home)
        except OSError:
            if not (home / _MARK).is_file():
                raise
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)


def use_spark_home() -> None:
    """Point ``SPARK_HOME`` at kspark's Spark home, before the JVM starts (``get_spark``)."""
    home = spark_home()
    if home is not None:
        os.environ["SPARK_HOME"] = str(home)
