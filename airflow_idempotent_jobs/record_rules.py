"""What ``idempotent-jobs check`` reports, and the record rules every store shares.

A leaf of the core (it imports nothing above identities and the episode model): each store's own
``check`` calls it, and `store_check.check_store` adds the migration's evidence on top.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from .effect import EFFECT_TRANSITIONS, Effect, EffectState
from .episode import TRANSITIONS, Decision, Episode, EpisodeStatus, SubmissionState

__all__ = [
    "CheckReport",
    "DamagedRecord",
    "EpisodeRule",
    "Problem",
    "WeekRead",
    "approval_problems",
    "check_episode_record",
    "effect_problems",
    "unique_keys",
]


@dataclass(frozen=True, order=True)
class Problem:
    """One finding: where it is (a path, a table row, an episode id) and what is wrong."""

    where: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class DamagedRecord:
    """A record a week's read could not read (`StoreCorrupted`): left out, and named instead."""

    #: The episode the damaged file or row belongs to; None when the damage names no one episode
    #: (a week's history file).
    episode_id: str | None
    where: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"episode_id": self.episode_id, "where": self.where, "problem": self.reason}


@dataclass(frozen=True)
class WeekRead:
    """A week as readers that show the rest see it (`EpisodeStore.read_week`): what could be read, what not."""

    #: In sequence order.
    episodes: list[Episode]
    #: In sequence order, damage that names no episode first.
    damaged: list[DamagedRecord] = field(default_factory=list)


#: An extra rule a store's check runs on every episode it reads, with where the record lives.
EpisodeRule = Callable[[Episode, str], "list[Problem]"]


@dataclass
class CheckReport:
    """What a store's own ``check`` found, and the episodes it could read (for rules that span them)."""

    #: Every problem found, in the order found.
    problems: list[Problem] = field(default_factory=list)
    #: Every episode whose record could be read: the named ones, or all of the store.
    episodes: list[Episode] = field(default_factory=list)


def check_episode_record(episode: Episode, where: str) -> list[Problem]:
    """Rules every store shares: a legal submission record, an approval and effects that agree with themselves."""
    problems = _submission_problems(episode, where)
    problems += approval_problems(episode, where)
    problems += effect_problems(episode, where)
    return problems


def _submission_problems(episode: Episode, where: str) -> list[Problem]:
    problems: list[Problem] = []
    sub = episode.submission
    current = SubmissionState.NONE
    for step in sub.history:
        try:
            frm, to = SubmissionState(step.get("from")), SubmissionState(step.get("to"))
        except ValueError:
            problems.append(Problem(where, f"submission history has an unknown state in {dict(step)}"))
            return problems
        if frm is not current:
            problems.append(Problem(where, f"submission history leaves {frm.value} but was in {current.value}"))
        if to not in TRANSITIONS[frm]:
            problems.append(Problem(where, f"submission history moves illegally from {frm.value} to {to.value}"))
        current = to
    if sub.history and current is not sub.state:
        problems.append(Problem(where, f"submission state {sub.state.value} disagrees with its history"))
    if sub.state in (SubmissionState.ACCEPTED, SubmissionState.SUCCEEDED) and not sub.remote_ref:
        problems.append(Problem(where, f"submission is {sub.state.value} but has no remote reference"))
    if sub.cost is not None and sub.cost < 0:  # the record reader refuses these; kept for other readers
        problems.append(Problem(where, f"negative cost {sub.cost}"))
    if sub.cost_anomaly is not None:
        problems.append(
            Problem(
                where, f"cost anomaly: {sub.cost_anomaly} (not recorded as its cost; the budget counts the estimate)"
            )
        )
    return problems


