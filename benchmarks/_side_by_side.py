"""What the side-by-side benchmarks share: a throwaway migrated Airflow home, one runner process, the
table printed with a note and the times, ``--json`` and ``--keep``."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = ["side_by_side_main"]


def side_by_side_main(
    argv: list[str] | None,
    *,
    prog: str,
    doc: str,
    sources: Iterable[Path],
    launch: Callable[[Any], dict[str, Any]],
    table: Callable[[dict[str, Any]], str],
    note: str,
) -> int:
    """Parse ``argv``, run ``launch`` on a home holding ``sources``, print ``table(results)``, ``note`` and
    the times; the home is deleted afterwards unless ``--keep``."""
    from tests.airflow.llm_side_by_side_scenarios import migrated_home

    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the runner's whole results here")
    parser.add_argument("--keep", action="store_true", help="keep the Airflow home (its log: work/scenarios.log)")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix=Path(prog).stem.replace("_", "-") + "-"))
    try:
        started = time.monotonic()
        where = migrated_home(home, sources)
        migrated = time.monotonic()
        results = launch(where)
        done = time.monotonic()
        print(table(results))
        print(
            f"\n{note}\nMigrating the metadata database {migrated - started:.0f} s, the runs {done - migrated:.0f} s."
        )
        if args.json is not None:
            args.json.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    finally:
        if args.keep:
            print(f"home kept: {home}", file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)
    return 0
