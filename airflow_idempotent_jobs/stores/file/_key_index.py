"""The file store's key index: two independent derived records of which episode holds which key.

Under ``index/`` (``<d>`` the key's sha256, ``<b>`` its first two hex digits): ``meta.json`` (built,
`LAYOUT`, bucket width, `Seal`), ``marker``, ``keys/<b>/<d>.<episode>`` (a marker, fsynced before the
commit: alone it proves nothing) and ``log/<b>.log`` (a line appended after the commit: it proves the
key was committed). Why two records, what each proves, and how a copied index is caught by its seal
(`IndexCopied`) and a missing part by `IndexDamaged`: docs/design.md, "The file store".
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ...errors import StoreCorrupted
from ...identity import EpisodeId
from ..durable import SyncBatch, open_regular, read_file, read_versioned, require_dir, tmp_name, write_all

__all__ = [
    "BUCKET_CHARS",
    "LAYOUT",
    "MARKER_TEMPLATE",
    "IndexCopied",
    "IndexDamaged",
    "KeyIndex",
    "Lookup",
    "Seal",
    "key_digest",
    "log_line",
]

#: Hex characters of the key digest that name a bucket: 256 buckets keep a lookup's listing and
#: log short (80 names, 6 kB at 20 000 episodes) while a young store has every bucket made.
BUCKET_CHARS: Final = 2
#: The store layout ``meta.json`` records; a store of another layout is rebuilt on open. 3: week
#: histories are version 2 (entries commit allocations, `_week_history`); the rebuild that an older
#: store gets on its first open by this code is its upgrade in place.
LAYOUT: Final = 3
MARKER_TEMPLATE: Final = "marker"
#: Errors of ``link`` that mean "this file system will not hard-link here": create the marker instead.
_NO_LINK_ERRNOS: Final = frozenset({errno.EMLINK, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV})


def key_digest(allocation_key: str) -> str:
    return hashlib.sha256(allocation_key.encode("utf-8")).hexdigest()


def log_line(digest: str, episode_id: str) -> bytes:
    return f"{digest} {episode_id}\n".encode("ascii")


class IndexDamaged(Exception):
    """A part of the index that every built index has is missing: rebuild before trusting it."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class IndexCopied(IndexDamaged):
    """``keys/`` or ``log/`` are not the directories ``meta.json`` sealed: a copy, a restore, or unsealed."""


#: A directory's identity: its inode number and its status-change time in nanoseconds.
Identity = tuple[int, int]
_NS: Final = 1_000_000_000


@dataclass(frozen=True)
class Seal:
    """The identities of ``keys/`` and ``log/`` when the index was built (recorded in ``meta.json``)."""

    keys: Identity
    logs: Identity

    def record(self) -> dict[str, list[int]]:
        return {"keys": list(self.keys), "log": list(self.logs)}

    @classmethod
    def of(cls, meta: dict[str, object]) -> Seal | None:
        """The seal ``meta.json`` records; None without one (written by an earlier release) or a malformed one."""
        seal = meta.get("seal")
        if not isinstance(seal, dict):
            return None
        pairs = [seal.get("keys"), seal.get("log")]
        if not all(isinstance(p, list) and len(p) == 2 and all(_is_count(n) for n in p) for p in pairs):
            return None
        return cls(*(tuple(p) for p in pairs))  # type: ignore[arg-type]

    def holds(self, keys: Identity, logs: Identity) -> bool:
        return _same(self.keys, keys) and _same(self.logs, logs)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _same(sealed: Identity, found: Identity) -> bool:
    """One directory; a file system that keeps whole seconds on disk (128-byte ext4 inodes) drops
    the nanoseconds once the inode leaves the cache, so a whole-second time may match the seal's."""
    if sealed == found:
        return True
    return sealed[0] == found[0] and found[1] % _NS == 0 and sealed[1] // _NS == found[1] // _NS


@dataclass(frozen=True)
class Lookup:
    """What the index says about one key."""

    digest: str
    #: Episodes with a marker for the key (may include leftovers of crashed allocations).
    marked: frozenset[str]
    #: Episodes the key log records as committed with the key.
    logged: frozenset[str]


