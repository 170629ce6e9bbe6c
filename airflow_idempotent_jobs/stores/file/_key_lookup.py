"""Which committed episodes carry a key: a pure read of the key index and the holders' weeks.

The lookup never writes. What it finds missing from the index (a holder without its marker or its
log line, a holder known only from its history entry) it names in `KeyHolders`; a writer holding
the lock gives it back (`_writes.repair_holders`), readers leave it for the next writer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ... import safe_json
from ...episode import Episode
from ...errors import AllocationConflict, StoreCorrupted
from ...identity import EpisodeId, WeekId
from ..durable import read_file, require_dir
from ._tree import STATE_FILE, StoreTree

__all__ = ["KeyHolders", "Unindexed", "find_holders"]


@dataclass(frozen=True)
class Unindexed:
    """A holder the key index lacks an entry for (lost by a crash, or copied in from a backup)."""

    episode_id: str
    #: It has no marker for the key.
    marker: bool
    #: The key log has no line for it.
    log: bool


@dataclass(frozen=True)
class KeyHolders:
    """What a lookup of one key found."""

    #: The key's digest: it names the index bucket and log.
    digest: str
    #: Every committed episode carrying the key (normally zero or one).
    episodes: tuple[Episode, ...]
    #: Holders whose index entries are missing, for a writer to give back.
    unindexed: tuple[Unindexed, ...]


def find_holders(tree: StoreTree, allocation_key: str) -> KeyHolders:
    """Every committed episode carrying the key, as far as the index and the holders' weeks tell.

    Both index records are read; a log line whose episode is gone or now carries another key
    fails closed. The week of each holder is then read whole (a retry is rare, and a week is
    small): a record copied in from a backup or edited by hand to carry the key shows up as a
    second holder. `IndexDamaged` passes through.
    """
    lookup = tree.index.lookup(allocation_key)
    found: dict[str, Episode] = {}
    unindexed: list[Unindexed] = []
    for text in sorted(lookup.marked | lookup.logged):
        episode_id = EpisodeId.parse(text)
        episode = tree.load(episode_id)
        vouched = text in lookup.logged
        if episode is None or episode.allocation_key != allocation_key:
            if vouched or tree.entry_carries(episode_id, allocation_key):
                _vouched_but_gone(tree, allocation_key, episode_id, episode)
            continue  # a marker left by an allocation that crashed before its commit
        found[text] = episode
        if text not in lookup.marked or not vouched:
            unindexed.append(Unindexed(text, marker=text not in lookup.marked, log=not vouched))
    for week in sorted({EpisodeId.parse(text).week for text in found}):
        for other in _carrying(tree, week, allocation_key):
            if other.episode_id not in found:
                found[other.episode_id] = other
                unindexed.append(Unindexed(other.episode_id, marker=True, log=True))
    return KeyHolders(lookup.digest, tuple(found.values()), tuple(unindexed))


def _carrying(tree: StoreTree, week: WeekId, allocation_key: str) -> Iterator[Episode]:
    """The records of ``week`` that carry the key; only those that could are parsed.

    A JSON string holds its text literally unless it uses an escape, and every escape starts
    with a backslash: a record with neither the key's bytes nor a backslash cannot carry it.
    """
    needle = allocation_key.encode("utf-8")
    for episode_id in tree.committed_ids(week):
        directory = f"{tree.week(week)}/{episode_id}"
        path = f"{directory}/{STATE_FILE}"
        try:
            require_dir(directory)
            raw = read_file(path)
        except FileNotFoundError:
            continue  # a record lost after its rewrite: `entry_carries` speaks for it
        if needle not in raw and b"\\" not in raw:
            continue
        try:
            data = safe_json.loads(raw)
        except safe_json.UnsafeJson:
            data = None  # `load` below says what is wrong with it
        key = data.get("allocation_key") if isinstance(data, dict) else None
        if key == allocation_key or not isinstance(key, str):
            episode = tree.load(episode_id, dirs_checked=True)  # a malformed record raises here
            if episode is not None and episode.allocation_key == allocation_key:
                yield episode
    for episode in tree.entries_only(week):
        if episode.allocation_key == allocation_key:
            yield episode


def _vouched_but_gone(tree: StoreTree, allocation_key: str, episode_id: EpisodeId, episode: Episode | None) -> None:
    """Fail closed: the key log proves ``episode_id`` was committed for this key."""
    if episode is None:
        raise StoreCorrupted(
            str(tree.state_path(episode_id)),
            f"missing, but the key log records {episode_id} as allocated for {allocation_key!r} "
            "(restore the episode from a backup; rebuild-index would forget it)",
        )
    raise AllocationConflict(
        allocation_key,
        f"the key log records {episode_id} as allocated for this key, but its record now carries "
        f"{episode.allocation_key!r} (edited by hand? see idempotent-jobs check)",
        (str(episode_id),),
    )
