"""The read-only verifier behind ``idempotent-jobs check``: it reports, it never repairs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .episode import TRANSITIONS, Episode, SubmissionState
from .errors import InvalidIdentifier
from .identity import EpisodeId
from .stores.base import EpisodeStore

if TYPE_CHECKING:
    from .manifest import Manifest

__all__ = ["Problem", "check_episode_record", "check_store"]


@dataclass(frozen=True, order=True)
class Problem:
    """One finding: where it is (a path, a table row, an episode id) and what is wrong."""

    where: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def check_episode_record(episode: Episode, where: str) -> list[Problem]:
    """Rules every store shares: a legal submission record that agrees with itself, and for a
    migrated episode, a migration record that agrees with the episode and its cost records."""
    from .manifest import check_migration_record

    problems = check_migration_record(episode, where)
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
    if sub.cost is not None and sub.cost < 0:
        problems.append(Problem(where, f"negative cost {sub.cost}"))
    return problems


def check_store(
    store: EpisodeStore, episode_ids: Sequence[str] = (), manifest: Manifest | None = None
) -> list[Problem]:
    """Every problem found in ``store`` (or in the named episodes), sorted; empty means healthy.

    With ``manifest``, also that nothing the manifest lists was lost. Invalid ids among
    ``episode_ids`` raise `InvalidIdentifier` before anything is read. Never writes, never locks.
    Each store checks itself (``store.check``): what a healthy layout is differs by backend.
    """
    ids = [EpisodeId.parse(text) for text in episode_ids]
    checker = getattr(store, "check", None)
    if checker is None:
        raise InvalidIdentifier("store", store.location, "this store cannot be checked")
    problems: list[Problem] = checker(ids, manifest)
    return sorted(problems)


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
