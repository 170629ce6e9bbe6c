"""``allocate``, ``show``, ``list``, ``check`` and ``rebuild-index``."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from ..episode import Episode
from ..identity import WeekId, resolve_timezone
from ..store_check import check_store
from ..stores import FileEpisodeStore
from ._common import EXIT, CliError, open_cli_store, print_json
from ._output import OutputFailed, visible

__all__ = ["register"]


def register(commands: Any) -> None:
    p = commands.add_parser("allocate", help="allocate (or get back) the episode a key owns in a week")
    p.add_argument("--key", required=True, help="allocation key, stable across retries of one invocation")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--week", help="ISO week, e.g. 2026-W32")
    when.add_argument("--date", help="ISO date or datetime whose ISO week is meant")
    p.add_argument("--tz", help="time zone of --date (IANA name, default UTC)")
    p.add_argument("--fingerprint", help="hash of the request, bound to the key")
    p.set_defaults(func=_allocate)

    p = commands.add_parser(
        "show", help="one episode as JSON (with its approval: decision, by, at, via, comment, history)"
    )
    p.add_argument("episode_id", help="the episode, e.g. 2026-W32-0")
    p.set_defaults(func=_show)

    p = commands.add_parser("list", help="episodes as a table (or JSON lines)")
    p.add_argument("--week", help="only this ISO week")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_list)

    p = commands.add_parser("check", help="verify the store read-only; exit 1 if anything is wrong")
    p.add_argument("episode_ids", nargs="*", help="only these episodes")
    p.add_argument("--json", action="store_true", help="problems as JSON lines")
    p.add_argument("--manifest", metavar="FILE", help="also verify that nothing this migration manifest lists was lost")
    p.set_defaults(func=_check)

    p = commands.add_parser("rebuild-index", help="rebuild the file store's derived key index and histories")
    p.set_defaults(func=_rebuild_index)


def _week_from_args(args: argparse.Namespace) -> WeekId:
    if args.week is not None:
        if args.tz is not None:
            raise CliError("--tz only applies to --date")
        return WeekId.parse(args.week)
    try:
        parsed = dt.datetime.fromisoformat(args.date)
        moment: dt.date = parsed.date() if len(args.date) == 10 else parsed
    except ValueError as exc:
        raise CliError(f"--date {args.date!r} is not an ISO date or datetime") from exc
    # Resolved here, not by from_datetime: a plain date ignores its zone, yet a bad --tz is still bad input.
    return WeekId.from_datetime(moment, resolve_timezone(args.tz) if args.tz is not None else None)


def _allocate(args: argparse.Namespace) -> int:
    week = _week_from_args(args)
    with open_cli_store(args) as store:
        episode = store.allocate(week, args.key, args.fingerprint)
    try:
        sys.stdout.write(episode.episode_id + "\n")
        sys.stdout.flush()
    except OutputFailed as exc:
        again = f"{episode.episode_id} is allocated for this key: the same command prints it again"
        raise OutputFailed(exc.stream, f"{exc.reason}; {again}") from None
    verb = "reused" if episode.reused else "allocated"
    sys.stderr.write(f"{verb} {episode.episode_id} for key {episode.allocation_key!r}\n")
    return EXIT["ok"]


def _show(args: argparse.Namespace) -> int:
    with open_cli_store(args) as store:
        store.require_existing()  # readers never write: a mistyped store is exit 5 (as for report), never created
        print_json(store.get(args.episode_id).to_dict())
    return EXIT["ok"]


def _list(args: argparse.Namespace) -> int:
    week = WeekId.parse(args.week) if args.week is not None else None
    with open_cli_store(args) as store:
        store.require_existing()  # not "0 episodes": the wrong database says so (exit 5), as report does
        episodes = store.list(week)
    if args.json:
        for episode in episodes:
            print_json(episode.to_dict())
    else:
        sys.stdout.write(format_table(episodes))
    return EXIT["ok"]


def format_table(episodes: list[Episode]) -> str:
    header = ("EPISODE", "STATUS", "DECISION", "SUBMISSION", "COST", "CREATED", "KEY")
    rows = (
        [header]
        + [
            tuple(
                visible(cell)  # stored text: a remote reference or a key may hold what a terminal obeys
                for cell in (
                    e.episode_id,
                    e.status.value,
                    decision_cell(e),
                    e.submission.state.value + (f" {e.submission.remote_ref}" if e.submission.remote_ref else ""),
                    _cost_cell(e),
                    e.created_at[:19].replace("T", " "),
                    e.allocation_key if len(e.allocation_key) <= 60 else e.allocation_key[:57] + "...",
                )
            )
            for e in episodes
        ]
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    footer = f"{len(episodes)} episode{'s' if len(episodes) != 1 else ''}"
    if any(e.submission.cost_anomaly for e in episodes):
        footer += "; COST ? is a cost anomaly: the provider reported no usable cost (see show, check)"
    return "\n".join([*lines, footer]) + "\n"


def decision_cell(episode: Episode) -> str:
    """``approved`` / ``rejected``; ``asked`` while a question waits for its answer; ``-`` when never asked."""
    approval = episode.approval
    if approval.decision is not None:
        return approval.decision.value
    return "asked" if approval.history else "-"


def _cost_cell(episode: Episode) -> str:
    """The recorded cost; ``?`` when the provider reported no usable one (blank means not billed yet)."""
    sub = episode.submission
    if sub.cost is not None:
        return f"{sub.cost:.2f}"
    return "?" if sub.cost_anomaly else ""


def _check(args: argparse.Namespace) -> int:
    from ..migration.manifest import load_manifest

    manifest = load_manifest(args.manifest) if args.manifest else None
    with open_cli_store(args) as store:
        problems = check_store(store, args.episode_ids, manifest)
    for problem in problems:
        if args.json:
            print_json(problem.to_dict())
        else:
            sys.stdout.write(f"{visible(str(problem))}\n")  # one line per problem, whatever it quotes
    if not args.json:
        sys.stderr.write(f"check: {len(problems)} problem{'s' if len(problems) != 1 else ''}\n")
    return EXIT["problems"] if problems else EXIT["ok"]


def _rebuild_index(args: argparse.Namespace) -> int:
    with open_cli_store(args) as store:
        if not isinstance(store, FileEpisodeStore):
            raise CliError("rebuild-index applies to the file store only (the PostgreSQL store has no derived index)")
        store.require_existing()  # a repair of a store that is not there would create an empty one
        count = store.rebuild_index()
    sys.stderr.write(f"rebuilt the index from {count} episodes\n")
    return EXIT["ok"]
