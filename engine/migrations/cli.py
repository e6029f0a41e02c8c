"""``kspark migrations``: the argparse front of ksqlDB's migrations tool.

    kspark migrations new-project DIR URL
    kspark migrations --config-file DIR/ksql-migrations.properties initialize-metadata
    kspark migrations -c F create Add_users
    kspark migrations -c F apply --all | --next | --until V | --version V [--dry-run] [--define k=v]
    kspark migrations -c F info | validate | destroy-metadata

``--config-file`` (``-c``) goes before or after the command's name, as ksqlDB's tool takes it.
A failure prints one line on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from engine.cli import positive_seconds
from engine.migrations import commands
from engine.migrations.client import ServerClient
from engine.migrations.config import MigrationConfig
from engine.migrations.errors import MigrationError

_CONFIG_HELP = "path to the migrations configuration file (all commands but new-project)"


def _version(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a version number: {text!r}") from None
    if not 1 <= value <= 999_999:
        raise argparse.ArgumentTypeError(f"a version is between 1 and 999999, not {value}")
    return value


def add_parser(sub: argparse._SubParsersAction, help: str) -> None:  # type: ignore[type-arg]
    """Register ``migrations`` and its commands on the ``kspark`` parser."""
    top = sub.add_parser("migrations", help=help,
                         description="Manage migrations of a kspark (or ksqlDB) server's metadata schema, "
                                     "as ksqlDB's ksql-migrations tool does.")
    top.add_argument("-c", "--config-file", dest="config_file_global", metavar="FILE", help=_CONFIG_HELP)
    actions = top.add_subparsers(dest="migrations_command", required=True, metavar="COMMAND")

    def action(name: str, text: str) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=text, description=text)
        parser.add_argument("-c", "--config-file", dest="config_file", metavar="FILE", default=None,
                            help="the migrations configuration file (here or before the command's name)")
        return parser

    new = action("new-project", "create a migrations project: its directory and configuration file")
    new.add_argument("project_path", metavar="DIR", help="the project's root directory")
    new.add_argument("server_url", metavar="URL", help="the server's address, e.g. http://localhost:8088")
    action("initialize-metadata", "create the migrations metadata stream and table on the server")
    create = action("create", "create a blank migration file, the next version by default")
    create.add_argument("description", metavar="NAME", help="the migration's description (spaces become _)")
    create.add_argument("-v", "--version", type=_version, default=None, help="the version to create")
    apply = action("apply", "apply migration files to the server")
    target = apply.add_mutually_exclusive_group(required=True)
    target.add_argument("-a", "--all", action="store_true", help="run all available migrations")
    target.add_argument("-n", "--next", action="store_true", help="run the next available migration")
    target.add_argument("-u", "--until", type=_version, metavar="V", help="run the migrations up through version V")
    target.add_argument("-v", "--version", type=_version, metavar="V", help="run the migration of version V")
    apply.add_argument("--dry-run", action="store_true",
                       help="print which files (and statements) would run; send no statement to the server")
    apply.add_argument("-d", "--define", action="append", default=[], metavar="NAME=VALUE",
                       help="a variable, as if DEFINEd before each migration (repeatable)")
    apply.add_argument("--headers", metavar="FILE", help="a properties file of HTTP headers sent with every request")
    apply.add_argument("--state-timeout", type=positive_seconds, default=commands.STATE_TIMEOUT_SECONDS, metavar="SECONDS",
                       help="how long to wait for the metadata table to show a state written to the stream "
                            f"(kspark's; default {commands.STATE_TIMEOUT_SECONDS:g})")
    action("info", "print the current version and the state of every migration file")
    action("validate", "check the applied migrations' checksums against the local files")
    action("destroy-metadata", "drop the metadata stream and table and their topics (not reversible)")


def _say(line: str) -> None:
    print(line, flush=True)


def _config_file(args: argparse.Namespace) -> str | None:
    return args.config_file or args.config_file_global


def _with_client(args: argparse.Namespace, body: Callable[[MigrationConfig, ServerClient], object],
                 headers: dict[str, str] | None = None) -> None:
    path = _config_file(args)
    if not path or not path.strip():
        raise MigrationError("Migrations config file required but not specified. "
                             "Specify with --config-file (or, equivalently, -c).")
    config = MigrationConfig.load(path)
    with ServerClient(config, headers=headers) as client:
        client.server_info()  # as ksqlDB's tool, which asks the server for its service id first
        body(config, client)


def _dispatch(args: argparse.Namespace) -> None:
    command = args.migrations_command
    if command == "new-project":
        if _config_file(args):
            raise MigrationError("This command does not expect a config file to be passed. Rather, this command "
                                 "will create one as part of preparing the migrations directory.")
        commands.new_project(Path(args.project_path), args.server_url, _say)
    elif command == "create":
        path = _config_file(args)
        if not path:
            raise MigrationError("Migrations config file required but not specified. "
                                 "Specify with --config-file (or, equivalently, -c).")
        commands.create(MigrationConfig.load(path), args.description, args.version, _say)
    elif command == "initialize-metadata":
        _with_client(args, lambda c, k: commands.initialize_metadata(c, k, _say))
    elif command == "destroy-metadata":
        _with_client(args, lambda c, k: commands.destroy_metadata(c, k, _say))
    elif command == "info":
        _with_client(args, lambda c, k: commands.info(c, k, _say))
    elif command == "validate":
        _with_client(args, lambda c, k: commands.validate_command(c, k, _say))
    elif command == "apply":
        target = commands.Target(all=args.all, next=args.next, until=args.until, version=args.version)
        defines = commands.parse_defines(args.define)
        _with_client(args, lambda c, k: commands.Applier(c, k, defines=defines, dry_run=args.dry_run,
                                                         say=_say, state_timeout=args.state_timeout).run(target),
                     headers=commands.load_headers(args.headers))
    else:  # pragma: no cover - argparse admits only the commands above
        raise AssertionError(f"unknown migrations command {command!r}: a bug in the parser")


def run(args: argparse.Namespace) -> int:
    """Run the parsed ``kspark migrations`` command; 0, or 1 after one line on stderr."""
    started = time.monotonic()
    try:
        _dispatch(args)
        status = 0
    except MigrationError as exc:
        print(f"kspark migrations: {exc}", file=sys.stderr, flush=True)
        status = 1
    _say(f"Execution time: {time.monotonic() - started:.4f} seconds")
    return status
