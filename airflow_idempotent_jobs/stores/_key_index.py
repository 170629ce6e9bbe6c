"""The file store's key index: two independent derived records of which episode holds which key.

Layout under ``index/`` (``<d>`` is the sha256 of the key, ``<b>`` its first two hex digits)::

    meta.json               marks the index as built, with its layout (`LAYOUT`) and bucket width
    marker                  the empty file every marker is a hard link of
    keys/<b>/<d>.<episode>  a marker: made and fsynced BEFORE the episode's commit
    log/<b>.log             the bucket's key log: one line "<d> <episode>" appended AFTER the commit

Both are derived from the episode records and can be rebuilt from them; each alone can answer a
lookup, so losing any one file (a marker, a bucket, a log, a directory of them) costs no
duplicate. They also say different things:

- a marker may be the leftover of an allocation that crashed before its commit (its episode does
  not exist, or a later allocation committed another key under the same id): ignored;
- a log line proves its episode was committed with that key, so a record that is missing or now
  carries another key has been lost or edited since: the lookup fails closed on it.

Every bucket and every log is made when the index is built, so a missing one is damage
(`IndexDamaged`), and the store rebuilds the index under its lock rather than trusting the rest.
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ..errors import StoreCorrupted
from ..identity import EpisodeId
from .durable import SyncBatch, open_regular, read_file, require_dir, tmp_name, write_all

__all__ = [
    "BUCKET_CHARS",
    "LAYOUT",
    "MARKER_TEMPLATE",
    "IndexDamaged",
    "KeyIndex",
    "Lookup",
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

    def bucket(self, digest: str) -> str:
        return f"{self.keys}/{digest[:BUCKET_CHARS]}"

    def log(self, digest: str) -> str:
        return f"{self.logs}/{digest[:BUCKET_CHARS]}.log"

    def marker(self, digest: str, episode_id: str) -> str:
        return f"{self.bucket(digest)}/{digest}.{episode_id}"

    def require_dirs(self) -> None:
        """`StoreCorrupted` for a link or a non-directory; `IndexDamaged` for a missing directory."""
        for path in (self.dir, self.keys, self.logs):
            try:
                require_dir(path)
            except FileNotFoundError:
                raise IndexDamaged(path) from None

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


def _episode_id(text: str, where: str) -> str:
    try:
        return str(EpisodeId.parse(text))
    except ValueError as exc:
        raise StoreCorrupted(where, "index entry names no valid episode id") from exc
