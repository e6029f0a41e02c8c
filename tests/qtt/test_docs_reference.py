"""The docs reference pages are generated from the code: a committed page that differs from
what the code gives now fails here, with the diff and the command that fixes it."""

from __future__ import annotations

import ast

import pytest

from qtt import docs_reference as D


@pytest.mark.parametrize("page", sorted(D.PAGES))
def test_the_committed_page_is_what_the_code_generates(page: str) -> None:
    path = D.DOCS / page
    want = D.PAGES[page]()
    have = path.read_text(encoding="utf-8") if path.exists() else ""
    if have != want:
        import difflib

        diff = "".join(difflib.unified_diff(have.splitlines(keepends=True), want.splitlines(keepends=True),
                                            f"docs/{page} (committed)", f"docs/{page} (generated)"))
        pytest.fail(f"docs/{page} is out of date; regenerate it with `{D.COMMAND}`.\n{diff}", pytrace=False)


def test_a_data_file_that_misses_or_invents_an_entry_is_refused() -> None:
    with pytest.raises(D.ReferenceDataError, match=r"endpoints without an entry in rest\.toml: GET /b; "
                                                   r"rest\.toml names endpoints the code does not have: GET /c\.$"):
        D._agree("endpoints", "rest.toml", {"GET /a", "GET /b"}, {"GET /a", "GET /c"})
    D._agree("endpoints", "rest.toml", {"GET /a"}, {"GET /a"})


def test_the_cli_page_has_every_kspark_and_qtt_subcommand_and_their_options() -> None:
    from engine.cli import build_parser

    page = D.cli_page()
    for name, _, sub in D._subcommands(build_parser()):
        assert f"### `kspark {name}`" in page
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert option in page
    assert "### `qtt conformance`" in page and "#### `qtt plans verify`" in page


def test_every_server_route_is_listed_with_its_method() -> None:
    keys = {e.key for e in D.endpoints()}
    assert {"POST /ksql", "POST /query-stream", "GET /healthcheck", "POST /internal/metastore/write"} <= keys
    page = D.rest_page()
    assert "| POST | `/ksql` |" in page and "| GET | `/status/{command_id:path}` |" in page


def test_property_names_are_read_from_code_not_from_docstrings(tmp_path, monkeypatch) -> None:
    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "m.py").write_text(
        '"""Mentions ksql.only.in.docs."""\nNAME = "ksql.read.here"\n'
        'def f(c):\n    """Also ksql.in.a.docstring."""\n    return c.get("kspark.other.name", 1)\n'
    )
    monkeypatch.setattr(D, "ENGINE", engine)
    monkeypatch.setattr(D, "REPOSITORY", tmp_path)
    assert D.property_names_in_code() == {"ksql.read.here": ["engine/m.py"], "kspark.other.name": ["engine/m.py"]}


def test_error_messages_render_fstrings_with_their_placeholders(tmp_path, monkeypatch) -> None:
    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "e.py").write_text(
        "class KsqlError(Exception):\n    '''Root.'''\n"
        "class BadThing(KsqlError):\n    '''A bad thing.'''\n"
        "def f(name, code):\n"
        "    raise BadThing(f\"Source '{name}' does not exist.\", code=40001)\n"
        "def g():\n    raise BadThing('Plain ' + 'text.')\n"
        "def h(msg):\n    raise BadThing(msg)\n"
    )
    monkeypatch.setattr(D, "ENGINE", engine)
    monkeypatch.setattr(D, "REPOSITORY", tmp_path)
    classes = D.error_classes()
    assert [(c.name, c.base) for c in classes] == [("BadThing", "KsqlError"), ("KsqlError", "Exception")]
    assert [(m.text, m.code) for m in D.error_messages(classes)] == [
        ("Plain text.", ""), ("Source '{name}' does not exist.", "40001")
    ]


def test_render_text_gives_up_on_what_is_not_a_literal() -> None:
    assert D._render_text(ast.parse("x + 'a'", mode="eval").body) is None
    assert D._render_text(ast.parse("f'{a.b!r} c'", mode="eval").body) == "{a.b} c"


def test_step_statuses_cover_every_registered_version() -> None:
    from engine.plan.steps import STEP_TYPES

    statuses = D.step_statuses()
    assert set(statuses) == set(STEP_TYPES)
    assert statuses["streamGroupByJoinedKeyV1"] == D.IMPORT_ONLY
    assert statuses["streamFilterV1"] == D.NATIVE_OFF  # what kspark.native.steps=false plans
    assert D.CURRENT in statuses.values() and D.SAVED_PLANS in statuses.values()


def test_paths_of_this_checkout_are_written_relative_to_the_repository() -> None:
    assert D._portable(f"default {D.REPOSITORY / 'parity'} or {D.REPOSITORY}") == "default parity or ."
