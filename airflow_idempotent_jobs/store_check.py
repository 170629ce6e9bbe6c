"""`check_store`: what ``idempotent-jobs check`` runs, a store's own check plus the migration's evidence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .identity import EpisodeId
from .migration.evidence import migration_rules, verify_migrated
from .record_rules import Problem

if TYPE_CHECKING:
    from .migration.manifest import Manifest
    from .stores.base import EpisodeStore

__all__ = ["check_store"]


def check_store(
    store: EpisodeStore, episode_ids: Sequence[str | EpisodeId] = (), manifest: Manifest | None = None
) -> list[Problem]:
    """Every problem found in ``store`` (or in the named episodes), sorted; empty means healthy.

    With ``manifest``, also that nothing the manifest lists was lost. Invalid ids among
    ``episode_ids`` raise `InvalidIdentifier` before anything is read. Never writes, never locks.
    Each store checks its own layout (``store.check``): what a healthy layout is differs by backend.
    """
    ids = [EpisodeId.parse(text) for text in episode_ids]
    report = store.check(ids, migration_rules(store))
    problems = list(report.problems)
    if manifest is not None:
        # The manifest spans every week: compare it with all episodes, named ones or not.
        episodes = report.episodes if not ids else store.check([], []).episodes
        problems += verify_migrated(store, manifest, episodes)
    return sorted(problems)
