"""``migrate``: legacy weekly-named jobs to versioned episodes (a dry run unless ``--apply``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..identity import has_hidden_characters
from ..migration.apply import MigrationPlan, apply_migration, counted, decision_text, load_key_map, plan_migration
from ..migration.legacy import SkippedSource
from ..stores import FileEpisodeStore
from ._common import EXIT, CliError, open_cli_store
from ._output import visible

__all__ = ["register"]


def register(commands: Any) -> None:
    p = commands.add_parser(
        "migrate",
        help="move legacy weekly-named jobs into the store as versioned episodes (dry run unless --apply)",
    )
    p.add_argument("--from", dest="legacy_dir", required=True, metavar="LEGACY_DIR", help="the legacy directory")
    p.add_argument("--apply", action="store_true", help="execute the plan (default: print it, change nothing)")
    p.add_argument(
        "--key-map",
        metavar="FILE",
        help='JSON {"2026-W30": "<allocation key>"}: give a migrated job its original invocation\'s key',
    )
    p.add_argument("--manifest", metavar="FILE", help="where --apply writes the manifest (default: in the store)")
    p.set_defaults(func=_migrate)


def _migrate(args: argparse.Namespace) -> int:
    # These paths are written into every migrated record and the manifest: no text that hides or forges.
    for option, value in (("--from", args.legacy_dir), ("--manifest", args.manifest), ("--key-map", args.key_map)):
        if value is not None and has_hidden_characters(value):
            raise CliError(f"{option} {value!r}: the path holds control or invisible format characters")
    key_map = load_key_map(Path(args.key_map)) if args.key_map else None
    legacy = Path(args.legacy_dir)
    with open_cli_store(args) as store:
        if not isinstance(store, FileEpisodeStore):
            raise CliError("migrate needs the file store: migrated artifacts are files kept beside each episode")
        if not args.apply:
            plan = plan_migration(store, legacy, key_map)
            _print_plan(plan)
            _print_skipped(plan.skipped)
            if plan.jobs:
                _out("dry run: nothing changed; run again with --apply to migrate")
            return EXIT["problems"] if plan.skipped else EXIT["ok"]
        result = apply_migration(
            store, legacy, key_map, manifest_path=Path(args.manifest) if args.manifest else None, echo=_out
        )
    if not result.plan.jobs:
        _out("nothing to do")
    _print_skipped(result.skipped)
    if result.plan.jobs:
        _out(f"done: {len(result.migrated)} migrated, {len(result.skipped)} skipped; verify with:")
        _out(f"  idempotent-jobs --store {store.location} check --manifest {result.manifest}")
    return EXIT["problems"] if result.skipped else EXIT["ok"]


def _print_plan(plan: MigrationPlan) -> None:
    if not plan.jobs:
        _out("nothing to do")
        return
    _out(f"plan: {counted(len(plan.jobs), 'legacy job')} from {plan.legacy_root}")
    for planned in plan.jobs:
        job = planned.entry.job
        size = sum(f.size for f in job.files)
        costs = job.cost_records
        total = sum(c.amount for c in costs)
        _out(
            f"  {job.week} -> {planned.episode_id}{' (resume)' if planned.resume else ''}"
            f"  key {planned.entry.allocation_key!r}  {'finished' if job.finished else 'unfinished'}"
            f"  {counted(len(job.files), 'file')} ({size} bytes)  {counted(len(job.remote_refs), 'remote reference')}"
            f"  {counted(len(costs), 'cost record')} (total {total:g})  {decision_text(job)}"
        )


def _print_skipped(skipped: list[SkippedSource] | tuple[SkippedSource, ...]) -> None:
    for item in skipped:
        sys.stderr.write(visible(f"skipped {item.where}: {item.reason}") + "\n")


def _out(line: str) -> None:
    sys.stdout.write(visible(line) + "\n")
    sys.stdout.flush()