def approval_problems(episode: Episode, where: str) -> list[Problem]:
    """A decision that its history, the episode's status or its submission contradicts.

    A store writes decisions only through `approval.decided`, so each of these means someone
    wrote the record by hand, or a writer that bypassed the lock: the gate can no longer be trusted.
    """
    problems: list[Problem] = []
    approval, name = episode.approval, episode.episode_id
    decisions = [(n, entry) for n, entry in enumerate(approval.history) if entry["event"] != "asked"]
    if len(decisions) > 1:
        problems.append(Problem(where, f"episode {name}: approval history holds {len(decisions)} decisions"))
    if approval.decision is None and decisions:
        problems.append(Problem(where, f"episode {name}: approval history decides but no decision is recorded"))
    if approval.decision is not None:
        recorded = {"event": approval.decision.value, **{k: getattr(approval, k) for k in _DECISION_FIELDS}}
        if not decisions:
            problems.append(
                Problem(where, f"episode {name}: approval decision {recorded['event']} is not in its history")
            )
        elif dict(decisions[0][1]) != recorded:
            problems.append(Problem(where, f"episode {name}: approval decision disagrees with its history's entry"))
        if decisions and decisions[-1][0] != len(approval.history) - 1:
            problems.append(Problem(where, f"episode {name}: approval history goes on after its decision"))
    rejected = approval.decision is Decision.REJECTED
    if (episode.status is EpisodeStatus.REJECTED) != rejected:
        problems.append(
            Problem(
                where,
                f"episode {name}: status {episode.status.value} disagrees with approval decision "
                f"{approval.decision.value if approval.decision else 'none'}",
            )
        )
    if rejected and episode.submission.state is not SubmissionState.NONE:
        problems.append(
            Problem(where, f"episode {name}: rejected but its submission is {episode.submission.state.value}")
        )
    return problems


def effect_problems(episode: Episode, where: str) -> list[Problem]:
    """Effects whose own fields contradict each other or their history.

    `effects.ledger.EffectLedger` writes none of these: each means a record written by hand or by a
    writer that bypassed the ledger, and a retry could run the effect again, or never.
    """
    problems: list[Problem] = []
    for name, effect in episode.effects.items():
        said = f"episode {episode.episode_id}: effect {name}"
        problems += [Problem(where, f"{said}: {finding}") for finding in _effect_findings(effect)]
    return problems


def _effect_findings(effect: Effect) -> list[str]:
    findings: list[str] = []
    state = effect.state.value
    if not effect.token:
        findings.append(f"{state} without a token")
    if effect.state is EffectState.PENDING and not (effect.claimed_by and effect.claimed_at):
        findings.append("pending without claimed_by and claimed_at (no one can tell whether its runner is alive)")
    settled = [effect.settled_by, effect.settled_at, effect.settled_how]
    if any(v is not None for v in settled) and any(v is None for v in settled):
        findings.append("settled_by, settled_at and settled_how are partly set")
    current: EffectState | None = None
    runs = 0
    for n, step in enumerate(effect.history):
        try:
            frm = None if step.get("from") is None else EffectState(step.get("from"))
            to = EffectState(step.get("to"))
        except ValueError:
            findings.append(
                f"history entry {n} has an unknown state: from {step.get('from')!r:.40} to {step.get('to')!r:.40}"
            )
            return findings
        if frm is not current:
            findings.append(f"history leaves {_shown(frm)} but was in {_shown(current)}")
        if to not in EFFECT_TRANSITIONS[frm]:
            findings.append(f"history moves illegally from {_shown(frm)} to {to.value}")
        if to is EffectState.PENDING:  # each run writes its pending intent first
            runs += 1
        current = to
    if current is not effect.state:
        findings.append(f"state {state} disagrees with its history, which ends in {_shown(current)}")
    if effect.attempts < runs:
        findings.append(f"attempts {effect.attempts} is fewer than the {runs} runs its history records")
    return findings


def _shown(state: EffectState | None) -> str:
    return "nothing" if state is None else state.value


#: The fields a decision's history entry repeats besides its event.
_DECISION_FIELDS = ("by", "at", "comment", "via")


def unique_keys(episodes: Iterable[Episode]) -> list[Problem]:
    """A key held by more than one episode is a problem: allocation would refuse it."""
    seen: dict[str, list[str]] = {}
    for episode in episodes:
        seen.setdefault(episode.allocation_key, []).append(episode.episode_id)
    return [
        Problem(", ".join(sorted(ids)), f"allocation key {key!r} is held by {len(ids)} episodes")
        for key, ids in seen.items()
        if len(ids) > 1
    ]
