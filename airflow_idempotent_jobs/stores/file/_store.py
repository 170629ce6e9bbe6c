"""`FileEpisodeStore`: the port on top of the file store's read layer, writers and lock.

The layout, the write order and why it is durable are in docs/design.md ("The file store"). Here:
the lock (`StoreLock`) around each `FileSession`, the first locked call's set-up (``store.json``,
an index this tree cannot vouch for rebuilt), and the unlocked reads, which go to `StoreTree` and
`find_holders` and never write.

Nothing under the root is ever read or written through a symbolic link, and only regular files
are opened (see `durable.require_dir` and `durable.open_regular`): a link is `StoreCorrupted`
naming it. The root itself may be named through a link: it is resolved once, when the store
object is made. A ``flock`` protects processes on one host only, and not on NFS: across hosts use
the PostgreSQL store.
"""

from __future__ import annotations

import builtins
import math
import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ...episode import SCHEMA_VERSION, Episode, is_negative_zero, utc_now
from ...errors import InvalidConfiguration, InvalidIdentifier, StoreMissing, StoreUnavailable
from ...identity import EpisodeId, WeekId
from ...record_rules import WeekRead
from ..base import EpisodeStore
from ..durable import write_durable
from ._key_index import BUCKET_CHARS, LAYOUT, IndexCopied, IndexDamaged, KeyIndex, Seal
from ._key_lookup import find_holders
from ._lock import LockTimeout, StoreLock
from ._rebuild import rebuild
from ._session import FileSession
from ._tree import StoreTree

if TYPE_CHECKING:
    from ...record_rules import CheckReport, EpisodeRule

__all__ = ["FileEpisodeStore"]


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
        #: The read layer: paths, and the reads that need no lock.
        self.tree = StoreTree(self.root)
        self.lock_timeout = lock_timeout
        self._lock = StoreLock(f"{self.tree.text}/.lock", lock_timeout)
        self._namespace: str | None = None
        self._ready = False

    # -- paths and reads (the tree's) ----------------------------------------------------------
    @property
    def location(self) -> str:
        return str(self.root)

    @property
    def index(self) -> KeyIndex:
        return self.tree.index

    def week_dir(self, week: WeekId) -> Path:
        return self.tree.week_dir(week)

    def episode_dir(self, episode_id: EpisodeId) -> Path:
        return self.tree.episode_dir(episode_id)

    def state_path(self, episode_id: EpisodeId) -> Path:
        return self.tree.state_path(episode_id)

    def history_path(self, week: WeekId) -> Path:
        return self.tree.history_path(week)

    @property
    def index_dir(self) -> Path:
        return Path(self.tree.index.dir)

    def key_bucket(self, digest: str) -> Path:
        return Path(self.tree.index.bucket(digest))

    def weeks(self) -> builtins.list[WeekId]:
        return self.tree.weeks()

    def committed_ids(self, week: WeekId) -> builtins.list[EpisodeId]:
        """Ids of the episode directories in ``week`` (temp leftovers and strangers skipped)."""
        return self.tree.committed_ids(week)

    def history_highest(self, week: WeekId, *, whole: bool = False) -> int | None:
        """The highest sequence the week's history records (its tail, or ``whole`` file), None if none."""
        return self.tree.history_highest(week, whole=whole)

    def holders(self, allocation_key: str) -> builtins.list[Episode]:
        """Every committed episode carrying the key (`find_holders`): a pure read, it repairs nothing."""
        return list(find_holders(self.tree, allocation_key).episodes)

    # -- port ----------------------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        if self._namespace is None:
            with self.io_errors():
                meta = self.tree.read_namespace() if self.tree.root_exists() else None
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
            if not self.tree.root_exists():
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
            yield FileSession(self.tree)
        except OSError as exc:  # inline, not `io_errors`: no extra generator on the allocation path
            raise self._io_error(exc) from exc
        finally:
            self._lock.release()

    def require_existing(self) -> None:
        with self.io_errors():
            exists = self.tree.root_exists()
        if not exists:
            raise StoreMissing(f"no episode store at {self.root}: nothing was ever written there (readers create none)")

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
            return self.tree.load(episode_id) if self.tree.root_exists() else None

    def _read_holders(self, allocation_key: str) -> builtins.list[Episode]:
        with self.io_errors():
            if not self.tree.root_exists():
                return []
            if os.path.lexists(self.tree.index.meta):
                try:
                    return self.holders(allocation_key)
                except IndexDamaged:
                    pass  # rebuilt by the next locked call; until then the records answer
            return [e for e in self.tree.scan(None) if e.allocation_key == allocation_key]

    def _read_all(self, week: WeekId | None) -> builtins.list[Episode]:
        with self.io_errors():
            return list(self.tree.scan(week)) if self.tree.root_exists() else []

    def _read_week(self, week: WeekId) -> WeekRead:
        read = WeekRead([])
        with self.io_errors():
            if self.tree.root_exists():
                read.episodes.extend(self.tree.scan(week, read.damaged))
        return read

    def check(self, ids: Sequence[EpisodeId], rules: Sequence[EpisodeRule] = ()) -> CheckReport:
        """Read-only verification (``idempotent-jobs check``): never locks, never writes, never repairs."""
        from ._check import check_file_store  # its imports are not needed on the allocation path

        return check_file_store(self.tree, ids, rules)

    # -- maintenance ---------------------------------------------------------------------------
    def rebuild_index(self) -> int:
        """Rebuild the key index and week histories from the episode files; returns episodes seen.

        The operator's rebuild: what only the old index knew is forgotten (`_rebuild`).
        """
        with self._session(check_index=False):
            count = rebuild(self.tree, guard=False)
            self._ready = True
            return count

    def _initialise(self, *, check_index: bool = True) -> None:
        """Under the lock: create ``store.json`` when missing; rebuild an index this tree cannot vouch for.

        That is a missing or outdated one, and one not sealed to these directories (`IndexCopied`:
        copied or restored, maybe older or newer than the weeks copied with it).
        """
        namespace = self.tree.read_namespace()
        if namespace is None:
            namespace = uuid.uuid4().hex
            meta = {"schema_version": SCHEMA_VERSION, "namespace": namespace, "created_at": utc_now()}
            write_durable(self.tree.meta, meta)
        self._namespace = namespace
        if not check_index:
            return  # the caller rebuilds the index itself
        index = self.tree.index
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
            rebuild(self.tree, guard=True, histories=not copied)
        self._ready = True
