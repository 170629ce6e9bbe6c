"""The file store's writes under its lock: the allocation's write order and the week history."""

from __future__ import annotations

import builtins
import functools
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..episode import SCHEMA_VERSION, Episode
from ..identity import EpisodeId, WeekId
from ._durable import TMP_PREFIX, SyncBatch, dump_json, fsync_dir, tmp_name, write_durable

if TYPE_CHECKING:
    from .file import FileEpisodeStore

__all__ = ["HISTORY_FILE", "STATE_FILE", "FileSession", "dump_history", "history_entry", "history_record"]

#: The episode record inside each episode directory; its directory's rename is the commit.
STATE_FILE = "state.json"
#: The week group's history, beside the episode directories of its week.
HISTORY_FILE = "history.json"
#: The next history is written into this private file, reusing the inode of an older history.
SPARE_HISTORY = f"{TMP_PREFIX}{HISTORY_FILE}-spare"
#: The history being replaced, kept by a second link until it becomes the spare.
DISPLACED_HISTORY = f"{TMP_PREFIX}{HISTORY_FILE}-displaced"


class FileSession:
    """The store's primitives while its lock is held.

    An allocation's write, in order (``insert``):

    1. before the commit, written first and fsynced back to back (one journal commit covers them):
       the key marker (a hard link), the record in a temp directory, and the week's next history
       in the week's spare file (an older history's inode, rewritten: see `SyncBatch.rewrite`);
    2. the commit: rename the temp directory to ``episodes/<week>/<id>``, then fsync the week;
    3. after it: rename the history into place, without an fsync of its own.

    Only two inodes are allocated per allocation (the temp directory and the record), the cost
    that dominates on ext4; a bare durable write allocates one.

    The marker is durable before the commit, so a retry after a power loss finds a committed
    episode through the index. A crash before the rename leaves only ignored leftovers (a marker
    whose episode does not exist, temp names) and consumes no sequence. The history is derived:
    a lost rename leaves it one allocation behind (the next allocation's week fsync makes it last),
    and `highest_sequence` probes past it, so it is never trusted blindly.
    """

    def __init__(self, store: FileEpisodeStore) -> None:
        self._store = store
        #: Per week seen in this session: its history record and the committed ids past it.
        self._weeks: dict[WeekId, tuple[dict[str, Any] | None, builtins.list[EpisodeId]]] = {}

    def holders(self, allocation_key: str) -> list[Episode]:
        return self._store._indexed_holders(allocation_key)

    def load(self, episode_id: EpisodeId) -> Episode | None:
        return self._store._load(episode_id)

    def highest_sequence(self, week: WeekId) -> int | None:
        history, missed = self._week_state(week)
        if missed:
            return missed[-1].sequence
        return None if history is None else int(history["highest_sequence"])

    def _week_state(self, week: WeekId) -> tuple[dict[str, Any] | None, builtins.list[EpisodeId]]:
        """The week's history and the committed ids it does not cover, found once per session."""
        if week not in self._weeks:
            store = self._store
            history = store._read_history(week)
            if history is None:
                missed = store.committed_ids(week)
            else:
                # The history may lag behind commits that a crash interrupted: probe past it.
                missed, next_id = [], EpisodeId(week, int(history["highest_sequence"]) + 1)
                while store.episode_dir(next_id).is_dir():
                    missed.append(next_id)
                    next_id = EpisodeId(week, next_id.sequence + 1)
            self._weeks[week] = (history, missed)
        return self._weeks[week]

    def insert(self, episode: Episode) -> None:
        store = self._store
        episode_id = episode.id
        week = episode_id.week
        week_dir = store.week_dir(week)
        history_path = store.history_path(week)
        spare = week_dir / SPARE_HISTORY
        staging = week_dir / tmp_name(str(episode_id))
        batch = SyncBatch()
        #: What this write made before its commit, taken back if it fails (a crash leaves them).
        created: builtins.list[Path] = []
        try:
            for directory in (week_dir.parent, week_dir):
                if not directory.is_dir():
                    directory.mkdir()
                    created.append(directory)
                    batch.directory(directory.parent)
            # 1. Everything the commit needs, fsynced together.
            store._write_marker(episode, batch, created)
            staging.mkdir()
            batch.create(staging / STATE_FILE, dump_json(episode.to_record()))
            batch.directory(staging)
            batch.rewrite(spare, dump_history(self._next_history(episode)), distinct_from=history_path)
            batch.flush()
            # 2. Commit: the rename makes the episode exist; the week's fsync makes it last.
            os.rename(staging, store.episode_dir(episode_id))
        except BaseException:
            # Not committed (the rename is atomic): nothing of this write may stay behind.
            batch.close()
            _remove_leftovers([staging, *reversed(created)])
            raise
        fsync_dir(week_dir)
        # 3. Derived, so no fsync of its own (see the class docstring).
        _swap_history(spare, history_path)
        self._weeks.pop(week, None)

    def _next_history(self, episode: Episode) -> dict[str, Any]:
        """The week's history once ``episode`` is committed, including commits the history missed."""
        week = episode.id.week
        history, missed = self._week_state(week)
        entries = {e["episode_id"]: e for e in history["episodes"]} if history else {}
        highest = int(history["highest_sequence"]) if history else -1
        for episode_id in missed:
            loaded = self._store._load(episode_id)
            if loaded is not None:
                entries[loaded.episode_id] = history_entry(loaded)
                highest = max(highest, loaded.sequence)
        entries[episode.episode_id] = history_entry(episode)
        return history_record(week, max(highest, episode.sequence), entries)

    def replace(self, before: Episode, after: Episode) -> None:
        write_durable(self._store.state_path(after.id), after.to_record())

    def week_episodes(self, week: WeekId) -> list[Episode]:
        return list(self._store._scan(week))


