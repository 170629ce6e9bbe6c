"""Which of a week's episodes the page lists, in which order, one page at a time.

The page filters by status, submission state, decision and owning DAG, searches episode ids, keys,
tokens and remote refs, sorts by any column, and pages through a week of thousands of episodes;
totals, counts and "needs attention" stay of the whole week (`operations.week_view`). Every value
comes from the query string, so each is checked and a bad one is `InvalidIdentifier` (400).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .effect import EffectState
from .episode import Episode, EpisodeStatus, SubmissionState
from .errors import InvalidIdentifier

__all__ = ["DECISIONS", "MAX_PER_PAGE", "SORTS", "RowQuery", "decision_of", "select"]

#: The longest page the API serves, and its default.
MAX_PER_PAGE: Final = 500
DEFAULT_PER_PAGE: Final = 100
#: The longest search text.
MAX_SEARCH: Final = 200
#: Row and count values for the approval gate: a decision, ``asked`` while one is awaited, ``none``.
DECISIONS: Final = ("approved", "rejected", "asked", "none")
#: The effects filter: an episode with at least one effect in that state.
_EFFECTS: Final = tuple(s.value for s in EffectState)


def decision_of(episode: Episode) -> str:
    """One of `DECISIONS` (the read model's rows and counts use it too: `operations`)."""
    if episode.approval.decision is not None:
        return episode.approval.decision.value
    return "asked" if episode.approval.history else "none"


def _owner_dag(episode: Episode) -> str:
    """The recorded owner's DAG ('' for none): a DAG read from the key proves nothing, so it files nothing."""
    owner = episode.allocated_by
    return "" if owner is None else owner.dag_id


#: Each sortable column, by its row key, and the value it sorts by (None sorts last).
SORTS: Final[Mapping[str, Callable[[Episode], Any]]] = {
    "episode_id": lambda e: e.sequence,
    "status": lambda e: e.status.value,
    "submission_state": lambda e: e.submission.state.value,
    "remote_ref": lambda e: e.submission.remote_ref,
    "cost": lambda e: e.submission.cost,
    "decision": decision_of,
    "created_at": lambda e: e.created_at,
    "updated_at": lambda e: e.updated_at,
    "owner": _owner_dag,
}


@dataclass(frozen=True)
class RowQuery:
    """One page of a week's rows: filters (None: any), a search text, a sort and a page."""

    status: str | None = None
    submission: str | None = None
    decision: str | None = None
    effect: str | None = None
    dag: str | None = None
    search: str | None = None
    sort: str = "episode_id"
    descending: bool = False
    page: int = 1
    per_page: int = DEFAULT_PER_PAGE

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> RowQuery:
        """From the page's query string; anything else than these names and values is refused."""
        known = {"status", "submission", "decision", "effect", "dag", "q", "sort", "order", "page", "per_page", "week"}
        for name in params:
            if name not in known:
                raise InvalidIdentifier("query parameter", name, f"expected one of {', '.join(sorted(known))}")

        def choice(name: str, allowed: tuple[str, ...]) -> str | None:
            value = params.get(name) or None
            if value is not None and value not in allowed:
                raise InvalidIdentifier(name, value, f"expected one of {', '.join(allowed)}")
            return value

        def whole(name: str, default: int, high: int) -> int:
            text = params.get(name)
            if not text:
                return default
            if not text.isdigit() or not 1 <= int(text) <= high:
                raise InvalidIdentifier(name, text, f"expected a whole number from 1 to {high}")
            return int(text)

        search = params.get("q") or None
        if search is not None and (len(search) > MAX_SEARCH or not search.isprintable()):
            raise InvalidIdentifier("q", search[:40], f"expected printable text of at most {MAX_SEARCH} characters")
        dag = params.get("dag") or None
        if dag is not None and (len(dag) > 250 or not dag.isprintable()):
            raise InvalidIdentifier("dag", dag[:40], "expected a DAG id")
        return cls(
            status=choice("status", tuple(s.value for s in EpisodeStatus)),
            submission=choice("submission", tuple(s.value for s in SubmissionState)),
            decision=choice("decision", DECISIONS),
            effect=choice("effect", _EFFECTS),
            dag=dag,
            search=search,
            sort=choice("sort", tuple(SORTS)) or "episode_id",
            descending=(choice("order", ("asc", "desc")) or "asc") == "desc",
            page=whole("page", 1, 1_000_000),
            per_page=whole("per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE),
        )

    def matches(self, episode: Episode) -> bool:
        if self.status is not None and episode.status.value != self.status:
            return False
        if self.submission is not None and episode.submission.state.value != self.submission:
            return False
        if self.decision is not None and decision_of(episode) != self.decision:
            return False
        if self.effect is not None and not any(e.state.value == self.effect for e in episode.effects.values()):
            return False
        if self.dag is not None and _owner_dag(episode) != self.dag:
            return False
        if self.search is not None:
            needle = self.search.casefold()
            sub = episode.submission
            haystack = (episode.episode_id, episode.allocation_key, sub.token or "", sub.remote_ref or "")
            return any(needle in text.casefold() for text in haystack)
        return True


def select(episodes: list[Episode], query: RowQuery) -> tuple[list[Episode], dict[str, Any]]:
    """The page of episodes the query asks for, and what the page needs to show where it is."""
    matching = [e for e in episodes if query.matches(e)]
    key = SORTS[query.sort]
    present = [e for e in matching if key(e) is not None]
    absent = [e for e in matching if key(e) is None]  # None last, in either order
    present.sort(key=lambda e: (key(e), e.sequence), reverse=query.descending)
    ordered = present + sorted(absent, key=lambda e: e.sequence)
    pages = max(1, math.ceil(len(ordered) / query.per_page))
    start = (query.page - 1) * query.per_page
    info = {
        "total": len(episodes),
        "matching": len(ordered),
        "page": query.page,
        "per_page": query.per_page,
        "pages": pages,
        "sort": query.sort,
        "order": "desc" if query.descending else "asc",
        "dags": sorted({dag for dag in map(_owner_dag, episodes) if dag}),
    }
    return ordered[start : start + query.per_page], info
