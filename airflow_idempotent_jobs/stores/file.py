"""The embedded default store: one directory per episode, guarded by one ``filelock`` lock.

Layout under the root (every JSON file carries ``schema_version``)::

    store.json                          namespace of this store
    .lock                               the lock held across discovery and persistence
    episodes/<week>/<episode_id>/state.json   the episode record: its rename is the commit point
    episodes/<week>/history.jsonl       the week group's history, append-only JSON lines (derived;
                                        may lag by a crash: see `_week_history`)
    episodes/<week>/.tmp-*              leftovers of interrupted writes: never read
    index/meta.json                     marks the key index as built, with its bucket width
    index/marker                        the empty file every key marker is a hard link of
    index/keys/<h2>/<sha256(key)>.<episode_id>   empty marker files: the key index (derived;
                                        all 256 buckets are made when the index is built)

An allocation's write order and why it is durable are in `FileSession`.

A ``flock`` protects processes on one host only, and not on NFS: across hosts use the
PostgreSQL store.
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import hashlib
import math
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import filelock

from ..episode import SCHEMA_VERSION, Episode, utc_now
from ..errors import InvalidIdentifier, StoreCorrupted, StoreUnavailable
from ..identity import EpisodeId, WeekId
from ._file_session import STATE_FILE, FileSession
from ._week_history import HISTORY_FILE, history_payload, read_history, read_history_tail
from .base import EpisodeStore
from .durable import TMP_PREFIX, SyncBatch, read_json, read_versioned, tmp_name, write_durable

if TYPE_CHECKING:
    from ..check import CheckReport, EpisodeRule

__all__ = ["HISTORY_FILE", "STATE_FILE", "FileEpisodeStore", "key_digest"]

MARKER_TEMPLATE = "marker"
#: Hex characters of the key digest that name a marker's bucket: 256 buckets keep a lookup's
#: listing short (80 names at 20 000 episodes) while a young store soon has every bucket made.
_KEY_BUCKET_CHARS = 2
#: How often a waiting process probes the lock (see `FileEpisodeStore._acquire_lock`).
_PROBE_INTERVAL = 0.0005
#: Errors of ``link`` that mean "this file system will not hard-link here": create the marker instead.
_NO_LINK_ERRNOS = frozenset({errno.EMLINK, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV})


def key_digest(allocation_key: str) -> str:
    return hashlib.sha256(allocation_key.encode("utf-8")).hexdigest()


class FileEpisodeStore(EpisodeStore):
    """Episodes as files under ``root``; safe for many processes on one machine."""

    def __init__(self, root: str | os.PathLike[str], *, lock_timeout: float = 30.0) -> None:
        if math.isnan(lock_timeout):
            # Every deadline comparison with NaN is false: a waiter would wait for ever unasked.
            raise InvalidIdentifier(
                "lock timeout", lock_timeout, "must be a number of seconds (negative: wait for ever)"
            )
        self.root = Path(root).absolute()
        #: The root as text, for the hot path's paths (a pathlib join costs a microsecond each).
        self._root = str(self.root).rstrip("/")
        self.lock_timeout = lock_timeout
        self._lock = filelock.FileLock(
            self.root / ".lock",
            timeout=lock_timeout,
            # Polling, not blocking: 1 ms keeps throughput under contention.
            poll_interval=0.001,
            # Never silently degrade to a lock file that a crash could leave behind.
            fallback_to_soft=False,
            preserve_lock_file=True,
            thread_local=False,
        )
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
        return self.root / "index"

    def key_bucket(self, digest: str) -> Path:
        return Path(self._bucket(digest))

    def _week(self, week: WeekId) -> str:
        return f"{self._root}/episodes/{week}"

    def _bucket(self, digest: str) -> str:
        return f"{self._root}/index/keys/{digest[:_KEY_BUCKET_CHARS]}"

    # -- port ----------------------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        if self._namespace is None:
            with self.io_errors():
                meta = self._read_store_meta()
            if meta is None:
                with self._session():
                    pass
            else:
                self._namespace = meta
        assert self._namespace is not None
        return self._namespace

    @contextmanager
    def _session(self) -> Iterator[FileSession]:
        try:
            if not self._ready:
                self.root.mkdir(parents=True, exist_ok=True)
            self._acquire_lock()
        except filelock.Timeout as exc:
            raise StoreUnavailable(
                f"could not lock the store {self.root} within {self.lock_timeout:g}s (another process holds it)"
            ) from exc
        except OSError as exc:
            raise StoreUnavailable(f"cannot use the store root {self.root}: {exc.strerror or exc}") from exc
        try:
            if not self._ready:
                self._initialise()
            yield FileSession(self)
        except OSError as exc:  # inline, not `io_errors`: no extra generator on the allocation path
            raise self._io_error(exc) from exc
        finally:
            self._lock.release()

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

    def _acquire_lock(self) -> None:
        """Take the ``filelock`` lock; while another process holds it, wait by a cheap probe.

        A refused ``filelock`` attempt costs about 45 us of CPU; seven waiters polling every
        millisecond burn a third of a core that the holder needs on a small machine. So a waiter
        probes the same ``flock`` with a bare non-blocking call on its own descriptor (about 1 us),
        lets go at once, and only then asks ``filelock``, which may still lose the race and wait again.
        """
        try:
            self._lock.acquire(blocking=False)
            return
        except filelock.Timeout:
            pass
        # A negative timeout waits for ever, as in ``filelock``.
        deadline = time.monotonic() + self.lock_timeout if self.lock_timeout >= 0 else float("inf")
        probe = os.open(self._lock.lock_file, os.O_RDWR | os.O_CLOEXEC)
        try:
            while True:
                time.sleep(_PROBE_INTERVAL)
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise filelock.Timeout(self._lock.lock_file) from None
                    continue
                fcntl.flock(probe, fcntl.LOCK_UN)
                try:
                    self._lock.acquire(blocking=False)
                    return
                except filelock.Timeout:
                    if time.monotonic() >= deadline:
                        raise

        finally:
            os.close(probe)

    def _read(self, episode_id: EpisodeId) -> Episode | None:
        with self.io_errors():
            return self._load(episode_id)

    def _read_holders(self, allocation_key: str) -> builtins.list[Episode]:
        with self.io_errors():
            if not (self.index_dir / "meta.json").exists():
                return [e for e in self._scan(None) if e.allocation_key == allocation_key]
            return self._indexed_holders(allocation_key)

    def _read_all(self, week: WeekId | None) -> builtins.list[Episode]:
        with self.io_errors():
            return list(self._scan(week))

    def check(self, ids: Sequence[EpisodeId], rules: Sequence[EpisodeRule] = ()) -> CheckReport:
        """Read-only verification (``idempotent-jobs check``): never locks, never writes, never repairs."""
        from .file_check import check_file_store

        return check_file_store(self, ids, rules)

    # -- maintenance ---------------------------------------------------------------------------
    def rebuild_index(self) -> int:
        """Rebuild the key index and week histories from the episode files; returns episodes seen."""
        with self._session():
            return self._rebuild_index()

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

    def _initialise(self) -> None:
        """Under the lock: create ``store.json``, the marker template and the key index when missing."""
        namespace = self._read_store_meta()
        if namespace is None:
            namespace = uuid.uuid4().hex
            meta = {"schema_version": SCHEMA_VERSION, "namespace": namespace, "created_at": utc_now()}
            write_durable(self.root / "store.json", meta)
        meta_path = self.index_dir / "meta.json"
        if meta_path.exists():
            if read_versioned(meta_path).get("bucket_chars") != _KEY_BUCKET_CHARS:
                self._rebuild_index()  # built with another bucket width: lookups would miss
        else:
            self._rebuild_index()
        self._namespace = namespace
        self._ready = True

    def _rebuild_index(self) -> int:
        meta_path = self.index_dir / "meta.json"
        meta_path.unlink(missing_ok=True)
        episodes = list(self._scan(None))
        keys_dir = self.index_dir / "keys"
        if keys_dir.exists():
            shutil.rmtree(keys_dir)
        batch = SyncBatch()
        try:
            if not self.index_dir.is_dir():
                self.index_dir.mkdir(parents=True)
                batch.directory(self.root)
            if not (self.index_dir / MARKER_TEMPLATE).exists():
                self._new_marker_template(batch)
            # Every bucket up front: a one-time cost (256 directories, tens of ms) instead of an
            # extra directory and fsync on most allocations of a young store.
            keys_dir.mkdir()
            for n in range(16**_KEY_BUCKET_CHARS):
                (keys_dir / f"{n:0{_KEY_BUCKET_CHARS}x}").mkdir()
            batch.directory(keys_dir)
            batch.directory(self.index_dir)
            for episode in episodes:
                self._write_marker(episode, batch)
            by_week: dict[str, builtins.list[Episode]] = {}
            for episode in episodes:
                by_week.setdefault(episode.week_id, []).append(episode)
            renames = []
            for week_text, members in by_week.items():
                week = WeekId.parse(week_text)
                # Never lower the week's highest sequence, even if an episode directory went missing.
                previous = self.history_highest(week, whole=True)
                highest = max([m.sequence for m in members] + ([previous] if previous is not None else []))
                tmp = self.week_dir(week) / tmp_name(HISTORY_FILE)
                batch.create(tmp, history_payload(week, highest, members))
                renames.append((tmp, self.history_path(week)))
            batch.flush()
        finally:
            batch.close()
        for tmp, final in renames:
            os.replace(tmp, final)
            batch.directory(final.parent)
        batch.flush()
        meta = {"schema_version": SCHEMA_VERSION, "kind": "key-index", "bucket_chars": _KEY_BUCKET_CHARS}
        write_durable(meta_path, {**meta, "built_at": utc_now()})
        return len(episodes)

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

    def _write_marker(self, episode: Episode, batch: SyncBatch, created: builtins.list[str] | None = None) -> None:
        """Add the key-index marker for ``episode``; ``batch`` will fsync the directories it touched.

        Paths this call creates are appended to ``created``, so a failed write can take them back.

        A marker is a hard link of one empty template file: creating an inode costs far more than
        adding a name (0.5 ms against 0.01 ms on the reference ext4 disk), and markers carry no data.
        """
        digest = key_digest(episode.allocation_key)
        bucket = self._bucket(digest)
        marker = f"{bucket}/{digest}.{episode.episode_id}"
        template = f"{self._root}/index/{MARKER_TEMPLATE}"
        made = [] if created is None else created
        for attempt in range(3):
            try:
                os.link(template, marker)
                made.append(marker)
                break
            except FileExistsError:
                break  # left by an interrupted write of this very episode: already in place
            except FileNotFoundError:
                if attempt == 2:
                    raise
                if not os.path.isdir(bucket):
                    os.makedirs(bucket, exist_ok=True)
                    made.append(bucket)
                    batch.directory(os.path.dirname(bucket))
                if not os.path.exists(template):
                    self._new_marker_template(batch)
            except OSError as exc:
                if exc.errno not in _NO_LINK_ERRNOS:
                    raise
                # Too many links (ext4 allows 65 000) or no hard links here: a fresh empty file
                # does as well; the next marker links a fresh template.
                os.close(os.open(marker, os.O_WRONLY | os.O_CREAT, 0o644))
                made.append(marker)
                if exc.errno == errno.EMLINK:
                    self._new_marker_template(batch)
                break
        batch.directory(bucket)

    def _new_marker_template(self, batch: SyncBatch) -> None:
        template = self.index_dir / MARKER_TEMPLATE
        template.parent.mkdir(parents=True, exist_ok=True)
        tmp = template.with_name(tmp_name(MARKER_TEMPLATE))
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.replace(tmp, template)  # markers linked to an older template keep it alive
        batch.directory(template.parent)

    def _indexed_holders(self, allocation_key: str) -> builtins.list[Episode]:
        digest = key_digest(allocation_key)
        bucket = self._bucket(digest)
        try:
            names = os.listdir(bucket)
        except FileNotFoundError:
            return []
        holders = []
        prefix = digest + "."
        for name in [n for n in names if n.startswith(prefix)]:  # a bucket holds ~1/256 of all keys
            try:
                episode_id = EpisodeId.parse(name[len(digest) + 1 :])
            except ValueError as exc:
                raise StoreCorrupted(f"{bucket}/{name}", "index entry names no valid episode id") from exc
            episode = self._load(episode_id)
            # A marker whose episode was never committed, or was committed for another key by a
            # later allocation, is the leftover of an interrupted write: not a holder.
            if episode is not None and episode.allocation_key == allocation_key:
                holders.append(episode)
        return holders

    def _load(self, episode_id: EpisodeId) -> Episode | None:
        path = f"{self._week(episode_id.week)}/{episode_id}/{STATE_FILE}"
        try:
            data = read_json(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        episode = Episode.from_record(data, path)
        if episode.episode_id != str(episode_id):
            raise StoreCorrupted(path, f"record says {episode.episode_id} but lives in {episode_id}")
        return episode

    def committed_ids(self, week: WeekId) -> builtins.list[EpisodeId]:
        """Ids of the episode directories in ``week`` (temp leftovers and strangers skipped)."""
        try:
            names = os.listdir(self._week(week))
        except FileNotFoundError:
            return []
        ids = []
        for name in names:
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
            names = os.listdir(self.root / "episodes")
        except FileNotFoundError:
            return []
        weeks = []
        for name in names:
            try:
                weeks.append(WeekId.parse(name))
            except ValueError:
                continue
        return sorted(weeks)

    def _scan(self, week: WeekId | None) -> Iterator[Episode]:
        for each_week in [week] if week is not None else self.weeks():
            for episode_id in self.committed_ids(each_week):
                episode = self._load(episode_id)
                if episode is not None:
                    yield episode
