"""The perf benchmark's measuring and reporting (the benchmark itself runs in ``nox -s perf``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.perf import query_report, summary_lines
from benchmarks.timing import Timing, median, process_tree_cpu_seconds

needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="CPU time is read from Linux /proc")

# Spins until the process has used 0.3 CPU seconds (however loaded the machine), then says so.
SPIN = "import sys, time\nwhile time.process_time() < 0.3: pass\nprint('done', flush=True)\n"


@needs_proc
def test_cpu_of_a_child_that_was_waited_for_is_counted():
    before = process_tree_cpu_seconds()
    subprocess.run([sys.executable, "-c", SPIN], check=True, capture_output=True)
    after = process_tree_cpu_seconds()
    assert before is not None and after is not None
    assert after - before >= 0.25  # /proc counts whole clock ticks


@needs_proc
def test_cpu_of_a_live_grandchild_is_counted():
    # A child that starts a spinning grandchild and keeps both alive until stdin closes, as
    # Spark's JVM keeps its Python workers.
    parent = (
        "import subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {SPIN + 'import sys; sys.stdin.read()'!r}],"
        " stdout=subprocess.PIPE, text=True)\n"
        "print(child.stdout.readline().strip(), flush=True)\n"
        "sys.stdin.read()\n"
        "child.kill()\n"
    )
    before = process_tree_cpu_seconds()
    proc = subprocess.Popen([sys.executable, "-c", parent], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
        during = process_tree_cpu_seconds()
    finally:
        proc.communicate("")
    assert before is not None and during is not None
    assert during - before >= 0.25


def test_a_process_that_does_not_exist_has_no_cpu_time():
    assert process_tree_cpu_seconds(2**22 + 12345) is None


def test_the_report_gives_elapsed_and_cpu_ratios_to_the_hand_written_job():
    runs = {"engine": [Timing(6.0, 9.0)], "engine_python_steps": [Timing(8.0, 12.0)], "pyspark": [Timing(2.0, 3.0)]}
    entry = query_report("stateless", 1.3, runs)
    assert entry["ratio"] == {"engine": 3.0, "engine_python_steps": 4.0}
    assert entry["cpu_ratio"] == {"engine": 3.0, "engine_python_steps": 4.0}
    lines = summary_lines("stateless", 100_000, 1.3, entry)
    assert lines[0].startswith("stateless, 100,000 JSON records") and "median of 1 run(s)" in lines[0]
    assert "ratio 3.00 (target <= 1.3)" in lines[2] and lines[2].endswith("CPU    9.00 s   ratio 3.00")
    assert len({line.index("CPU") for line in lines[1:]}) == 1  # one column


def test_the_figures_are_the_medians_of_the_runs_and_every_run_is_kept():
    runs = {
        "engine": [Timing(9.0, 1.0), Timing(3.0, 5.0), Timing(4.0, 4.0)],
        "engine_python_steps": [Timing(8.0, 8.0)] * 3,
        "pyspark": [Timing(2.0, 2.0), Timing(1.0, 3.0), Timing(5.0, 1.0)],
    }
    entry = query_report("stateless", 1.3, runs)
    assert entry["seconds"] == {"engine": 4.0, "engine_python_steps": 8.0, "pyspark": 2.0}
    assert entry["cpu_seconds"]["engine"] == 4.0  # the median CPU, not the CPU of the median run
    assert entry["ratio"]["engine"] == 2.0
    assert [r["seconds"] for r in entry["runs"]["engine"]] == [9.0, 3.0, 4.0]
    assert "median of 3 run(s)" in summary_lines("stateless", 10, 1.3, entry)[0]


def test_the_median_has_no_cpu_time_when_a_run_has_none():
    assert median([Timing(1.0, 2.0), Timing(3.0, None)]) == Timing(2.0, None)


def test_without_cpu_times_only_elapsed_times_print():
    runs = {"engine": [Timing(6.0, None)], "engine_python_steps": [Timing(8.0, None)], "pyspark": [Timing(2.0, None)]}
    entry = query_report("group_by", 2.0, runs)
    assert entry["cpu_ratio"] == {"engine": None, "engine_python_steps": None}
    assert not any("CPU" in line for line in summary_lines("group_by", 10, 2.0, entry)[1:])


@needs_proc
def test_the_clock_times_elapsed_and_cpu_seconds_and_can_leave_cpu_out():
    from benchmarks.timing import Clock

    clock = Clock().start()
    subprocess.run([sys.executable, "-c", SPIN], check=True, capture_output=True)
    timing = clock.stop()
    assert timing.seconds >= 0.25 and timing.cpu_seconds is not None and timing.cpu_seconds >= 0.25
    quick = Clock(cpu=False).start().stop()
    assert quick.cpu_seconds is None and quick.seconds >= 0
