"""The file store's rebuild of its key index and week histories from the episode files.

Two callers, two policies for what only the old index knows (a key-log line naming an episode
that no record and no history entry holds with that key):

- the store itself, under its lock, when the index is missing a part, has another layout, or is
  not the index built in this directory (`IndexCopied`: a copy, a restore, an earlier release):
  it never forgets. Such a line means the weeks were copied before the index (a hot backup walks
  directories in its own order) or lost since, so it fails closed before changing anything, in one
  line that says how to go on. Otherwise every committed episode is indexed, so a restore whose
  index is older than its weeks gets every late key back.
- the operator's ``rebuild-index``: the episode files are the truth and such lines are forgotten
  (their keys may be allocated again), but their ids are never given out again: a week's highest
  sequence is raised to the highest the old logs name.

The index is sealed last (``meta.json``, written after everything else is durable): a rebuild cut
short leaves no ``meta.json``, and the next locked call rebuilds again.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ...episode import SCHEMA_VERSION, Episode, utc_now
from ...errors import StoreCorrupted
from ...identity import EpisodeId, WeekId
from ..durable import SyncBatch, require_dir, tmp_name, write_durable
from ._key_index import BUCKET_CHARS, LAYOUT, key_digest, log_line
from ._tree import StoreTree
from ._week_history import HISTORY_FILE, read_week_log
from ._writes import history_from

__all__ = ["rebuild"]


def rebuild(tree: StoreTree, *, guard: bool, histories: bool = True) -> int:
    """Rebuild the index (and every week's history) under the lock; returns the episodes seen.

    ``guard``: the store's own rebuild (fails closed on what only the old index knows), not the
    operator's. A record that cannot be read stops either one, with nothing changed. Without
    ``histories`` the weeks are left as they are (a copied index of this layout: the histories
    need no upgrade, an allocation appends what its week's history lacks, and rewriting thousands
    of them durably would hold the lock for a minute).
    """
    index = tree.index
    episodes = list(tree.scan(None))
    # Entries whose record is gone for good stay committed: the index keeps their keys held.
    present = {e.episode_id for e in episodes}
    held = [(e.allocation_key, e.episode_id) for e in episodes]
    for week in tree.weeks():
        try:
            old = read_week_log(tree.history_path(week), week)
        except FileNotFoundError:
            continue
        held += [(e["allocation_key"], e["episode_id"]) for e in old.entries if e["episode_id"] not in present]
    _refuse_links(tree, guard=guard)
    floors = _floors(tree, held, guard=guard)
    try:
        os.unlink(index.meta)  # a rebuild cut short leaves no meta.json, so the next open rebuilds
    except FileNotFoundError:
        pass
    batch = SyncBatch()
    try:
        try:
            require_dir(index.dir)
        except FileNotFoundError:
            os.mkdir(index.dir)
            batch.directory(tree.text)
        for directory in (index.keys, index.logs):
            try:
                require_dir(directory)  # never remove through a link
                shutil.rmtree(directory)
            except FileNotFoundError:
                pass
        if not os.path.lexists(index.template):
            index.new_template(batch)
        # Every bucket and log up front: a one-time cost (512 entries, tens of ms) that lets a
        # missing one be told apart from one never needed.
        lines: dict[str, list[bytes]] = {}
        for key, episode_id in held:
            digest = key_digest(key)
            lines.setdefault(digest[:BUCKET_CHARS], []).append(log_line(digest, episode_id))
        os.mkdir(index.keys)
        os.mkdir(index.logs)
        for n in range(16**BUCKET_CHARS):
            name = f"{n:0{BUCKET_CHARS}x}"
            os.mkdir(f"{index.keys}/{name}")
            if name in lines:
                batch.create(f"{index.logs}/{name}.log", b"".join(lines[name]))
            else:  # no data to sync: the directory's fsync makes the empty file last
                os.close(os.open(f"{index.logs}/{name}.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        batch.directory(index.keys)
        batch.directory(index.logs)
        batch.directory(index.dir)
        for key, episode_id in held:
            index.write_marker(key_digest(key), episode_id, batch, [])
        by_week: dict[WeekId, list[Episode]] = {week: [] for week in floors}
        for episode in episodes if histories else ():
            by_week.setdefault(EpisodeId.parse(episode.episode_id).week, []).append(episode)
        renames = []
        for week, members in by_week.items():
            week_dir = tree.week_dir(week)
            if not os.path.lexists(week_dir):  # a week only the old index still knew
                for made in (week_dir.parent, week_dir):
                    if not os.path.lexists(made):
                        os.mkdir(made)
                        batch.directory(made.parent)
            # Never lower the week's highest sequence, even if an episode directory went missing.
            tmp = week_dir / tmp_name(HISTORY_FILE)
            batch.create(tmp, history_from(tree, week, members, floors.get(week)))
            renames.append((tmp, tree.history_path(week)))
        batch.flush()
    finally:
        batch.close()
    for tmp, final in renames:
        os.replace(tmp, final)
        batch.directory(final.parent)
    batch.flush()
    seal = index.current_seal()
    meta = {"schema_version": SCHEMA_VERSION, "kind": "key-index", "bucket_chars": BUCKET_CHARS, "layout": LAYOUT}
    write_durable(Path(index.meta), {**meta, "seal": seal.record(), "built_at": utc_now()})
    index.seal = seal
    return len(episodes)


def _refuse_links(tree: StoreTree, *, guard: bool) -> None:
    """`StoreCorrupted` for an index directory that is a link or not a directory, before anything moves.

    ``guard``: every bucket too (the store's own rebuild must not clear away a link a lookup refuses).
    """
    index = tree.index
    present = []
    for directory in (index.dir, index.keys, index.logs):
        try:
            require_dir(directory)
            present.append(directory)
        except FileNotFoundError:
            if directory == index.dir:
                return  # nothing of the index below it
    if guard and index.keys in present:
        for name in sorted(os.listdir(index.keys)):
            require_dir(f"{index.keys}/{name}")


def _floors(tree: StoreTree, held: list[tuple[str, str]], *, guard: bool) -> dict[WeekId, int]:
    """The highest sequence of each week that only the old key logs name (the ``guard`` fails closed on one)."""
    backed = {(key_digest(key), episode_id) for key, episode_id in held}
    unknown = [(d, e, path) for d, e, path in tree.index.recorded(strict=guard) if (d, e) not in backed]
    if unknown and guard:
        _, episode_id, path = unknown[0]
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise StoreCorrupted(
            path,
            f"records {episode_id}{more} as allocated, but no record or history "
            "entry gives it that key: the weeks are older than index/ (restored from a backup that copied "
            "them first?); restore them from a later backup, or run `idempotent-jobs rebuild-index` to "
            "forget these episodes (their keys may be allocated again, their ids never are)",
        )
    floors: dict[WeekId, int] = {}
    for _, text, _ in unknown:
        lost = EpisodeId.parse(text)
        floors[lost.week] = max(floors.get(lost.week, -1), lost.sequence)
    return floors
