"""The soak benchmark's own logic: its queries, stages, output checks and sampling (no server)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from benchmarks import soak
from engine.kafka.consume import ConsumedRecord


def _record(offset: int, value: dict | None, key: bytes | None = None, partition: int = 0) -> ConsumedRecord:
    return ConsumedRecord(topic="t", partition=partition, offset=offset, timestamp=0, key=key,
                          value=None if value is None else json.dumps(value).encode())


def test_the_queries_take_the_four_kinds_in_turn_and_each_writes_its_own_topic() -> None:
    made = [soak.query_statement(n) for n in range(1, 9)]
    assert [kind for kind, _ in made] == list(soak.KINDS) * 2
    assert all(f"KAFKA_TOPIC='soak_q{n}'" in text and f" Q{n} " in text for n, (_, text) in enumerate(made, 1))
    assert "GROUP BY G" in made[1][1] and "WINDOW TUMBLING" in made[2][1] and "LEFT JOIN DIM" in made[3][1]


def test_stages_are_one_five_and_all() -> None:
    assert soak.stages(20) == [1, 5, 20]
    assert soak.stages(5) == [1, 5]
    assert soak.stages(3) == [1, 3]


def test_a_stream_output_must_hold_every_input_record_once() -> None:
    exact = [_record(n, {"N": n, "G": n % 8}) for n in range(4)]
    assert soak.output_problems("stateless", "q", exact, 4) == []
    missing_and_repeated = [_record(0, {"N": 0}), _record(1, {"N": 0}), _record(2, {"N": 9})]
    assert soak.output_problems("stateless", "q", missing_and_repeated, 2) == [
        "q: lost 1", "q: duplicated 1", "q: unexpected 1"]


def test_a_join_output_must_name_each_records_group() -> None:
    joined = [_record(0, {"N": 0, "NAME": "g0"}), _record(1, {"N": 1, "NAME": "g2"})]
    assert soak.output_problems("join", "q", joined, 2) == ["q: joined wrongly 1"]


def test_an_aggregates_latest_counts_per_key_must_add_up_to_the_input() -> None:
    a, b = struct.pack(">i", 0), struct.pack(">i", 1)
    updates = [_record(0, {"C": 1}, a), _record(1, {"C": 1}, b), _record(2, {"C": 3}, a), _record(3, {"C": 2}, b)]
    assert soak.output_problems("aggregate", "q", updates, 5) == []
    assert soak.output_problems("window", "q", updates, 6) == ["q: the latest counts add up to 5, not 6"]
    with_tombstone = [*updates, _record(4, None, a)]
    assert soak.output_problems("aggregate", "q", with_tombstone, 5) == []


def test_the_process_tree_of_this_process_is_sampled() -> None:
    usage = soak.tree_usage(os.getpid())
    assert usage["rss_mib"] > 1 and usage["threads"] >= 1 and usage["open_files"] >= 1
    assert soak.tree_usage(2**22 + 12345) == {"rss_mib": 0.0, "threads": 0, "open_files": 0}


def test_a_directory_is_measured_in_mib(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x" * 2**20)
    assert soak.directory_mib(tmp_path) == 1.0


def test_the_plot_is_a_png(tmp_path: Path) -> None:
    samples = [{"minute": m, "rss_mib": 900 + m, "threads": 200, "open_files": 300, "state_mib": 1.5,
                "lag": None if m == 1 else 0} for m in range(4)]
    soak.plot(samples, {"restart": 2.0}, tmp_path / "soak.png")
    assert (tmp_path / "soak.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_benchmarks_page_shows_the_newest_soak_runs_plot(tmp_path: Path) -> None:
    from benchmarks.page import render
    from benchmarks.report import Run, append_history

    run = Run("soak", load={"minutes": 1})
    run.check_outputs("outputs exact")
    run.figure("rss_mib steady end", 900.0, unit="MiB")
    append_history(run.to_json({"plot": "soak.png"}), tmp_path)
    page = render(tmp_path)
    assert "## A soak of one server" in page
    assert "![soak: the run's samples](soak.png)" in page
