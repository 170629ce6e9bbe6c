"""The file store's record and history writes, each run under the store's lock by a writer.

Records are written into a temp directory of their week and renamed into place (readers see them
whole or not at all); a history is replaced whole only when upgraded or rebuilt, and otherwise
only appended to (`_week_history`). The index is repaired best effort: it is derived.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ...episode import Episode
from ...identity import EpisodeId, WeekId
from ..durable import fsync_dir, require_dir, tmp_name, write_all, write_durable, write_file_synced
from ._fresh_record import record_bytes
from ._key_index import IndexDamaged, key_digest
from ._key_lookup import KeyHolders
from ._tree import STATE_FILE, StoreTree
from ._week_history import (
    HISTORY_FILE,
    append_history,
    entry_of,
    history_payload,
    is_fresh,
    mark_line,
    read_history_tail,
    read_week_log,
)

__all__ = [
    "history_from",
    "index_committed",
    "mark_rewritten",
    "materialize",
    "repair_holders",
    "stage",
    "upgrade_history",
    "write_back",
]


def stage(tree: StoreTree, episode: Episode, *, durable: bool = False) -> str:
    """Write the record into a new temp directory of its week; returns the directory.

    Not synced unless ``durable``: staged before an allocation's commit, renamed into place after it.
    """
    staging = f"{tree.week(episode.id.week)}/{tmp_name(episode.episode_id)}"
    payload = record_bytes(episode)
    os.mkdir(staging)
    try:
        if durable:
            write_file_synced(f"{staging}/{STATE_FILE}", payload)
            fsync_dir(staging)
        else:
            fd = os.open(f"{staging}/{STATE_FILE}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                write_all(fd, payload)
            finally:
                os.close(fd)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def materialize(tree: StoreTree, episode: Episode, *, durable: bool) -> None:
    """Write a committed episode's record where readers look for it (a staged directory renamed in).

    Without ``durable`` no fsync: its history entry holds the record. Before a first rewrite
    (``durable``) the record and its directory's name must last.
    """
    week_dir = tree.week(episode.id.week)
    final = f"{week_dir}/{episode.episode_id}"
    if os.path.lexists(final):  # a directory without its record (a migration's files moved in)
        require_dir(final)
        write_durable(Path(final) / STATE_FILE, episode.to_record())
    else:
        staging = stage(tree, episode, durable=durable)
        try:
            os.rename(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    if durable:
        fsync_dir(week_dir)


def write_back(tree: StoreTree, episode: Episode) -> None:
    """Best effort: give an episode known only from its entry its record again."""
    if os.path.lexists(tree.record_path(episode.episode_id, episode.id.week)):
        return
    try:
        materialize(tree, episode, durable=False)
    except OSError:
        pass  # the entry still holds it


def repair_holders(tree: StoreTree, holders: KeyHolders) -> None:
    """Best effort: give a lookup's holders the index entries and the records they lack.

    Never fails the caller: a store that cannot be written still answers (what is missing stays
    missing, and ``check`` keeps reporting it).
    """
    missing = {u.episode_id: u for u in holders.unindexed}
    for episode in holders.episodes:
        gap = missing.get(episode.episode_id)
        if gap is not None:
            tree.index.repair(holders.digest, gap.episode_id, marker=gap.marker, log=gap.log)
        write_back(tree, episode)


def index_committed(tree: StoreTree, episodes: list[Episode]) -> None:
    """After a commit: give committed episodes the markers and key-log lines they lack (best effort)."""
    for episode in episodes:
        digest = key_digest(episode.allocation_key)
        try:
            logged = episode.episode_id in tree.index.logged(digest)
        except IndexDamaged:
            continue  # the next lookup of that bucket rebuilds the index
        tree.index.repair(digest, episode.episode_id, marker=True, log=not logged)


def mark_rewritten(tree: StoreTree, episode_id: EpisodeId) -> None:
    """Append, durably, the mark that says the record is the truth from now on (`_week_history`)."""
    week = episode_id.week
    path = tree.history_path(week)
    tail = read_history_tail(path, week)
    if tail is not None and tail.version is not None and tail.version < 2:
        upgrade_history(tree, week)
        tail = read_history_tail(path, week)
    append_history(path, week, tail, mark_line(str(episode_id)))


def upgrade_history(tree: StoreTree, week: WeekId) -> None:
    """Rewrite a version 1 history as version 2 (fingerprints, marks), durably, before appending to it."""
    path = tree.history_path(week)
    payload = history_from(tree, week, list(tree.scan(week)))
    tmp = tree.week_dir(week) / tmp_name(HISTORY_FILE)
    try:
        write_file_synced(tmp, payload)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def history_from(tree: StoreTree, week: WeekId, members: list[Episode], floor: int | None = None) -> bytes:
    """A history of ``members`` that never lowers the highest sequence nor forgets a commit.

    ``floor``: a highest sequence known from elsewhere (an old key log's line, `_rebuild`).

    Members known only from their entry get their record written durably first, since the new
    history marks every record that is not fresh. An entry whose record is gone for good (lost
    after its rewrite, or a version 1 entry that cannot rebuild it) is kept, marked, so that its
    key still fails closed and `check` still reports it.
    """
    try:
        old = read_week_log(tree.history_path(week), week)
    except FileNotFoundError:
        old = None
    present = {m.episode_id for m in members}
    lost = [] if old is None else [e for e in old.entries if e["episode_id"] not in present]
    known = [e["sequence"] for e in lost] + ([] if floor is None else [floor])
    if old is not None and old.highest is not None:
        known.append(old.highest)
    highest = max([m.sequence for m in members] + known, default=None)
    kept = frozenset() if old is None else old.updated
    marked = {m.episode_id for m in members if not is_fresh(m) or m.episode_id in kept}
    marked |= {e["episode_id"] for e in lost}
    for member in members:
        if not os.path.lexists(tree.state_path(member.id)):
            materialize(tree, member, durable=True)
    return history_payload(week, highest, [*map(entry_of, members), *lost], marked)
