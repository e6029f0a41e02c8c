"""``qtt parity``: regenerate the parity tables from an unpacked ksqlDB source tree."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from qtt.parity import (
    COMPATIBILITY_PAGE,
    PARITY_DIR,
    compatibility_page,
    load_tables,
    totals,
    write_table,
)


def add_parser(sub: Any) -> None:
    parity = sub.add_parser("parity", help="Regenerate the parity tables (parity/) from ksqlDB's sources.")
    parity.add_argument("--ksqldb-src", required=True, metavar="DIR",
                        help="ksqlDB's sources, unpacked (the folder holding ksqldb-parser/, ksqldb-engine/, ...)")
    parity.add_argument("--table", action="append", metavar="NAME", help="only this table (repeatable)")
    parity.add_argument("--out", default=str(PARITY_DIR), metavar="DIR", help="where to write (default parity/)")
    parity.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    src = Path(args.ksqldb_src)
    if not src.is_dir():
        print(f"qtt: --ksqldb-src {src} is not a folder.", file=sys.stderr)
        return 2
    tables = load_tables()
    names = args.table or sorted(tables)
    unknown = [n for n in names if n not in tables]
    if unknown:
        print(f"qtt: unknown parity table {unknown[0]!r}; known: {', '.join(sorted(tables))}.", file=sys.stderr)
        return 2
    for name in names:
        rows = list(tables[name](src))
        write_table(name, rows, Path(args.out))
        counts = totals(rows)
        print(f"{name}: {counts['covered']} covered, {counts['reasoned']} reasoned, "
              f"{counts['missing']} missing of {len(rows)}")
    if Path(args.out) == PARITY_DIR:
        COMPATIBILITY_PAGE.write_text(compatibility_page(), encoding="utf-8")
        print(f"wrote {COMPATIBILITY_PAGE.relative_to(PARITY_DIR.parent)}")
    return 0