def _swap_history(spare: Path, history: Path) -> None:
    """Put the written spare in place of the history, and keep the displaced inode as the next spare.

    Every step is a rename or a link (no inode is allocated). A crash in between leaves at worst
    no spare (the next allocation makes one) or a displaced link (removed below next time).
    """
    displaced: Path | None = spare.with_name(DISPLACED_HISTORY)
    assert displaced is not None
    try:
        os.unlink(displaced)
    except FileNotFoundError:
        pass
    try:
        os.link(history, displaced)
    except OSError:  # no history yet, or no hard links here: the next spare is a new file
        displaced = None
    os.replace(spare, history)
    if displaced is not None:
        os.rename(displaced, spare)


def _remove_leftovers(paths: builtins.list[Path]) -> None:
    """Best effort after a failed write, newest first; what stays behind is an ignored leftover."""
    for path in paths:
        try:
            if path.is_symlink() or not path.is_dir():
                path.unlink(missing_ok=True)
            elif path.name.startswith(TMP_PREFIX):
                shutil.rmtree(path)
            else:
                path.rmdir()  # a directory this write created, empty again unless someone raced in
        except OSError:
            pass


def history_entry(episode: Episode) -> dict[str, Any]:
    return {
        "episode_id": episode.episode_id,
        "sequence": episode.sequence,
        "allocation_key": episode.allocation_key,
        "created_at": episode.created_at,
    }


def history_record(week: WeekId, highest: int, entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "week_id": str(week),
        "highest_sequence": highest,
        "episodes": sorted(entries.values(), key=lambda e: int(e["sequence"])),
    }


def dump_history(record: dict[str, Any]) -> bytes:
    """The history as JSON with one episode per line.

    It is rewritten on every allocation and grows with its week: ``json``'s C encoder (used
    only without ``indent``) writes it ten times faster than the indented form.
    """
    compact = functools.partial(json.dumps, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    head = compact({k: v for k, v in record.items() if k != "episodes"})
    lines = ",\n".join(compact(entry) for entry in record["episodes"])
    return f'{head[:-1]},"episodes":[\n{lines}\n]}}\n'.encode()
