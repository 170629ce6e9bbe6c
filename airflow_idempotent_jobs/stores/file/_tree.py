"""The file store's read layer: its paths, and every read that needs no lock and writes nothing.

The layout under the root is drawn in docs/design.md ("The file store"). Every writer of the
store (`_writes`, `_rebuild`, `_session`) and the checker (`_check`) read through a `StoreTree`;
nothing here imports them.

Reads see whole records only: a record is renamed into place, a history entry is one append. A
record missing while its week's history holds its entry (lost by a crash or a power loss after the
commit) is read from the entry, unless the history marks it rewritten: then it is lost for good,
and the reader gets None and fails closed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from ...episode import Episode
from ...errors import StoreCorrupted
from ...identity import EpisodeId, WeekId
from ...record_rules import DamagedRecord
from ..durable import TMP_PREFIX, read_json, read_versioned, require_dir
from ._key_index import KeyIndex
from ._week_history import HISTORY_FILE, fresh_episode, read_history, read_history_tail, read_week_log

__all__ = ["STATE_FILE", "StoreTree"]

#: The episode record inside each episode directory (written after the commit: see `_session`).
STATE_FILE = "state.json"


class StoreTree:
    """The directory tree of one store root (paths as text on the hot path: a pathlib join costs a microsecond)."""

    def __init__(self, root: Path) -> None:
        #: The root, resolved once by the store: a root named through a link is an ordinary name.
        self.root = root
        #: The root as text, without a trailing slash.
        self.text = str(root).rstrip("/")
        self.episodes = f"{self.text}/episodes"
        self.meta = root / "store.json"
        self.index = KeyIndex(self.text)

    # -- paths ---------------------------------------------------------------------------------
    def week(self, week: WeekId) -> str:
        return f"{self.episodes}/{week}"

    def record_path(self, episode_id: EpisodeId | str, week: WeekId) -> str:
        return f"{self.episodes}/{week}/{episode_id}/{STATE_FILE}"

    def week_dir(self, week: WeekId) -> Path:
        return self.root / "episodes" / str(week)

    def episode_dir(self, episode_id: EpisodeId) -> Path:
        return self.week_dir(episode_id.week) / str(episode_id)

    def state_path(self, episode_id: EpisodeId) -> Path:
        return self.episode_dir(episode_id) / STATE_FILE

    def history_path(self, week: WeekId) -> Path:
        return self.week_dir(week) / HISTORY_FILE

    # -- the root --------------------------------------------------------------------------------
    def root_exists(self) -> bool:
        """False when there is no store yet; `StoreCorrupted` when the root is not a real directory."""
        try:
            require_dir(self.text)
        except FileNotFoundError:
            return False
        return True

    def read_namespace(self) -> str | None:
        """The namespace ``store.json`` records, None without the file."""
        try:
            data = read_versioned(self.meta)
        except FileNotFoundError:
            return None
        namespace = data.get("namespace")
        if not isinstance(namespace, str) or not namespace:
            raise StoreCorrupted(str(self.meta), "missing namespace")
        return namespace

    # -- one episode ---------------------------------------------------------------------------
    def load(self, episode_id: EpisodeId, *, dirs_checked: bool = False) -> Episode | None:
        """The committed record, None if there is none; ``dirs_checked``: its week was verified."""
        try:
            if not dirs_checked:
                require_dir(self.episodes)
                require_dir(self.week(episode_id.week))
        except FileNotFoundError:
            return None
        return self.record(episode_id) or self.from_entry(episode_id)

    def record(self, episode_id: EpisodeId) -> Episode | None:
        """The record file of ``episode_id`` in its (verified) week, None if it has none."""
        directory = f"{self.week(episode_id.week)}/{episode_id}"
        path = f"{directory}/{STATE_FILE}"
        try:
            require_dir(directory)
            data = read_json(path)
        except FileNotFoundError:
            return None
        episode = Episode.from_record(data, path)
        if episode.episode_id != str(episode_id):
            raise StoreCorrupted(path, f"record says {episode.episode_id} but lives in {episode_id}")
        return episode

    def from_entry(self, episode_id: EpisodeId) -> Episode | None:
        """The fresh record of an entry whose record is missing; None without one or once rewritten."""
        try:
            log = read_week_log(self.history_path(episode_id.week), episode_id.week)
        except FileNotFoundError:
            return None
        entry = log.entry(str(episode_id))
        if entry is None or str(episode_id) in log.updated:
            return None
        return fresh_episode(entry, episode_id.week)

    def entry_carries(self, episode_id: EpisodeId, allocation_key: str) -> bool:
        """True when the week's history has an entry giving ``episode_id`` this key (its commit)."""
        try:
            entry = read_week_log(self.history_path(episode_id.week), episode_id.week).entry(str(episode_id))
        except FileNotFoundError:
            return False
        return entry is not None and entry["allocation_key"] == allocation_key

    # -- one week ------------------------------------------------------------------------------
    def entries_only(self, week: WeekId) -> Iterator[Episode]:
        """Episodes of ``week`` known only from their history entry (their record not written back yet)."""
        try:
            log = read_week_log(self.history_path(week), week)
        except FileNotFoundError:
            return
        for entry in log.entries:
            text = entry["episode_id"]
            if text in log.updated or os.path.lexists(self.record_path(text, week)):
                continue
            episode = fresh_episode(entry, week)
            if episode is not None:
                yield episode

    def week_stat(self, week: WeekId) -> os.stat_result | None:
        """The week directory's own status (never through a link), None if the week has none."""
        path = self.week(week)
        try:
            require_dir(self.episodes)
            status = os.lstat(path)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(status.st_mode):
            require_dir(path)  # raises, naming what it is
        return status

    def committed_ids(self, week: WeekId) -> list[EpisodeId]:
        """Ids of the episode directories in ``week`` (temp leftovers and strangers skipped)."""
        if self.week_stat(week) is None:
            return []
        ids = []
        for name in os.listdir(self.week(week)):
            if name.startswith(TMP_PREFIX) or name == HISTORY_FILE:
                continue
            try:
                episode_id = EpisodeId.parse(name)
            except ValueError:
                continue
            if episode_id.week == week:
                ids.append(episode_id)
        return sorted(ids)

    def history_highest(self, week: WeekId, *, whole: bool = False) -> int | None:
        """The highest sequence the week's history records (its tail, or ``whole`` file), None if none."""
        path = self.history_path(week)
        if not whole:
            tail = read_history_tail(path, week)
            return None if tail is None else tail.highest
        try:
            highest, entries = read_history(path, week)
        except FileNotFoundError:
            return None
        return max([e["sequence"] for e in entries] + ([highest] if highest is not None else []), default=None)

    # -- every week ------------------------------------------------------------------------------
    def weeks(self) -> list[WeekId]:
        try:
            require_dir(self.episodes)
        except FileNotFoundError:
            return []
        weeks = []
        for name in os.listdir(self.episodes):
            try:
                weeks.append(WeekId.parse(name))
            except ValueError:
                continue
        return sorted(weeks)

    def scan(self, week: WeekId | None, damaged: list[DamagedRecord] | None = None) -> Iterator[Episode]:
        """Every committed episode: the records, and those known only from their history entry.

        The history is read after the directory listing: an entry whose record was renamed into
        place in between is read from its record, so an episode committed before the scan began is
        never left out. With ``damaged``, a record or history that is `StoreCorrupted` is appended
        there and skipped (`read_week`); without it, it raises.
        """
        for each_week in [week] if week is not None else self.weeks():
            seen = set()  # read, or damaged: never read again from its entry
            for episode_id in self.committed_ids(each_week):
                try:
                    episode = self.record(episode_id)
                except StoreCorrupted as exc:
                    _skip(damaged, str(episode_id), exc)
                    seen.add(str(episode_id))
                    continue
                if episode is not None:  # else known from its entry below, or lost after a rewrite
                    seen.add(episode.episode_id)
                    yield episode
            try:
                log = read_week_log(self.history_path(each_week), each_week)
            except FileNotFoundError:
                continue
            except StoreCorrupted as exc:
                _skip(damaged, None, exc)
                continue
            for entry in log.entries:
                if entry["episode_id"] not in seen:
                    try:
                        found = self.load(EpisodeId(each_week, entry["sequence"]), dirs_checked=True)
                    except StoreCorrupted as exc:
                        _skip(damaged, entry["episode_id"], exc)
                        continue
                    if found is not None:
                        seen.add(found.episode_id)
                        yield found


def _skip(damaged: list[DamagedRecord] | None, episode_id: str | None, exc: StoreCorrupted) -> None:
    """Name the damage in ``damaged`` and go on (`read_week`), or raise it when the caller skips nothing."""
    if damaged is None:
        raise exc
    damaged.append(DamagedRecord(episode_id, exc.where, exc.reason))
