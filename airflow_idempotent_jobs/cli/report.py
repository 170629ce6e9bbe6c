"""``report``: per week, counts by state (effects' too), spend against a budget, and what needs a person.

The figures come from the same read model as Airflow's page (`operations.week_view`), so the
two never disagree. ``--json`` writes one line per week holding exactly the object the page's API
returns for that week. Read-only: a store that does not exist is exit 5, not created; exit 0
whatever the weeks hold (attention is information), except a damaged record: every week is still
reported, the damaged records named and left out of the figures, then one line and exit 5.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from ..episode import amount_problem
from ..errors import StoreCorrupted
from ..identity import WeekId, resolve_timezone
from ..operations import MAX_WEEKS, week_view
from ._common import EXIT, CliError, open_cli_store, print_json
from ._output import visible

__all__ = ["register"]


def register(commands: Any) -> None:
    p = commands.add_parser(
        "report",
        help="per week: counts by state, spend against a budget, stuck submissions and effects with their commands",
        description=(
            "Weeks oldest first (default: the current ISO week). Needs attention: every unknown "
            "submission or effect, and every submitting or pending claim older than the lease, with the "
            "reconcile command."
        ),
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--week", help="one ISO week, e.g. 2026-W32")
    which.add_argument("--from", dest="first", metavar="WEEK", help="first week of a range (with --to)")
    p.add_argument("--to", dest="last", metavar="WEEK", help="last week of a range (with --from)")
    p.add_argument("--budget", type=_budget, help="weekly budget to report spend against")
    p.add_argument("--tz", help="time zone that decides the current week (IANA name, default UTC)")
    p.add_argument("--json", action="store_true", help="one JSON object per week (the page API's week object)")
    p.set_defaults(func=_report)


def _budget(text: str) -> float:
    """A budget's rule (`episode.amount_problem`: finite, >= 0, and ``-0`` is no budget either)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a budget is a number, not {text!r}") from None
    if amount_problem(value):
        raise argparse.ArgumentTypeError(f"a budget is a finite number >= 0, not {text!r}")
    return value


def _weeks(args: argparse.Namespace, now: dt.datetime) -> list[WeekId]:
    if (args.first is None) != (args.last is None):
        raise CliError("--from and --to go together")
    if args.first is None:
        return [WeekId.parse(args.week) if args.week is not None else WeekId.from_datetime(now, now.tzinfo)]
    first, last = WeekId.parse(args.first), WeekId.parse(args.last)
    if first > last:
        raise CliError(f"--from {first} is after --to {last}")
    span = (last.monday() - first.monday()).days // 7 + 1
    if span > MAX_WEEKS:
        raise CliError(f"{first} to {last} is {span} weeks; a report covers at most {MAX_WEEKS}")
    return [WeekId.from_date(first.monday() + dt.timedelta(weeks=n)) for n in range(span)]


def _report(args: argparse.Namespace) -> int:
    now = dt.datetime.now(resolve_timezone(args.tz) if args.tz is not None else dt.timezone.utc)
    weeks = _weeks(args, now)  # bad input exits 2 before the store is opened
    with open_cli_store(args) as store:
        store.require_existing()  # a mistyped store is an error (exit 5), never a new empty store
        views = [week_view(store, week, budget=args.budget, now=now) for week in weeks]
    for view in views:
        if args.json:
            print_json(view)
        else:
            sys.stdout.write(format_week(view))
    damaged = [damage for view in views for damage in view["damaged"]]
    if damaged:
        first = damaged[0]
        more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
        raise StoreCorrupted(
            first["where"], f"{first['problem']}{more}; the figures leave them out; see idempotent-jobs check"
        )
    return EXIT["ok"]


def format_week(view: dict[str, Any]) -> str:
    """One week as a few lines of text; stored text escaped (`visible`)."""
    episodes = len(view["episodes"])
    spend = f"spend {view['spend']:.2f}"
    if view["budget"] is not None:
        spend += f" of budget {view['budget']:.2f}"
    if view["spend_unknown"]:
        spend += f" (not counted, cost unknowable: {', '.join(view['spend_unknown'])})"
    lines = [f"{view['week_id']}  {episodes} episode{'s' if episodes != 1 else ''}  {spend}"]
    for field in ("status", "submission", "decision", "effect"):
        counts = ", ".join(f"{name} {n}" for name, n in view["counts"][field].items() if n)
        lines.append(f"  {field + ':':<12}{counts or '-'}")
    attention = view["attention"]
    lines.append(f"  needs attention: {len(attention) or 'nothing'}")
    for entry in attention:
        lines.append(f"    {entry['episode_id']}  {visible(entry['reason'])}")
        lines.append(f"      {entry['command']}")
    if view["damaged"]:
        lines.append(f"  damaged, not counted: {len(view['damaged'])}")
        for damage in view["damaged"]:
            lines.append(f"    {damage['episode_id'] or '-'}  {visible(damage['where'])}: {visible(damage['problem'])}")
    return "\n".join(lines) + "\n"
