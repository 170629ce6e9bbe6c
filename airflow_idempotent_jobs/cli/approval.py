"""``approve`` and ``reject``: a person's decision on spending, recorded in the episode (``via: cli``).

Everything given is checked before the store is opened (bad input changes nothing); the decision is
then written by `EpisodeStore.decide` under the store's lock, so a decision already recorded by
someone else (in Airflow or another shell) wins and this command says so instead of overwriting it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Final

from ..approval import validate_actor, validate_comment
from ..episode import Decision, Episode
from ..identity import EpisodeId
from ._common import EXIT, open_cli_store, print_json
from ._output import visible

__all__ = ["VIA", "register"]

#: How a decision taken with this command is recorded (`Approval.via`).
VIA: Final = "cli"


def register(commands: Any) -> None:
    for decision, verb in ((Decision.APPROVED, "approve"), (Decision.REJECTED, "reject")):
        p = commands.add_parser(
            verb,
            help=f"record that spending on an episode is {decision.value} (final; the same again changes nothing)",
        )
        p.add_argument("episode_id", help="the episode, e.g. 2026-W32-0")
        p.add_argument("--by", required=True, help="who decides (recorded and shown with the decision)")
        p.add_argument("--comment", help="why (recorded with the decision)")
        p.add_argument("--json", action="store_true", help="print the episode as JSON (the summary goes to stderr)")
        p.set_defaults(func=_decide, decision=decision)


def _decide(args: argparse.Namespace) -> int:
    episode_id = EpisodeId.parse(args.episode_id)
    by = validate_actor(args.by, "--by")
    comment = validate_comment(args.comment)
    wanted: Decision = args.decision
    with open_cli_store(args) as store:
        before = store.get(episode_id)
        after = store.decide(episode_id, wanted, by=by, via=VIA, comment=comment)
    line = summary(after, recorded_now=_recorded_now(before, after, by, comment))
    if args.json:
        print_json(after.to_dict())
        sys.stderr.write(line + "\n")
    else:
        sys.stdout.write(line + "\n")
    return EXIT["ok"]


def _recorded_now(before: Episode, after: Episode, by: str, comment: str | None) -> bool:
    """Whether this call wrote the decision (not someone earlier, nor a racer between our read and the lock)."""
    recorded = after.approval
    return before.approval.decision is None and (recorded.by, recorded.via, recorded.comment) == (by, VIA, comment)


def summary(episode: Episode, *, recorded_now: bool) -> str:
    """One line: what the episode's record now says, escaped (a name or comment may hold anything printable)."""
    approval = episode.approval
    decision = approval.decision.value if approval.decision is not None else "undecided"
    said = f"; comment: {approval.comment}" if approval.comment else ""
    if recorded_now:
        text = f"{decision} {episode.episode_id}: recorded by {approval.by} at {approval.at} (via {approval.via}){said}"
    else:
        text = (
            f"{episode.episode_id} was already {decision} by {approval.by} at {approval.at} "
            f"(via {approval.via}){said}; nothing changed"
        )
    return visible(text)
