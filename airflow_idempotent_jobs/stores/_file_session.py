"""The file store's writes under its lock: the allocation's write order."""

from __future__ import annotations

import builtins
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ..episode import Episode
from ..errors import AllocationConflict
from ..identity import EpisodeId, WeekId
from ._key_index import IndexDamaged, key_digest
from ._week_history import HISTORY_FILE, HistoryTail, append_history, read_history_tail
from .durable import TMP_PREFIX, SyncBatch, dump_json, fsync_dir, tmp_name, write_durable

if TYPE_CHECKING:
    from .file import FileEpisodeStore

__all__ = ["STATE_FILE", "FileSession"]

#: The episode record inside each episode directory; its directory's rename is the commit.
STATE_FILE = "state.json"


class FileSession:
    """The store's primitives while its lock is held.

    An allocation's write, in order (``insert``):

    1. before the commit, written first and fsynced back to back (one journal commit covers them):
       the key marker (a hard link of an empty template), and the record in a temp directory;
    2. the commit: rename the temp directory to ``episodes/<week>/<id>``, then fsync the week;
    3. after it, with no fsync of their own: a line in the key's bucket log, then a line in the
       week's ``history.jsonl``.

    Two inodes are allocated per allocation (the temp directory and the record); a bare durable
    write allocates one. The week history gets a new inode once per week.

    The marker is durable before the commit, so a retry after a power loss finds a committed
    episode through the index. A crash before the rename leaves only ignored leftovers (a marker
    whose episode does not exist, temp names) and consumes no sequence. The log line and the
    history are derived: a crash or a power loss may lose their last lines (or leave a partial
    one). The week directory's link count tells, for one ``lstat``, whether it holds exactly the
    episodes its history lists; when it does not, the directory is listed, and the next allocation
    of the week indexes and appends what the history missed.
    """

    def __init__(self, store: FileEpisodeStore) -> None:
        self._store = store
        #: Per week seen in this session: its history's tail and the committed ids past it.
        self._weeks: dict[WeekId, tuple[HistoryTail | None, builtins.list[EpisodeId]]] = {}

    def holders(self, allocation_key: str) -> list[Episode]:
        store = self._store
        try:
            return store.holders(allocation_key, repair=True)
        except IndexDamaged:
            # A bucket, a log or an index directory is gone: rebuild from the records, then look.
            store._rebuild_index()
            self._weeks.clear()
            return store.holders(allocation_key, repair=True)

    def load(self, episode_id: EpisodeId) -> Episode | None:
        return self._store._load(episode_id)

    def highest_sequence(self, week: WeekId) -> int | None:
        tail, missed = self._week_state(week)
        highest = None if tail is None else tail.highest
        if missed:
            return max(missed[-1].sequence, -1 if highest is None else highest)
        return highest

    def _week_state(self, week: WeekId) -> tuple[HistoryTail | None, builtins.list[EpisodeId]]:
        """The week's history tail and the committed ids past it, found once per session."""
        state = self._weeks.get(week)
        if state is None:
            store = self._store
            status = store.week_stat(week)
            if status is None:
                state = (None, [])
            else:
                tail = read_history_tail(f"{store._week(week)}/{HISTORY_FILE}", week)
                listed = -1 if tail is None or tail.highest is None else tail.highest
                # A directory's link count is 2 plus its subdirectories: the episodes 0..listed,
                # when the history lists every one. Anything else (commits it missed, a copy, a
                # leftover, a lost episode, a file system that does not count) is listed.
                if status.st_nlink == listed + 3:
                    missed = []
                else:
                    missed = [e for e in store.committed_ids(week) if e.sequence > listed]
                state = (tail, missed)
            self._weeks[week] = state
        return state

    def insert(self, episode: Episode) -> None:
        store = self._store
        episode_id = episode.id
        week = episode_id.week
        week_dir = store._week(week)
        staging = f"{week_dir}/{tmp_name(str(episode_id))}"
        # The history's missing lines, read before the commit (a corrupt record stops the write).
        tail, missed = self._week_state(week)
        behind = [e for e in map(store._load, missed) if e is not None]
        # An episode the index never listed may carry this very key (copied in from a backup, or
        # both its index entries lost): its owner must not get a second one.
        clash = tuple(e.episode_id for e in behind if e.allocation_key == episode.allocation_key)
        if clash:
            raise AllocationConflict(
                episode.allocation_key,
                "held by an episode the key index does not list (copied in, or its index lost; "
                "see idempotent-jobs check)",
                clash,
            )
        digest = key_digest(episode.allocation_key)
        batch = SyncBatch()
        #: What this write made before its commit, taken back if it fails (a crash leaves them).
        created: builtins.list[str] = []
        try:
            if tail is None and not os.path.lexists(week_dir):
                for directory in (os.path.dirname(week_dir), week_dir):
                    if not os.path.lexists(directory):
                        os.mkdir(directory)
                        created.append(directory)
                        batch.directory(os.path.dirname(directory))
            # 1. Everything the commit needs, fsynced together.
            store.index.write_marker(digest, str(episode_id), batch, created)
            os.mkdir(staging)
            batch.create(f"{staging}/{STATE_FILE}", dump_json(episode.to_record()))
            batch.directory(staging)
            batch.flush()
            # 2. Commit: the rename makes the episode exist; the week's fsync makes it last.
            os.rename(staging, f"{week_dir}/{episode_id}")
        except BaseException:
            # Not committed (the rename is atomic): nothing of this write may stay behind.
            batch.close()
            _remove_leftovers([staging, *reversed(created)])
            raise
        fsync_dir(week_dir)
        self._weeks.pop(week, None)
        # 3. Derived, so no fsync of their own (see the class docstring).
        if behind:
            store.index_committed(behind)
        try:
            store.index.append_log(digest, [str(episode_id)])
        except IndexDamaged:
            pass  # the log went missing since the lookup: the next lookup of its bucket rebuilds
        append_history(f"{week_dir}/{HISTORY_FILE}", week, tail, [*behind, episode])

    def replace(self, before: Episode, after: Episode) -> None:
        write_durable(self._store.state_path(after.id), after.to_record())

    def week_episodes(self, week: WeekId) -> list[Episode]:
        return list(self._store._scan(week))


def _remove_leftovers(paths: builtins.list[str]) -> None:
    """Best effort after a failed write, newest first; what stays behind is an ignored leftover."""
    for path in map(Path, paths):
        try:
            if path.is_symlink() or not path.is_dir():
                path.unlink(missing_ok=True)
            elif path.name.startswith(TMP_PREFIX):
                shutil.rmtree(path)
            else:
                path.rmdir()  # a directory this write created, empty again unless someone raced in
        except OSError:
            pass
