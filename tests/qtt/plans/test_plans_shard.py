"""``qtt plans verify --shard K/N``: how the case folders are split (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qtt.plans.layout import case_dirs
from qtt.plans.verify import parse_shard, shard_case_dirs


def _tree(root: Path, sizes: list[int]) -> list[Path]:
    for i, size in enumerate(sizes):
        for v in range(size):
            (root / f"case_{i:02d}" / f"0.{v}.0_{1795000000000 + v}").mkdir(parents=True)
    return case_dirs(root)


@given(sizes=st.lists(st.integers(1, 8), max_size=12), count=st.integers(1, 4))
def test_shards_partition_the_folders_and_differ_by_at_most_the_largest_case(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], count: int
) -> None:
    dirs = _tree(tmp_path_factory.mktemp("planned"), sizes)
    shards = shard_case_dirs(dirs, count)
    assert len(shards) == count
    assert sorted(d for shard in shards for d in shard) == dirs  # each folder exactly once
    loads = [sum(sizes[dirs.index(d)] for d in shard) for shard in shards]
    assert max(loads) - min(loads) <= max(sizes, default=0)
    assert shard_case_dirs(list(reversed(dirs)), count) == shards  # the same on every process


def test_two_shards_of_a_tree_hold_about_as_many_versions(tmp_path: Path) -> None:
    dirs = _tree(tmp_path, [8, 1, 1, 1, 1, 1, 1, 1, 1])
    first, second = shard_case_dirs(dirs, 2)
    assert first == [tmp_path / "case_00"]  # 8 versions, against 8 folders of one
    assert len(second) == 8


@pytest.mark.parametrize(
    ("text", "problem"),
    [("2", "a shard is K/N, such as 1/2, not '2'"), ("0/2", "K must be between 1 and N"),
     ("3/2", "K must be between 1 and N"), ("a/b", "a shard is K/N")],
)
def test_a_bad_shard_names_the_form(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_shard(text)
    assert parse_shard("2/3") == (2, 3)


def test_the_cli_refuses_a_bad_shard_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from qtt.cli import main

    assert main(["plans", "verify", "--root", str(tmp_path), "--shard", "3/2"]) == 2
    assert capsys.readouterr().err == "qtt: --shard: shard '3/2': K must be between 1 and N\n"
