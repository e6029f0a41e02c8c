"""kspark's Spark home: pip's pyspark, with the workers importing pyspark compiled."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from engine.runtime.spark_home import ARCHIVE, installed_spark_home, spark_home


def test_the_home_links_the_installation_and_its_archive_path_imports_the_installed_pyspark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    home = spark_home(tmp_path)
    assert home is not None and home.parent == tmp_path / "spark-home"
    installed = installed_spark_home()
    assert (home / "bin" / "spark-submit").resolve() == (installed / "bin" / "spark-submit").resolve()
    assert sorted(p.name for p in (home / "jars").iterdir()) == sorted(p.name for p in (installed / "jars").iterdir())
    lib = home / "python" / "lib"
    assert (lib / ARCHIVE).is_dir()
    py4j = [p for p in (installed / "python" / "lib").iterdir() if p.name.startswith("py4j")]
    assert py4j and all((lib / p.name).resolve() == p.resolve() for p in py4j)
    # Spark's worker path: the archive entry first. The import comes from files, not a zip.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(lib / ARCHIVE), *map(str, py4j)])}
    found = subprocess.run(
        [sys.executable, "-c", "import pyspark; print(type(pyspark.__spec__.loader).__name__, pyspark.__file__)"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert found == ["SourceFileLoader", str(lib / ARCHIVE / "pyspark" / "__init__.py")]
    assert Path(found[1]).resolve() == installed / "__init__.py"
    # Made once: a second call finds it, nothing else is left in the cache.
    assert spark_home(tmp_path) == home
    assert [p.name for p in (tmp_path / "spark-home").iterdir()] == [home.name]


def test_a_spark_home_set_elsewhere_is_kept_and_the_installations_own_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark-3.5-distribution"))
    assert spark_home(tmp_path) is None
    monkeypatch.setenv("SPARK_HOME", str(installed_spark_home()))
    assert spark_home(tmp_path) is not None


def test_a_cache_that_cannot_hold_the_home_leaves_spark_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    (tmp_path / "spark-home").write_text("a file where the folder goes", encoding="utf-8")
    assert spark_home(tmp_path) is None


def test_the_shared_sessions_workers_import_pyspark_compiled(spark: SparkSession) -> None:
    def loader(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyspark

        for batch in batches:
            name = type(pyspark.__spec__.loader).__name__ if pyspark.__spec__ else "?"
            yield pa.RecordBatch.from_pylist([{"loader": name, "path": pyspark.__file__}] * batch.num_rows)

    (row,) = spark.range(1).mapInArrow(loader, "loader string, path string").collect()
    assert row.loader == "SourceFileLoader", row
    assert f"{ARCHIVE}{os.sep}pyspark" in row.path and Path(row.path).resolve() == installed_spark_home() / "__init__.py"


def test_processes_making_the_home_at_once_get_the_same_one_and_leave_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytest-xdist's workers start their sessions together on a fresh cache.
    monkeypatch.delenv("SPARK_HOME", raising=False)
    script = (
        "import sys; from pathlib import Path; from engine.runtime.spark_home import spark_home; "
        "print(spark_home(Path(sys.argv[1])))"
    )
    runs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True)
            for _ in range(4)]
    homes = {run.communicate(timeout=60)[0].strip() for run in runs}
    assert len(homes) == 1 and homes != {"None"}
    assert [p.name for p in (tmp_path / "spark-home").iterdir()] == [Path(homes.pop()).name]
