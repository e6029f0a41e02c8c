"""Migration files: names, versions, checksums, order, and the statement splitter."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.migrations import files as F
from engine.migrations.errors import MigrationError


def test_a_file_name_gives_version_and_name_with_spaces_for_underscores(tmp_path: Path) -> None:
    found = F.parse_file_name(tmp_path, "V000012__Add_users_table.sql")
    assert found == F.MigrationFile(version=12, name="Add users table", path=tmp_path / "V000012__Add_users_table.sql")


@pytest.mark.parametrize("name", ["V12__short.sql", "V000001_one_underscore.sql", "V000001__x.txt", "notes.md"])
def test_other_names_are_skipped(tmp_path: Path, name: str) -> None:
    assert F.parse_file_name(tmp_path, name) is None


def test_version_zero_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match="MigrationFile file versions must be positive. Found: V000000__x.sql"):
        F.parse_file_name(tmp_path, "V000000__x.sql")


def test_new_file_names_pad_the_version_and_replace_what_file_systems_refuse() -> None:
    assert F.new_file_name(2, "Add users") == "V000002__Add_users.sql"
    assert F.new_file_name(999999, 'a/b\\c:d*e?f"g<h>i|j\tk') == "V999999__a_b_c_d_e_f_g_h_i_j_k.sql"


def test_the_checksum_is_the_md5_of_the_bytes_in_lower_case_hex(tmp_path: Path) -> None:
    path = tmp_path / "V000001__x.sql"
    path.write_bytes(b"CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');\r\n")
    assert F.checksum(path) == hashlib.md5(path.read_bytes()).hexdigest()
    assert len(F.checksum(path)) == 32 and F.checksum(path) == F.checksum(path).lower()
    empty = tmp_path / "V000002__empty.sql"
    empty.write_bytes(b"")
    assert F.checksum(empty) == "d41d8cd98f00b204e9800998ecf8427e"


def test_the_checksum_changes_with_one_byte(tmp_path: Path) -> None:
    path = tmp_path / "V000001__x.sql"
    path.write_text("SELECT 1;\n")
    before = F.checksum(path)
    path.write_text("SELECT 1; \n")
    assert F.checksum(path) != before


def test_migrations_come_in_version_order_and_two_of_one_version_are_refused(tmp_path: Path) -> None:
    for name in ("V000010__ten.sql", "V000002__two.sql", "README.md", "V000001__one.sql"):
        (tmp_path / name).write_text("")
    (tmp_path / "V000003__a_directory.sql").mkdir()
    assert [m.version for m in F.all_migrations(tmp_path)] == [1, 2, 10]
    assert F.migration_for_version(tmp_path, 2).name == "two"
    assert F.migration_for_version(tmp_path, 4) is None
    (tmp_path / "V000002__also_two.sql").write_text("")
    with pytest.raises(MigrationError, match="Found multiple migration files with the same version. Version: 2"):
        F.all_migrations(tmp_path)


def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match="no-such is not a directory."):
        F.all_migrations(tmp_path / "no-such")


def test_the_splitter_drops_comments_and_keeps_quoted_text() -> None:
    text = ("-- first\nCREATE STREAM S (A STRING) WITH (KAFKA_TOPIC='a;b', VALUE_FORMAT='JSON');\n"
            "/* two;\n lines */INSERT INTO S (A) VALUES ('it''s -- not a comment');\n")
    assert F.split_statements(text) == [
        "CREATE STREAM S (A STRING) WITH (KAFKA_TOPIC='a;b', VALUE_FORMAT='JSON');",
        "\nINSERT INTO S (A) VALUES ('it''s -- not a comment');",
    ]


@pytest.mark.parametrize(("text", "message"), [
    ("CREATE STREAM S;\nDROP STREAM S", "Unmatched command at end of file; missing semicolon: '\nDROP STREAM S'"),
    ("INSERT INTO S VALUES ('open);", "Invalid sql - failed to find closing token '''"),
    ("/* never closed; ", "Invalid sql - failed to find closing token '*/'"),
])
def test_the_splitter_refuses_unfinished_text(text: str, message: str) -> None:
    with pytest.raises(MigrationError) as raised:
        F.split_statements(text)
    assert str(raised.value) == message


@given(st.lists(st.text(alphabet="abcXYZ ()=,\n", min_size=1, max_size=20), min_size=1, max_size=5))
def test_statements_joined_by_semicolons_split_back(bodies: list[str]) -> None:
    assert F.split_statements("".join(b + ";" for b in bodies)) == [b + ";" for b in bodies]
