"""The embedded default store: one directory per episode, guarded by one ``flock`` (`StoreLock`).

Layout under the root (every JSON file carries ``schema_version``)::

    store.json                          namespace of this store
    .lock                               the lock held across discovery and persistence
    episodes/<week>/history.jsonl       the week's history, append-only JSON lines: an allocation's
                                        entry, fdatasynced, is its commit point (`_week_history`)
    episodes/<week>/<episode_id>/state.json   the episode record: written after the commit, durable
                                        from its first rewrite on; a lost fresh one is rebuilt
                                        from its entry
    episodes/<week>/.tmp-*              leftovers of interrupted writes: never read
    index/...                           the key index: markers and key logs (derived; see `_key_index`),
                                        sealed to its directories: a copied one is rebuilt (`_rebuild`)

An allocation's write order and why it is durable are in `FileSession`.

Nothing under the root is ever read or written through a symbolic link, and only regular files
are opened (see `durable.require_dir` and `durable.open_regular`): a link is `StoreCorrupted`
naming it. The root itself may be named through a link: it is resolved once, when the store
object is made.

A ``flock`` protects processes on one host only, and not on NFS: across hosts use the
PostgreSQL store.
"""

from __future__ import annotations

import builtins
import math
import os
import shutil
import stat
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ... import safe_json
from ...check import DamagedRecord, WeekRead
from ...episode import SCHEMA_VERSION, Episode, is_negative_zero, utc_now
from ...errors import (
    AllocationConflict,
    InvalidConfiguration,
    InvalidIdentifier,
    StoreCorrupted,
    StoreMissing,
    StoreUnavailable,
)
from ...identity import EpisodeId, WeekId
from ..base import EpisodeStore
from ..durable import (
    TMP_PREFIX,
    fsync_dir,
    read_file,
    read_json,
    read_versioned,
    require_dir,
    tmp_name,
    write_all,
    write_durable,
    write_file_synced,
)
from ._fresh_record import record_bytes
from ._key_index import BUCKET_CHARS, LAYOUT, IndexCopied, IndexDamaged, KeyIndex, Seal, key_digest
from ._lock import LockTimeout, StoreLock
from ._rebuild import rebuild
from ._session import STATE_FILE, FileSession
from ._week_history import (
    HISTORY_FILE,
    append_history,
    entry_of,
    fresh_episode,
    history_payload,
    is_fresh,
    mark_line,
    read_history,
    read_history_tail,
    read_week_log,
)

if TYPE_CHECKING:
    from ...check import CheckReport, EpisodeRule

__all__ = ["HISTORY_FILE", "STATE_FILE", "FileEpisodeStore", "key_digest"]


