"""The rolling-upgrade run's checks (``ci/rolling_upgrade.py``) find what they are meant to find.

The run itself is long (``nox -s upgrade``); these check its comparisons and its input on
their own, without Spark or Kafka.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "ci" / "rolling_upgrade.py"
_spec = importlib.util.spec_from_file_location("rolling_upgrade", SCRIPT)
assert _spec is not None and _spec.loader is not None
upgrade = importlib.util.module_from_spec(_spec)
sys.modules["rolling_upgrade"] = upgrade
_spec.loader.exec_module(upgrade)


def item(key: str, value: dict | None, window: int | None = None) -> tuple:
    return upgrade._canonical(key, value, window)


def test_a_stream_output_counts_lost_and_repeated_records() -> None:
    expected = [item("a", {"SEQ": 1}), item("b", {"SEQ": 2}), item("a", {"SEQ": 3})]
    actual = [item("a", {"SEQ": 1}), item("a", {"SEQ": 1}), item("a", {"SEQ": 3})]
    result = upgrade.compare("stream", expected, actual)
    assert (result["lost"], result["repeated"]) == (1, 1)


def test_final_windows_differ_by_window_start() -> None:
    expected = [item("a", {"N": 2}, 0), item("a", {"N": 2}, 10_000)]
    actual = [item("a", {"N": 2}, 0), item("a", {"N": 2}, 0)]
    result = upgrade.compare("final", expected, actual)
    assert (result["lost"], result["repeated"]) == (1, 1)


def test_a_table_is_compared_by_its_last_value_per_key() -> None:
    expected = [item("a", {"N": 1}), item("a", {"N": 2}), item("b", {"N": 1})]
    coalesced = [item("a", {"N": 2}), item("b", {"N": 1})]
    assert upgrade.compare("table", expected, coalesced)["lost"] == 0
    wrong = [item("a", {"N": 3}), item("b", {"N": 1})]
    assert upgrade.compare("table", expected, wrong)["lost"] == 1


def test_a_table_count_written_twice_reads_as_repeated() -> None:
    expected = [item("a", {"N": 1}), item("a", {"N": 2})]
    replayed = [item("a", {"N": 1}), item("a", {"N": 2}), item("a", {"N": 2})]
    assert upgrade.compare("table", expected, replayed)["repeated"] == 1


def test_orders_have_increasing_timestamps_and_a_flush_passes_their_windows() -> None:
    orders = [upgrade.order(seq) for seq in range(50)]
    times = [o["timestamp"] for o in orders]
    assert times == sorted(set(times))
    first, second = upgrade.flush(50), upgrade.flush(50, 1)
    assert second["timestamp"] == first["timestamp"] + 1
    assert first["timestamp"] - times[-1] >= 10_000  # past the end of the last order's 10 s window
