"""The file store's writes under its lock: the allocation's write order."""

from __future__ import annotations

import builtins
import os
import shutil
from pathlib import Path

from ...episode import Episode
from ...errors import AllocationConflict
from ...identity import EpisodeId, WeekId
from ..durable import TMP_PREFIX, SyncBatch, write_durable
from ._key_index import IndexCopied, IndexDamaged, key_digest
from ._key_lookup import find_holders
from ._rebuild import rebuild
from ._tree import StoreTree
from ._week_history import (
    HISTORY_FILE,
    HISTORY_VERSION,
    HistoryTail,
    append_history,
    entry_line,
    is_fresh,
    mark_line,
    read_history_tail,
)
from ._writes import index_committed, mark_rewritten, materialize, repair_holders, stage, upgrade_history

__all__ = ["FileSession"]


class FileSession:
    """The store's primitives while its lock is held.

    An allocation's write, in order (``insert``):

    1. before the commit: the key marker (a hard link of an empty template), its bucket fsynced,
       so a retry after a power loss finds the episode through the index; the record staged in a
       temp directory beside it, not synced (a week that cannot take it refuses here);
    2. the commit: the episode's entry appended to the week's ``history.jsonl`` with one write,
       then fdatasync (`_week_history`);
    3. after it, with no fsync of their own: the temp directory renamed to ``<week>/<id>`` (readers
       see the record whole or not at all), then a line in the key's bucket log.

    Two synchronous writes per allocation, as a bare durable write makes; the record's two new
    inodes (directory and file) are never synced. A crash before the entry leaves only ignored leftovers (a marker whose
    episode has no entry) and consumes no sequence. A crash or a power loss after it may lose the
    record or the log line: the entry holds the whole fresh record, so readers rebuild it from the
    entry (`StoreTree.load`) and the next locked call that meets it writes it back. The
    week directory's link count tells, for one ``lstat``, whether it holds exactly the episodes
    its history lists; when it does not, the directory is listed, and records the history missed
    (written by an older version, or moved in by a migration) are appended to it.
    """

    def __init__(self, tree: StoreTree) -> None:
        self._tree = tree
        #: Per week seen in this session: its history's tail and the committed ids past it.
        self._weeks: dict[WeekId, tuple[HistoryTail | None, builtins.list[EpisodeId]]] = {}

    def holders(self, allocation_key: str) -> list[Episode]:
        """The lookup (a pure read), then, since this session holds the lock, its repair."""
        tree = self._tree
        try:
            found = find_holders(tree, allocation_key)
        except IndexDamaged as damage:
            # A bucket, a log or an index directory is gone, or the index is a copy (restored under
            # this store object): rebuild from the records (never forgetting what the old index
            # proves), then look.
            rebuild(tree, guard=True, histories=not isinstance(damage, IndexCopied))
            self._weeks.clear()
            found = find_holders(tree, allocation_key)
        repair_holders(tree, found)
        return list(found.episodes)

    def load(self, episode_id: EpisodeId) -> Episode | None:
        return self._tree.load(episode_id)

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
            tree = self._tree
            status = tree.week_stat(week)
            if status is None:
                state = (None, [])
            else:
                path = f"{tree.week(week)}/{HISTORY_FILE}"
                tail = read_history_tail(path, week)
                if tail is not None and tail.version is not None and tail.version < HISTORY_VERSION:
                    upgrade_history(tree, week)  # before anything is appended to it
                    tail = read_history_tail(path, week)
                listed = -1 if tail is None or tail.highest is None else tail.highest
                # A directory's link count is 2 plus its subdirectories: the episodes 0..listed,
                # when the history lists every one. Anything else (records it missed, a copy, a
                # leftover, a lost record, a file system that does not count) is listed.
                if status.st_nlink == listed + 3:
                    missed = []
                else:
                    missed = [e for e in tree.committed_ids(week) if e.sequence > listed]
                state = (tail, missed)
            self._weeks[week] = state
        return state

    def insert(self, episode: Episode) -> None:
        tree = self._tree
        episode_id = episode.id
        week = episode_id.week
        week_dir = tree.week(week)
        # The history's missing lines, read before the commit (a corrupt record stops the write).
        tail, missed = self._week_state(week)
        behind = [e for e in map(tree.load, missed) if e is not None]
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
            # 1. The marker (and a new week's directories), durable before the commit; the record
            # staged beside it, not synced, so that a week that takes no new entry (a full disk, a
            # read-only directory) refuses the allocation before anything is committed.
            tree.index.write_marker(digest, str(episode_id), batch, created)
            created.append(stage(tree, episode))
            batch.flush()
        except BaseException:
            batch.close()
            _remove_leftovers(list(reversed(created)))
            raise
        staging = created[-1]
        # 2. Commit: the entry, after the lines of records the history missed (a record rewritten
        # since its allocation gets its mark). If this raises, the marker and the staged record
        # stay: ignored leftovers.
        lines = [entry_line(e) + (b"" if is_fresh(e) else mark_line(e.episode_id)) for e in behind]
        append_history(f"{week_dir}/{HISTORY_FILE}", week, tail, b"".join(lines) + entry_line(episode))
        self._weeks.pop(week, None)
        # 3. Derived, so no fsync of their own (see the class docstring).
        try:
            os.rename(staging, f"{week_dir}/{episode_id}")
        except OSError:
            _remove_leftovers([staging])  # the entry holds the record; the next locked call writes it
        if behind:
            index_committed(tree, behind)
        try:
            tree.index.append_log(digest, [str(episode_id)])
        except IndexDamaged:
            pass  # the log went missing since the lookup: the next lookup of its bucket rebuilds

    def replace(self, before: Episode, after: Episode) -> None:
        tree = self._tree
        if is_fresh(before):
            # The first rewrite: the fresh record durable, then the mark, then the new record, so
            # that at no point a lost record could be brought back from its entry as unpaid.
            materialize(tree, before, durable=True)
            mark_rewritten(tree, before.id)
        write_durable(tree.state_path(after.id), after.to_record())

    def week_episodes(self, week: WeekId) -> list[Episode]:
        return list(self._tree.scan(week))


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
