"""The migration's evidence, checked: migrated records, the files they brought, and the manifest.

`check_store` passes `migration_rules` to a store's own check and compares the manifest with the
episodes it read; no store imports this package.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ..episode import Episode
from ..record_rules import EpisodeRule, Problem
from ..stores.base import EpisodeStore
from ..stores.durable import TMP_PREFIX
from ..stores.file import FileEpisodeStore
from .json_files import read_json_file
from .legacy import LEGACY_STATE_FILE, cost_total, extract_costs, extract_refs, recorded_hashes, sha256_file
from .legacy_approval import LegacyDecision
from .manifest import (
    LEGACY_STATE_KEY,
    LEGACY_SUBDIR,
    MIGRATION_KEY,
    HashOf,
    Manifest,
    decision_problems,
    same_cost,
    submission_as_migrated,
    verify_manifest,
)

__all__ = ["check_migration_record", "migration_rules", "verify_migrated"]


def migration_rules(store: EpisodeStore) -> list[EpisodeRule]:
    """The rules a store's check runs on each episode: the migration record, and where the store
    holds files (the file store), the migrated files themselves."""
    rules: list[EpisodeRule] = [check_migration_record]
    if isinstance(store, FileEpisodeStore):
        file_store = store
        rules.append(lambda episode, _where: _check_migrated_files(file_store, episode))
    return rules


def verify_migrated(store: EpisodeStore, manifest: Manifest, episodes: Sequence[Episode]) -> list[Problem]:
    """Nothing the manifest lists was lost; files are hashed again where the store holds them."""
    hash_of: HashOf | None = None
    if isinstance(store, FileEpisodeStore):
        file_store = store
        hash_of = lambda episode, path: _current_hash(file_store, episode, path)  # noqa: E731
    return verify_manifest(manifest, episodes, hash_of)


def check_migration_record(episode: Episode, where: str) -> list[Problem]:
    """A migrated episode agrees with itself: ids, legacy state, decision, cost total, remote reference."""
    record = episode.metadata.get(MIGRATION_KEY)
    if record is None:
        return []
    if not isinstance(record, dict):
        return [Problem(where, "migration record is not an object")]
    problems = []
    for name in ("episode_id", "week_id", "sequence"):
        if record.get(name) != getattr(episode, name):
            problems.append(Problem(where, f"migration record gives {name} {record.get(name)!r}"))
    files = record.get("files")
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        problems.append(Problem(where, "migration record has no file hashes"))
    state = episode.metadata.get(LEGACY_STATE_KEY)
    if not isinstance(state, dict):
        return [*problems, Problem(where, "migrated episode has no legacy state")]
    try:
        total = cost_total(extract_costs(state))
    except ValueError as exc:
        return [*problems, Problem(where, f"legacy state: {exc}")]
    if isinstance(record.get("approval"), dict):
        try:
            wanted = LegacyDecision.from_dict(record["approval"])
        except ValueError as exc:
            problems.append(Problem(where, f"migration record's approval: {exc}"))
        else:
            problems += decision_problems(where, wanted, episode, "the migration record")
    if not same_cost(total, record.get("cost_total")):
        problems.append(
            Problem(where, f"cost records add up to {total}, the migration recorded {record.get('cost_total')}")
        )
    if not submission_as_migrated(episode):
        return problems  # the paid layer took the job over since: its ledger speaks for itself
    if not same_cost(total, episode.submission.cost):
        problems.append(
            Problem(where, f"cost records add up to {total}, the submission says {episode.submission.cost}")
        )
    refs = [r.value for r in extract_refs(state)]
    if episode.submission.remote_ref is not None and episode.submission.remote_ref not in refs:
        problems.append(
            Problem(where, f"remote reference {episode.submission.remote_ref!r} is not in the legacy state")
        )
    return problems


def _legacy_path(store: FileEpisodeStore, episode: Episode, relative: str) -> Path | None:
    """Where a migrated file lives; None for a recorded path that would leave the directory."""
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        return None
    return store.episode_dir(episode.id) / LEGACY_SUBDIR / pure


def _current_hash(store: FileEpisodeStore, episode: Episode, relative: str) -> str | None:
    path = _legacy_path(store, episode, relative)
    try:
        return None if path is None else sha256_file(path)[0]
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def _check_migrated_files(store: FileEpisodeStore, episode: Episode) -> list[Problem]:
    """A migrated episode's files: each recomputed against the recorded sha256, none missing or extra."""
    record = episode.metadata.get(MIGRATION_KEY)
    files = record.get("files") if isinstance(record, dict) else None
    if not isinstance(files, dict):
        return []
    base = store.episode_dir(episode.id) / LEGACY_SUBDIR
    problems = []
    for relative, recorded in sorted(files.items()):
        path = _legacy_path(store, episode, relative)
        if path is None:
            problems.append(Problem(str(base), f"migration records a path outside its directory: {relative!r}"))
            continue
        try:
            now = sha256_file(path)[0]
        except (FileNotFoundError, NotADirectoryError):
            problems.append(Problem(str(path), f"missing (recorded sha256 {recorded})"))
            continue
        except OSError as exc:
            problems.append(Problem(str(path), f"unreadable: {exc.strerror}"))
            continue
        if now != recorded:
            problems.append(Problem(str(path), f"sha256 {now} differs from the recorded {recorded}"))
    state = episode.metadata.get(LEGACY_STATE_KEY)
    for relative, digest in recorded_hashes(state).items():
        if files.get(relative) != digest:
            problems.append(
                Problem(
                    str(base / relative),
                    f"the legacy state records sha256 {digest}, the migration {files.get(relative)}",
                )
            )
    for dirpath, _dirs, names in os.walk(base):
        for name in names:
            relative = Path(dirpath, name).relative_to(base).as_posix()
            if relative not in files and not name.startswith(TMP_PREFIX):
                problems.append(Problem(str(Path(dirpath, name)), "file not recorded by the migration"))
    problems += _check_legacy_state_copy(base / LEGACY_STATE_FILE, state, LEGACY_STATE_FILE in files)
    return problems


def _check_legacy_state_copy(path: Path, state: Any, recorded: bool) -> list[Problem]:
    """The legacy state kept in the record must say what the original file says."""
    if not recorded or not path.is_file():
        return []
    try:
        original = read_json_file(path)
    except (OSError, ValueError):
        return []  # its hash check already reports it
    if original != state:
        return [Problem(str(path), "the legacy state in the episode record differs from this original file")]
    return []
