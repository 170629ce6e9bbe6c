"""Read-only verification of a file store's tree: never locks, never writes, never repairs.

Like the store, it never follows a link and opens only regular files; unlike the store, it walks
the whole tree, so it reports every link and every special file inside it, wherever it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ...episode import Episode
from ...errors import StoreCorrupted
from ...identity import EpisodeId, WeekId
from ...owner import OWNER_KEY
from ...record_rules import CheckReport, EpisodeRule, Problem, check_episode_record, unique_keys
from ..durable import SYMLINK, TMP_PREFIX, file_kind, hard_links, read_file, read_json, read_versioned, require_dir
from ._key_index import BUCKET_CHARS, key_digest, parse_log_line
from ._tree import STATE_FILE, StoreTree
from ._week_history import HISTORY_FILE, fresh_episode, read_week_log

__all__ = ["check_file_store"]

#: Files the store appends to in place (besides the key logs): another name would receive the writes.
_WRITTEN_IN_PLACE = frozenset({HISTORY_FILE, ".lock"})


def check_file_store(tree: StoreTree, only: Sequence[EpisodeId] = (), rules: Sequence[EpisodeRule] = ()) -> CheckReport:
    problems: list[Problem] = []
    try:
        require_dir(tree.root)
    except FileNotFoundError:
        return CheckReport([Problem(str(tree.root), "store root does not exist")])
    except StoreCorrupted as exc:
        return CheckReport([Problem(exc.where, exc.reason)])
    if not only:
        problems += _strange_entries(tree.root)
    problems += _check_meta(tree.meta, tree.read_namespace)
    episodes: list[Episode] = []
    weeks = sorted({e.week for e in only}) if only else _week_dirs(tree, problems)
    for week in weeks:
        wanted = {e for e in only if e.week == week} if only else None
        episodes += _check_week(tree, week, wanted, problems, rules)
    if only:
        for episode_id in only:
            if not any(e.episode_id == str(episode_id) for e in episodes):
                problems.append(Problem(str(episode_id), "episode not found"))
    else:
        problems += unique_keys(episodes)
    problems += _check_index(tree, episodes, whole=not only)
    # A link or a FIFO is met by the walk and by the reader that refuses it: say it once.
    return CheckReport(list(dict.fromkeys(problems)), episodes)


def _strange_entries(root: Path) -> list[Problem]:
    """Every symbolic link and every file that is neither a regular file nor a directory, not followed."""
    problems, stack = [], [str(root)]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue  # the checks below report what they cannot read, with what it is
        for entry in sorted(entries, key=lambda e: e.name):
            # The directory entry's type answers these without a system call per file.
            if entry.is_symlink():
                problems.append(Problem(entry.path, SYMLINK))
            elif entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                if entry.name in _WRITTEN_IN_PLACE or entry.name.endswith(".log"):
                    try:
                        links = entry.stat(follow_symlinks=False).st_nlink
                    except OSError:
                        continue
                    if links > 1:
                        problems.append(Problem(entry.path, hard_links(links)))
            else:
                try:
                    kind = file_kind(entry.stat(follow_symlinks=False).st_mode)
                except OSError:
                    continue
                problems.append(Problem(entry.path, f"not a regular file ({kind})"))
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


def _week_dirs(tree: StoreTree, problems: list[Problem]) -> list[WeekId]:
    base = tree.root / "episodes"
    try:
        if os.path.islink(base):
            raise StoreCorrupted(str(base), SYMLINK)
        names = sorted(os.listdir(base))
    except FileNotFoundError:
        return []
    except StoreCorrupted as exc:
        problems.append(Problem(exc.where, exc.reason))
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
    tree: StoreTree,
    week: WeekId,
    wanted: set[EpisodeId] | None,
    problems: list[Problem],
    rules: Sequence[EpisodeRule],
) -> list[Episode]:
    week_dir = tree.week_dir(week)
    episodes: list[Episode] = []
    try:
        for directory in (week_dir.parent, week_dir):
            if os.path.islink(directory):
                raise StoreCorrupted(str(directory), SYMLINK)
        names = sorted(os.listdir(week_dir))
    except FileNotFoundError:
        return episodes
    except StoreCorrupted as exc:
        problems.append(Problem(exc.where, exc.reason))
        return episodes
    except OSError as exc:
        problems.append(Problem(str(week_dir), f"unreadable: {exc.strerror}"))
        return episodes
    only_entries = _entries_only(tree, week)
    from_entries = {e.episode_id for e in only_entries}
    for name in names:
        path = week_dir / name
        if name.startswith(TMP_PREFIX) or name == HISTORY_FILE or name in from_entries:
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
            where = str(path / STATE_FILE)
            problems += check_episode_record(episode, where)
            for rule in rules:
                problems += rule(episode, where)
    for episode in only_entries:
        # Committed, its record not written back yet (a crash or power loss right after the commit):
        # the next locked call writes it; readers already rebuild it from the entry.
        if wanted is None or episode.id in wanted:
            episodes.append(episode)
            where = str(tree.history_path(week))
            problems += check_episode_record(episode, where)
            for rule in rules:
                problems += rule(episode, where)
    problems += _check_history(tree, week, episodes, partial=wanted is not None)
    return episodes


def _entries_only(tree: StoreTree, week: WeekId) -> list[Episode]:
    """What the store rebuilds from history entries; a history it cannot read is reported below."""
    try:
        return list(tree.entries_only(week))
    except (StoreCorrupted, OSError):
        return []


def _load(path: Path, episode_id: EpisodeId, problems: list[Problem]) -> Episode | None:
    try:
        require_dir(path.parent)
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


def _check_history(tree: StoreTree, week: WeekId, episodes: list[Episode], *, partial: bool) -> list[Problem]:
    """Every complete line of the week's history parses and agrees with the episode records.

    A history that lags behind the records (missing lines, a partial last line, no file) is the
    normal leftover of a crash: the next allocation of the week appends what it missed.
    """
    path = tree.history_path(week)
    try:
        log = read_week_log(path, week)
    except FileNotFoundError:
        return []
    except StoreCorrupted as exc:
        return [Problem(exc.where, exc.reason)]
    except OSError as exc:
        return [Problem(str(path), f"unreadable: {exc.strerror}")]
    entries, updated = log.entries, log.updated
    by_id = {e.episode_id: e for e in episodes}
    problems, seen = [], set()
    for entry in entries:
        entry_id = entry["episode_id"]
        if entry_id in seen:
            problems.append(Problem(str(path), f"history lists {entry_id} twice"))
        seen.add(entry_id)
        episode = by_id.get(entry_id)
        if episode is None:
            if entry_id not in updated and fresh_episode(entry, week) is not None:
                continue  # committed after this check listed the week: readers rebuild it from the entry
            if not partial and not (tree.week_dir(week) / entry_id).exists():
                rewritten = entry_id in updated
                problems.append(
                    Problem(
                        str(path),
                        f"history lists {entry_id} but its record is missing"
                        + (" after it was rewritten (restore it from a backup)" if rewritten else ""),
                    )
                )
        elif entry["allocation_key"] != episode.allocation_key:
            problems.append(Problem(str(path), f"history gives {entry_id} another allocation key"))
        elif entry["created_at"] != episode.created_at:
            problems.append(Problem(str(path), f"history gives {entry_id} another created_at"))
        elif entry.get("owner") != episode.metadata.get(OWNER_KEY):
            problems.append(Problem(str(path), f"history gives {entry_id} another owner than its record"))
    return problems


def _check_index(tree: StoreTree, episodes: list[Episode], *, whole: bool) -> list[Problem]:
    """Markers for every episode read; with ``whole``, every bucket, every log and every log line.

    A key log that lags behind the records (an episode without its line) is the normal leftover
    of a crash: the next allocation or retry adds the line. A line whose episode is missing or
    carries another key is not: allocation fails closed on that key.
    """
    index = tree.index
    try:
        require_dir(index.dir)
    except FileNotFoundError:
        return []  # no index yet: the next write builds it from the episode files
    except StoreCorrupted as exc:
        return [Problem(exc.where, exc.reason)]
    meta = Path(index.meta)
    if not os.path.lexists(meta):
        return []  # not built yet, or being rebuilt: the next write builds it
    problems = _check_meta(meta, lambda: read_versioned(meta))
    for episode in episodes:
        digest = key_digest(episode.allocation_key)
        marker = Path(index.marker(digest, episode.episode_id))
        if not os.path.lexists(marker):
            problems.append(Problem(str(marker), f"key index misses {episode.episode_id}"))
    if whole:
        problems += _check_logs(tree, {e.episode_id: e for e in episodes})
    return problems


def _check_logs(tree: StoreTree, by_id: dict[str, Episode]) -> list[Problem]:
    index, problems = tree.index, []
    for n in range(16**BUCKET_CHARS):
        name = f"{n:0{BUCKET_CHARS}x}"
        for path in (f"{index.keys}/{name}", f"{index.logs}/{name}.log"):
            if not os.path.lexists(path):
                problems.append(Problem(path, "missing from the key index (the next allocation rebuilds it)"))
        path = f"{index.logs}/{name}.log"
        try:
            raw = read_file(path)
        except FileNotFoundError:
            continue
        except StoreCorrupted as exc:
            problems.append(Problem(exc.where, exc.reason))
            continue
        except OSError as exc:
            problems.append(Problem(path, f"unreadable: {exc.strerror}"))
            continue
        offset = 0
        for line in raw[: raw.rfind(b"\n") + 1].split(b"\n")[:-1]:
            try:
                digest, episode_id = parse_log_line(line, path, offset)
            except StoreCorrupted as exc:
                problems.append(Problem(exc.where, exc.reason))
                break
            offset += len(line) + 1
            episode = by_id.get(episode_id)
            if episode is None:
                if not tree.week_dir(EpisodeId.parse(episode_id).week).joinpath(episode_id).exists():
                    problems.append(Problem(path, f"key log records {episode_id}, which does not exist"))
            elif key_digest(episode.allocation_key) != digest:
                problems.append(Problem(path, f"key log records {episode_id} for a key its record does not carry"))
    return problems