class FileEpisodeStore(EpisodeStore):
    """Episodes as files under ``root``; safe for many processes (and threads) on one machine."""

    def __init__(self, root: str | os.PathLike[str], *, lock_timeout: float = 30.0) -> None:
        if math.isnan(lock_timeout):
            # Every deadline comparison with NaN is false: a waiter would wait for ever unasked.
            raise InvalidIdentifier(
                "lock timeout", lock_timeout, "must be a number of seconds (negative: wait for ever)"
            )
        if is_negative_zero(lock_timeout):  # "try once" by its value, "wait for ever" by its sign: refused
            raise InvalidIdentifier(
                "lock timeout",
                lock_timeout,
                "is a negative zero: give 0 to try once, a negative number to wait for ever",
            )
        # Resolved once: a root named through a link is an ordinary name; links inside it are not.
        self.root = Path(os.path.realpath(root))
        if self.root == self.root.parent:
            # ``file:///$DIR`` with an empty variable: store.json, episodes/ and index/ beside /etc.
            raise InvalidConfiguration(
                "store", "path", f"{os.fspath(root)!r} is the file-system root: name a directory"
            )
        #: The root as text, for the hot path's paths (a pathlib join costs a microsecond each).
        self._root = str(self.root).rstrip("/")
        self._episodes = f"{self._root}/episodes"
        self.lock_timeout = lock_timeout
        self._lock = StoreLock(f"{self._root}/.lock", lock_timeout)
        self.index = KeyIndex(self._root)
        self._namespace: str | None = None
        self._ready = False

    # -- paths ---------------------------------------------------------------------------------
    @property
    def location(self) -> str:
        return str(self.root)

    def week_dir(self, week: WeekId) -> Path:
        return self.root / "episodes" / str(week)

    def episode_dir(self, episode_id: EpisodeId) -> Path:
        return self.week_dir(episode_id.week) / str(episode_id)

    def state_path(self, episode_id: EpisodeId) -> Path:
        return self.episode_dir(episode_id) / STATE_FILE

    def history_path(self, week: WeekId) -> Path:
        return self.week_dir(week) / HISTORY_FILE

    @property
    def index_dir(self) -> Path:
        return Path(self.index.dir)

    def key_bucket(self, digest: str) -> Path:
        return Path(self.index.bucket(digest))

    def _week(self, week: WeekId) -> str:
        return f"{self._episodes}/{week}"

    # -- port ----------------------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        if self._namespace is None:
            with self.io_errors():
                meta = self._read_store_meta() if self._root_exists() else None
            if meta is None:
                with self._session():
                    pass
            else:
                self._namespace = meta
        assert self._namespace is not None
        return self._namespace

    @contextmanager
    def _session(self, *, check_index: bool = True) -> Iterator[FileSession]:
        try:
            if not self._root_exists():
                self.root.mkdir(parents=True, exist_ok=True)
            self._lock.acquire()
        except LockTimeout as exc:
            raise StoreUnavailable(
                f"could not lock the store {self.root} within {self.lock_timeout:g}s (another process holds it)"
            ) from exc
        except OSError as exc:
            raise StoreUnavailable(f"cannot use the store root {self.root}: {exc.strerror or exc}") from exc
        try:
            if not self._ready:
                self._initialise(check_index=check_index)
            yield FileSession(self)
        except OSError as exc:  # inline, not `io_errors`: no extra generator on the allocation path
            raise self._io_error(exc) from exc
        finally:
            self._lock.release()

    def require_existing(self) -> None:
        with self.io_errors():
            exists = self._root_exists()
        if not exists:
            raise StoreMissing(f"no episode store at {self.root}: nothing was ever written there (readers create none)")

    def _root_exists(self) -> bool:
        """False when there is no store yet; `StoreCorrupted` when the root is not a real directory."""
        try:
            require_dir(self._root)
        except FileNotFoundError:
            return False
        return True

    def _io_error(self, exc: OSError) -> StoreUnavailable:
        """A file system error (a file turned directory, EIO) as the one error callers and the CLI see."""
        where = exc.filename or self.root
        return StoreUnavailable(f"store I/O failed at {where}: {exc.strerror or exc}")

    @contextmanager
    def io_errors(self) -> Iterator[None]:
        """`_io_error` for the unlocked reads (get, find, list) and for code that reads this store's files (migrate)."""
        try:
            yield
        except OSError as exc:
            raise self._io_error(exc) from exc

    def _read(self, episode_id: EpisodeId) -> Episode | None:
        with self.io_errors():
            return self._load(episode_id) if self._root_exists() else None

    def _read_holders(self, allocation_key: str) -> builtins.list[Episode]:
        with self.io_errors():
            if not self._root_exists():
                return []
            if os.path.lexists(self.index.meta):
                try:
                    return self.holders(allocation_key, repair=False)
                except IndexDamaged:
                    pass  # rebuilt by the next locked call; until then the records answer
            return [e for e in self._scan(None) if e.allocation_key == allocation_key]

    def _read_all(self, week: WeekId | None) -> builtins.list[Episode]:
        with self.io_errors():
            return list(self._scan(week)) if self._root_exists() else []

    def check(self, ids: Sequence[EpisodeId], rules: Sequence[EpisodeRule] = ()) -> CheckReport:
        """Read-only verification (``idempotent-jobs check``): never locks, never writes, never repairs."""
        from ._checker import check_file_store

        return check_file_store(self, ids, rules)

    # -- maintenance ---------------------------------------------------------------------------
    def rebuild_index(self) -> int:
        """Rebuild the key index and week histories from the episode files; returns episodes seen.

        The operator's rebuild: what only the old index knew is forgotten (`_rebuild`).
        """
        with self._session(check_index=False):
            count = self._rebuild_index(guard=False)
            self._ready = True
            return count

    # -- the key index -------------------------------------------------------------------------
    def holders(self, allocation_key: str, *, repair: bool) -> builtins.list[Episode]:
        """Every committed episode carrying the key, as far as the index and the holders' weeks tell.

        Both index records are read; a log line whose episode is gone or now carries another key
        fails closed. The week of each holder is then read whole (a retry is rare, and a week is
        small): a record copied in from a backup or edited by hand to carry the key shows up as a
        second holder. ``repair`` (under the lock) gives holders back the index entries they lack.
        `IndexDamaged` passes through.
        """
        lookup = self.index.lookup(allocation_key)
        found: dict[str, Episode] = {}
        for text in sorted(lookup.marked | lookup.logged):
            episode_id = EpisodeId.parse(text)
            episode = self._load(episode_id)
            vouched = text in lookup.logged
            if episode is None or episode.allocation_key != allocation_key:
                if vouched or self._entry_carries(episode_id, allocation_key):
                    self._vouched_but_gone(allocation_key, episode_id, episode)
                continue  # a marker left by an allocation that crashed before its commit
            found[text] = episode
            if repair and (text not in lookup.marked or not vouched):
                self.index.repair(lookup.digest, text, marker=text not in lookup.marked, log=not vouched)
            if repair:
                self._write_back(episode)
        for week in sorted({EpisodeId.parse(text).week for text in found}):
            for other in self._carrying(week, allocation_key):
                if other.episode_id not in found:
                    found[other.episode_id] = other
                    if repair:
                        self.index.repair(lookup.digest, other.episode_id, marker=True, log=True)
                        self._write_back(other)
        return list(found.values())

    def _entry_carries(self, episode_id: EpisodeId, allocation_key: str) -> bool:
        """True when the week's history has an entry giving ``episode_id`` this key (its commit)."""
        try:
            entry = read_week_log(self.history_path(episode_id.week), episode_id.week).entry(str(episode_id))
        except FileNotFoundError:
            return False
        return entry is not None and entry["allocation_key"] == allocation_key

    def _write_back(self, episode: Episode) -> None:
        """Under the lock, best effort: give an episode known only from its entry its record again."""
        if os.path.lexists(f"{self._week(episode.id.week)}/{episode.episode_id}/{STATE_FILE}"):
            return
        try:
            self.materialize(episode, durable=False)
        except OSError:
            pass  # the entry still holds it

    def _carrying(self, week: WeekId, allocation_key: str) -> Iterator[Episode]:
        """The records of ``week`` that carry the key; only those that could are parsed.

        A JSON string holds its text literally unless it uses an escape, and every escape starts
        with a backslash: a record with neither the key's bytes nor a backslash cannot carry it.
        """
        needle = allocation_key.encode("utf-8")
        for episode_id in self.committed_ids(week):
            directory = f"{self._week(week)}/{episode_id}"
            path = f"{directory}/{STATE_FILE}"
            try:
                require_dir(directory)
                raw = read_file(path)
            except FileNotFoundError:
                continue  # a record lost after its rewrite: `_entry_carries` speaks for it
            if needle not in raw and b"\\" not in raw:
                continue
            try:
                data = safe_json.loads(raw)
            except safe_json.UnsafeJson:
                data = None  # `_load` below says what is wrong with it
            key = data.get("allocation_key") if isinstance(data, dict) else None
            if key == allocation_key or not isinstance(key, str):
                episode = self._load(episode_id, dirs_checked=True)  # a malformed record raises here
                if episode is not None and episode.allocation_key == allocation_key:
                    yield episode
        for episode in self._entries_only(week):
            if episode.allocation_key == allocation_key:
                yield episode

    def _vouched_but_gone(self, allocation_key: str, episode_id: EpisodeId, episode: Episode | None) -> None:
        """Fail closed: the key log proves ``episode_id`` was committed for this key."""
        if episode is None:
            raise StoreCorrupted(
                str(self.state_path(episode_id)),
                f"missing, but the key log records {episode_id} as allocated for {allocation_key!r} "
                "(restore the episode from a backup; rebuild-index would forget it)",
            )
        raise AllocationConflict(
            allocation_key,
            f"the key log records {episode_id} as allocated for this key, but its record now carries "
            f"{episode.allocation_key!r} (edited by hand? see idempotent-jobs check)",
            (str(episode_id),),
        )

    def index_committed(self, episodes: builtins.list[Episode]) -> None:
        """After a commit: give committed episodes the markers and key-log lines they lack (best effort)."""
        for episode in episodes:
            digest = key_digest(episode.allocation_key)
            try:
                logged = episode.episode_id in self.index.logged(digest)
            except IndexDamaged:
                continue  # the next lookup of that bucket rebuilds the index
            self.index.repair(digest, episode.episode_id, marker=True, log=not logged)

    # -- internals -----------------------------------------------------------------------------
    def _read_store_meta(self) -> str | None:
        path = self.root / "store.json"
        try:
            data = read_versioned(path)
        except FileNotFoundError:
            return None
        namespace = data.get("namespace")
        if not isinstance(namespace, str) or not namespace:
            raise StoreCorrupted(str(path), "missing namespace")
        return namespace

    def _initialise(self, *, check_index: bool = True) -> None:
        """Under the lock: create ``store.json`` when missing; rebuild an index this tree cannot vouch for.

        That is a missing or outdated one, and one not sealed to these directories (`IndexCopied`:
        copied or restored, maybe older or newer than the weeks copied with it).
        """
        namespace = self._read_store_meta()
        if namespace is None:
            namespace = uuid.uuid4().hex
            meta = {"schema_version": SCHEMA_VERSION, "namespace": namespace, "created_at": utc_now()}
            write_durable(self.root / "store.json", meta)
        self._namespace = namespace
        if not check_index:
            return  # the caller rebuilds the index itself
        index = self.index
        copied = False
        try:
            index_meta = index.read_meta()
            # Built with another bucket width or layout: lookups would miss.
            built = (index_meta.get("bucket_chars"), index_meta.get("layout")) == (BUCKET_CHARS, LAYOUT)
            if built:
                index.seal = Seal.of(index_meta)
                index.require_dirs()
        except IndexCopied:
            built, copied = False, True
        except IndexDamaged:
            built = False
        if not built:
            self._rebuild_index(histories=not copied)
        self._ready = True

    def _rebuild_index(self, *, guard: bool = True, histories: bool = True) -> int:
        """Under the lock: rebuild the index and histories (`_rebuild`); ``guard``: never forget."""
        return rebuild(self, guard=guard, histories=histories)

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

    def _load(self, episode_id: EpisodeId, *, dirs_checked: bool = False) -> Episode | None:
        """The committed record, None if there is none; ``dirs_checked``: its week was verified.

        A record that is missing while the week's history holds its entry (lost by a crash or a
        power loss after the commit) is rebuilt from the entry, unless the history marks it
        rewritten: then it is lost for good, and None lets the caller fail closed.
        """
        week_dir = f"{self._episodes}/{episode_id.week}"
        try:
            if not dirs_checked:
                require_dir(self._episodes)
                require_dir(week_dir)
        except FileNotFoundError:
            return None
        return self._record(episode_id) or self._from_entry(episode_id)

    def _record(self, episode_id: EpisodeId) -> Episode | None:
        """The record file of ``episode_id`` in its (verified) week, None if it has none."""
        directory = f"{self._week(episode_id.week)}/{episode_id}"
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

    def _from_entry(self, episode_id: EpisodeId) -> Episode | None:
        """The fresh record of an entry whose record is missing; None without one or once rewritten."""
        try:
            log = read_week_log(self.history_path(episode_id.week), episode_id.week)
        except FileNotFoundError:
            return None
        entry = log.entry(str(episode_id))
        if entry is None or str(episode_id) in log.updated:
            return None
        return fresh_episode(entry, episode_id.week)

    def _entries_only(self, week: WeekId) -> Iterator[Episode]:
        """Episodes of ``week`` known only from their history entry (their record not written back yet)."""
        try:
            log = read_week_log(self.history_path(week), week)
        except FileNotFoundError:
            return
        for entry in log.entries:
            text = entry["episode_id"]
            if text in log.updated or os.path.lexists(f"{self._week(week)}/{text}/{STATE_FILE}"):
                continue
            episode = fresh_episode(entry, week)
            if episode is not None:
                yield episode

    # -- writes under the lock ---------------------------------------------------------------------
    def stage(self, episode: Episode, *, durable: bool = False) -> str:
        """Write the record into a new temp directory of its week; returns the directory.

        Not synced unless ``durable``: staged before an allocation's commit, renamed into place after it.
        """
        staging = f"{self._week(episode.id.week)}/{tmp_name(episode.episode_id)}"
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

    def materialize(self, episode: Episode, *, durable: bool) -> None:
        """Write a committed episode's record where readers look for it (a staged directory renamed in).

        Without ``durable`` no fsync: its history entry holds the record. Before a first rewrite
        (``durable``) the record and its directory's name must last.
        """
        week_dir = self._week(episode.id.week)
        final = f"{week_dir}/{episode.episode_id}"
        if os.path.lexists(final):  # a directory without its record (a migration's files moved in)
            require_dir(final)
            write_durable(Path(final) / STATE_FILE, episode.to_record())
        else:
            staging = self.stage(episode, durable=durable)
            try:
                os.rename(staging, final)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        if durable:
            fsync_dir(week_dir)

    def mark_rewritten(self, episode_id: EpisodeId) -> None:
        """Append, durably, the mark that says the record is the truth from now on (`_week_history`)."""
        week = episode_id.week
        path = self.history_path(week)
        tail = read_history_tail(path, week)
        if tail is not None and tail.version is not None and tail.version < 2:
            self.upgrade_history(week)
            tail = read_history_tail(path, week)
        append_history(path, week, tail, mark_line(str(episode_id)))

    def upgrade_history(self, week: WeekId) -> None:
        """Rewrite a version 1 history as version 2 (fingerprints, marks), durably, before appending to it."""
        self._write_history(week, [e for e in self._scan(week)])

    def _write_history(self, week: WeekId, members: builtins.list[Episode]) -> None:
        """Replace the week's history with one made from its episodes, durably."""
        path = self.history_path(week)
        payload = self._history_from(week, members)
        tmp = self.week_dir(week) / tmp_name(HISTORY_FILE)
        try:
            write_file_synced(tmp, payload)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fsync_dir(path.parent)

    def _history_from(self, week: WeekId, members: builtins.list[Episode], floor: int | None = None) -> bytes:
        """A history of ``members`` that never lowers the highest sequence nor forgets a commit.

        ``floor``: a highest sequence known from elsewhere (an old key log's line, `_rebuild`).

        Members known only from their entry get their record written durably first, since the new
        history marks every record that is not fresh. An entry whose record is gone for good (lost
        after its rewrite, or a version 1 entry that cannot rebuild it) is kept, marked, so that its
        key still fails closed and `check` still reports it.
        """
        try:
            old = read_week_log(self.history_path(week), week)
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
            if not os.path.lexists(self.state_path(member.id)):
                self.materialize(member, durable=True)
        return history_payload(week, highest, [*map(entry_of, members), *lost], marked)

    def week_stat(self, week: WeekId) -> os.stat_result | None:
        """The week directory's own status (never through a link), None if the week has none."""
        path = self._week(week)
        try:
            require_dir(self._episodes)
            status = os.lstat(path)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(status.st_mode):
            require_dir(path)  # raises, naming what it is
        return status

    def committed_ids(self, week: WeekId) -> builtins.list[EpisodeId]:
        """Ids of the episode directories in ``week`` (temp leftovers and strangers skipped)."""
        if self.week_stat(week) is None:
            return []
        ids = []
        for name in os.listdir(self._week(week)):
            if name.startswith(TMP_PREFIX) or name == HISTORY_FILE:
                continue
            try:
                episode_id = EpisodeId.parse(name)
            except ValueError:
                continue
            if episode_id.week == week:
                ids.append(episode_id)
        return sorted(ids)

    def weeks(self) -> builtins.list[WeekId]:
        try:
            require_dir(self._episodes)
        except FileNotFoundError:
            return []
        weeks = []
        for name in os.listdir(self._episodes):
            try:
                weeks.append(WeekId.parse(name))
            except ValueError:
                continue
        return sorted(weeks)

    def _scan(self, week: WeekId | None, damaged: builtins.list[DamagedRecord] | None = None) -> Iterator[Episode]:
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
                    episode = self._record(episode_id)
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
                        found = self._load(EpisodeId(each_week, entry["sequence"]), dirs_checked=True)
                    except StoreCorrupted as exc:
                        _skip(damaged, entry["episode_id"], exc)
                        continue
                    if found is not None:
                        seen.add(found.episode_id)
                        yield found

    def _read_week(self, week: WeekId) -> WeekRead:
        read = WeekRead([])
        with self.io_errors():
            if self._root_exists():
                read.episodes.extend(self._scan(week, read.damaged))
        return read


def _skip(damaged: builtins.list[DamagedRecord] | None, episode_id: str | None, exc: StoreCorrupted) -> None:
    """Name the damage in ``damaged`` and go on (`read_week`), or raise it when the caller skips nothing."""
    if damaged is None:
        raise exc
    damaged.append(DamagedRecord(episode_id, exc.where, exc.reason))