class KeyIndex:
    """The ``index/`` directory of one store root (paths as text: this is the hot path)."""

    def __init__(self, root: str) -> None:
        self.dir = f"{root}/index"
        self.keys = f"{self.dir}/keys"
        self.logs = f"{self.dir}/log"
        self.meta = f"{self.dir}/meta.json"
        self.template = f"{self.dir}/{MARKER_TEMPLATE}"
        #: What ``meta.json`` sealed the index with, as last read (another process may rebuild it).
        self.seal: Seal | None = None

    def bucket(self, digest: str) -> str:
        return f"{self.keys}/{digest[:BUCKET_CHARS]}"

    def log(self, digest: str) -> str:
        return f"{self.logs}/{digest[:BUCKET_CHARS]}.log"

    def marker(self, digest: str, episode_id: str) -> str:
        return f"{self.bucket(digest)}/{digest}.{episode_id}"

    def require_dirs(self) -> None:
        """`StoreCorrupted` for a link or a non-directory; `IndexDamaged` for a missing directory;
        `IndexCopied` when ``keys/`` and ``log/`` are not the directories ``meta.json`` sealed."""
        _identity(self.dir)
        keys, logs = _identity(self.keys), _identity(self.logs)
        if self.seal is not None and self.seal.holds(keys, logs):
            return
        self.seal = self.read_seal()  # rebuilt (and sealed again) by another process since we read it?
        if self.seal is None or not self.seal.holds(keys, logs):
            raise IndexCopied(self.meta)

    def read_meta(self) -> dict[str, object]:
        """``meta.json``; `IndexDamaged` when there is none (not built, or a rebuild cut short)."""
        _identity(self.dir)  # never read through a link
        try:
            return read_versioned(self.meta)
        except FileNotFoundError:
            raise IndexDamaged(self.meta) from None

    def read_seal(self) -> Seal | None:
        return Seal.of(self.read_meta())

    def current_seal(self) -> Seal:
        """The seal of the directories as they are now (a rebuild records it last)."""
        return Seal(_identity(self.keys), _identity(self.logs))

    # -- reading -------------------------------------------------------------------------------
    def lookup(self, allocation_key: str) -> Lookup:
        """Markers and log lines for the key; `IndexDamaged` if its bucket or its log is missing."""
        self.require_dirs()
        digest = key_digest(allocation_key)
        bucket = self.bucket(digest)
        try:
            fd = os.open(bucket, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            raise IndexDamaged(bucket) from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                require_dir(bucket)  # says which: a link, or not a directory
            raise
        try:
            names = os.listdir(fd)
        finally:
            os.close(fd)
        prefix = digest + "."
        marked = set()
        for name in names:
            if name.startswith(prefix):  # a bucket holds ~1/256 of all keys
                marked.add(_episode_id(name[len(prefix) :], f"{bucket}/{name}"))
        return Lookup(digest, frozenset(marked), frozenset(self.logged(digest)))

    def logged(self, digest: str) -> set[str]:
        """Episodes the bucket's log records for ``digest``; `IndexDamaged` if the log is missing."""
        path = self.log(digest)
        try:
            raw = read_file(path, one_name=True)  # appended to after the commit: refuse it before
        except FileNotFoundError:
            raise IndexDamaged(path) from None
        found = set()
        end = raw.rfind(b"\n") + 1  # a final line without its newline is an interrupted append
        needle = digest.encode("ascii")
        at = raw.find(needle, 0, end)
        while at >= 0:
            if at == 0 or raw[at - 1] == 0x0A:
                line_end = raw.index(b"\n", at)
                found.add(parse_log_line(raw[at:line_end], path, at)[1])
            at = raw.find(needle, at + 1, end)
        return found

    def recorded(self, *, strict: bool) -> list[tuple[str, str, str]]:
        """Every complete line of every key log: ``(digest, episode id, log path)``.

        ``strict``: a log that cannot be read or a line that does not parse raises; otherwise it
        is skipped (an operator's rebuild must get past a damaged index). Missing logs are skipped.
        """
        found: list[tuple[str, str, str]] = []
        try:
            require_dir(self.logs)  # never read through a link
        except FileNotFoundError:
            return found
        except StoreCorrupted:
            if strict:
                raise
            return found
        for n in range(16**BUCKET_CHARS):
            path = f"{self.logs}/{n:0{BUCKET_CHARS}x}.log"
            try:
                raw = read_file(path)
            except FileNotFoundError:
                continue
            except (OSError, StoreCorrupted):
                if strict:
                    raise
                continue
            offset = 0
            for line in raw[: raw.rfind(b"\n") + 1].split(b"\n")[:-1]:
                try:
                    found.append((*parse_log_line(line, path, offset), path))
                except StoreCorrupted:
                    if strict:
                        raise
                offset += len(line) + 1
        return found

    # -- writing (under the store's lock) --------------------------------------------------------
    def write_marker(self, digest: str, episode_id: str, batch: SyncBatch, created: list[str]) -> None:
        """Add a marker; ``batch`` will fsync its bucket. Paths made are appended to ``created``.

        A marker is a hard link of one empty template file: creating an inode costs far more than
        adding a name (0.5 ms against 0.01 ms on the reference ext4 disk), and markers carry no data.
        """
        bucket = self.bucket(digest)
        marker = f"{bucket}/{digest}.{episode_id}"
        for attempt in range(2):
            try:
                os.link(self.template, marker)
                created.append(marker)
                break
            except FileExistsError:
                break  # left by an interrupted write of this very episode: already in place
            except FileNotFoundError:
                # The bucket was verified by this session's lookup, so the template is what is missing.
                if attempt == 1 or os.path.lexists(self.template):
                    raise
                self.new_template(batch)
            except OSError as exc:
                if exc.errno not in _NO_LINK_ERRNOS:
                    raise
                # Too many links (ext4 allows 65 000) or no hard links here: a fresh empty file
                # does as well; the next marker links a fresh template.
                os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
                created.append(marker)
                if exc.errno == errno.EMLINK:
                    self.new_template(batch)
                break
        batch.directory(bucket)

    def new_template(self, batch: SyncBatch) -> None:
        tmp = f"{self.dir}/{tmp_name(MARKER_TEMPLATE)}"
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.replace(tmp, self.template)  # markers linked to an older template keep it alive
        batch.directory(self.dir)

    def append_log(self, digest: str, episode_ids: Iterable[str]) -> None:
        """Append lines to a bucket's log with one write, first cutting off an interrupted append.

        No fsync: the log is derived, written after the commit; a crash may lose its last lines.
        """
        path = self.log(digest)
        try:
            fd = open_regular(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            raise IndexDamaged(path) from None
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                os.ftruncate(fd, read_file(path).rfind(b"\n") + 1)
            write_all(fd, b"".join(log_line(digest, e) for e in episode_ids))
        finally:
            os.close(fd)

    def repair(self, digest: str, episode_id: str, *, marker: bool, log: bool) -> None:
        """Best effort, under the lock: give a committed episode back the index entries it lost.

        Never fails the caller: a store that cannot be written still answers (the entry stays
        missing, and ``check`` keeps reporting it).
        """
        try:
            if marker:
                try:
                    os.link(self.template, self.marker(digest, episode_id))
                except FileExistsError:
                    pass
            if log:
                self.append_log(digest, [episode_id])
        except (OSError, IndexDamaged, StoreCorrupted):
            pass


def parse_log_line(line: bytes, path: str, offset: int) -> tuple[str, str]:
    """``(digest, episode id)`` of one complete log line; anything else is `StoreCorrupted`."""
    digest, _, episode_id = line.partition(b" ")
    try:
        text = episode_id.decode("ascii")
        if len(digest) == 64 and text and str(EpisodeId.parse(text)) == text:
            return digest.decode("ascii"), text
    except ValueError:
        pass
    raise StoreCorrupted(path, f"invalid key log line at byte {offset}: {line[:200]!r}")


def _identity(path: str) -> Identity:
    """A directory's identity, never through a link; `IndexDamaged` when it is missing."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        raise IndexDamaged(path) from None
    if not stat.S_ISDIR(status.st_mode):
        require_dir(path)  # raises, naming what it is
    return status.st_ino, status.st_ctime_ns


def _episode_id(text: str, where: str) -> str:
    try:
        return str(EpisodeId.parse(text))
    except ValueError as exc:
        raise StoreCorrupted(where, "index entry names no valid episode id") from exc
