"""Java's .properties text, one reader for the server's --config, the CLI's --config-file and the
migrations tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.data.java_properties import parse_properties


def test_java_properties_lines() -> None:
    text = ("# a comment\n! another\nksql.server.url=http://h:8088\n  spaced : value\nbare\n"
            "continued = one \\\n    two\nescaped\\=key=a\\tb\\u0041\nempty=\nblank value\n")
    assert parse_properties(text) == {
        "ksql.server.url": "http://h:8088", "spaced": "value", "bare": "", "continued": "one two",
        "escaped=key": "a\tbA", "empty": "", "blank": "value"}


def test_an_even_number_of_backslashes_ends_the_line() -> None:
    assert parse_properties("path=C:\\\\dir\\\\\nnext=1\n") == {"path": "C:\\dir\\", "next": "1"}


def test_a_later_line_wins_and_a_last_continuation_is_kept() -> None:
    assert parse_properties("a=1\na=2\nb=x\\") == {"a": "2", "b": "x"}


def test_the_server_reads_its_config_file_with_the_same_reader(tmp_path: Path) -> None:
    from engine.server.cli import read_config

    path = tmp_path / "ksql-server.properties"
    path.write_text("ksql.service.id = svc\nlisteners=http://0.0.0.0:8088\nbare\n", encoding="utf-8")
    assert read_config(str(path)) == {"ksql.service.id": "svc", "listeners": "http://0.0.0.0:8088", "bare": ""}
    with pytest.raises(SystemExit, match="cannot read the config file .*absent"):
        read_config(str(tmp_path / "absent"))
