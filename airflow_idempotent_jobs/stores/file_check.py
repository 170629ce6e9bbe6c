"""Read-only verification of a file store's tree: never locks, never writes, never repairs."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ..check import Problem, check_episode_record, unique_keys
from ..episode import Episode
from ..errors import StoreCorrupted
from ..identity import EpisodeId, WeekId
from ..legacy import LEGACY_STATE_FILE, recorded_hashes, sha256_file
from ..manifest import LEGACY_STATE_KEY, LEGACY_SUBDIR, MIGRATION_KEY, verify_manifest
from ._durable import TMP_PREFIX, read_json, read_versioned
from ._week_history import HISTORY_FILE, read_history
from .file import STATE_FILE, FileEpisodeStore, key_digest

if TYPE_CHECKING:
    from ..manifest import Manifest

__all__ = ["check_file_store"]


def check_file_store(
    store: FileEpisodeStore, only: Sequence[EpisodeId] = (), manifest: Manifest | None = None
) -> list[Problem]:
    problems: list[Problem] = []
    if not store.root.is_dir():
        return [Problem(str(store.root), "store root does not exist")]
    problems += _check_meta(store.root / "store.json", store._read_store_meta)
    episodes: list[Episode] = []
    weeks = sorted({e.week for e in only}) if only else _week_dirs(store, problems)
    for week in weeks:
        wanted = {e for e in only if e.week == week} if only else None
        episodes += _check_week(store, week, wanted, problems)
    if only:
        for episode_id in only:
            if not any(e.episode_id == str(episode_id) for e in episodes):
                problems.append(Problem(str(episode_id), "episode not found"))
    else:
        problems += unique_keys(episodes)
    problems += _check_index(store, episodes)
    if manifest is not None:
        everything = episodes
        if only:
            # The manifest spans every week: compare it with all episodes, report only its findings.
            everything = [e for week in _week_dirs(store, []) for e in _check_week(store, week, None, [])]
        problems += verify_manifest(manifest, everything, lambda episode, path: _current_hash(store, episode, path))
    return problems


def _check_meta(path: Path, read: Callable[[], object]) -> list[Problem]:
    """Run the store's own reader of a meta file: what would stop the store is what check reports."""
    try:
        read()
    except StoreCorrupted as exc:
        return [Problem(exc.where, exc.reason)]
    except OSError as exc:
        return [Problem(str(path), f"unreadable: {exc.strerror}")]
    return []


def _week_dirs(store: FileEpisodeStore, problems: list[Problem]) -> list[WeekId]:
    base = store.root / "episodes"
    try:
        names = sorted(os.listdir(base))
    except FileNotFoundError:
        return []
    except OSError as exc:  # check reports what it cannot read; it never stops on it
        problems.append(Problem(str(base), f"unreadable: {exc.strerror}"))
        return []
    weeks = []
    for name in names:
        if name.startswith(TMP_PREFIX):
            continue
        try:
            weeks.append(WeekId.parse(name))
        except ValueError:
            problems.append(Problem(str(base / name), "not a week directory (expected YYYY-Www)"))
    return weeks


def _check_week(
    store: FileEpisodeStore, week: WeekId, wanted: set[EpisodeId] | None, problems: list[Problem]
) -> list[Episode]:
    week_dir = store.week_dir(week)
    episodes: list[Episode] = []
    try:
        names = sorted(os.listdir(week_dir))
    except FileNotFoundError:
        return episodes
    except OSError as exc:
        problems.append(Problem(str(week_dir), f"unreadable: {exc.strerror}"))
        return episodes
    for name in names:
        path = week_dir / name
        if name.startswith(TMP_PREFIX) or name == HISTORY_FILE:
            continue
        try:
            episode_id = EpisodeId.parse(name)
        except ValueError:
            problems.append(Problem(str(path), "not an episode directory of this week"))
            continue
        if episode_id.week != week:
            problems.append(Problem(str(path), f"episode of {episode_id.week} filed under {week}"))
            continue
        if wanted is not None and episode_id not in wanted:
            continue
        episode = _load(path / STATE_FILE, episode_id, problems)
        if episode is not None:
            episodes.append(episode)
            problems += check_episode_record(episode, str(path / STATE_FILE))
            problems += _check_migrated_files(store, episode)
    problems += _check_history(store, week, episodes, partial=wanted is not None)
    return episodes


def _load(path: Path, episode_id: EpisodeId, problems: list[Problem]) -> Episode | None:
    try:
        episode = Episode.from_record(read_json(path), str(path))
    except FileNotFoundError:
        problems.append(Problem(str(path), "missing"))
        return None
    except StoreCorrupted as exc:
        problems.append(Problem(exc.where, exc.reason))
        return None
    except OSError as exc:
        problems.append(Problem(str(path), f"unreadable: {exc.strerror}"))
        return None
    if episode.episode_id != str(episode_id):
        problems.append(Problem(str(path), f"record says {episode.episode_id} but lives in {episode_id}"))
        return None
    return episode


def _check_history(store: FileEpisodeStore, week: WeekId, episodes: list[Episode], *, partial: bool) -> list[Problem]:
    """Every complete line of the week's history parses and agrees with the episode records.

    A history that lags behind the records (missing lines, a partial last line, no file) is the
    normal leftover of a crash: the next allocation of the week appends what it missed.
    """
    path = store.history_path(week)
    try:
        _highest, entries = read_history(path, week)
    except FileNotFoundError:
        return []
    except StoreCorrupted as exc:
        return [Problem(exc.where, exc.reason)]
    except OSError as exc:
        return [Problem(str(path), f"unreadable: {exc.strerror}")]
    by_id = {e.episode_id: e for e in episodes}
    problems, seen = [], set()
    for entry in entries:
        entry_id = entry["episode_id"]
        if entry_id in seen:
            problems.append(Problem(str(path), f"history lists {entry_id} twice"))
        seen.add(entry_id)
        episode = by_id.get(entry_id)
        if episode is None:
            if not partial and not (store.week_dir(week) / entry_id).exists():
                problems.append(Problem(str(path), f"history lists {entry_id} but it does not exist"))
        elif entry["allocation_key"] != episode.allocation_key:
            problems.append(Problem(str(path), f"history gives {entry_id} another allocation key"))
        elif entry["created_at"] != episode.created_at:
            problems.append(Problem(str(path), f"history gives {entry_id} another created_at"))
    return problems


def _check_index(store: FileEpisodeStore, episodes: list[Episode]) -> list[Problem]:
    meta = store.index_dir / "meta.json"
    if not meta.exists():
        # No index yet: the next write builds it from the episode files.
        return []
    problems = _check_meta(meta, lambda: read_versioned(meta))
    for episode in episodes:
        digest = key_digest(episode.allocation_key)
        marker = store.key_bucket(digest) / f"{digest}.{episode.episode_id}"
        if not marker.exists():
            problems.append(Problem(str(marker), f"key index misses {episode.episode_id}"))
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
        original = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []  # its hash check already reports it
    if original != state:
        return [Problem(str(path), "the legacy state in the episode record differs from this original file")]
    return []
