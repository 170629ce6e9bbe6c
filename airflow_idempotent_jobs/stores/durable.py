"""Atomic, durable file primitives: write a temp file, fsync it, rename it, fsync the directory.

Also the store's rules for reading what anyone could have put in its directory: never follow a
symbolic link (`require_dir`, `open_regular`), open nothing but regular files (a FIFO would block
the reader while it holds the lock, a device would feed it bytes for ever), read at most
`MAX_READ` bytes, and parse with `safe_json.loads`.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Final

from .. import safe_json
from ..episode import SCHEMA_VERSION
from ..errors import StoreCorrupted

__all__ = [
    "MAX_READ",
    "SYMLINK",
    "TMP_PREFIX",
    "SyncBatch",
    "dump_json",
    "file_kind",
    "hard_links",
    "fsync_dir",
    "open_regular",
    "read_file",
    "read_json",
    "read_versioned",
    "require_dir",
    "tmp_name",
    "write_all",
    "write_durable",
    "write_file_synced",
]

#: Every temporary name starts with this; readers skip such entries, a crash may leave them behind.
TMP_PREFIX = ".tmp-"
#: The largest store file read: records are kilobytes (a migrated one carries its legacy state).
MAX_READ: Final = 64 * 1024 * 1024
#: What every refusal of a link says, so the commands and ``check`` agree word for word.
SYMLINK: Final = "is a symbolic link (the store never follows links)"


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, for messages."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def require_dir(path: str | Path) -> None:
    """`StoreCorrupted` unless ``path`` is a real directory (a symlink to one is refused, not followed).

    `FileNotFoundError` passes through: absence is the caller's decision.
    """
    mode = os.lstat(path).st_mode
    if stat.S_ISDIR(mode):
        return
    if stat.S_ISLNK(mode):
        raise StoreCorrupted(str(path), SYMLINK)
    kind = "" if stat.S_ISREG(mode) else f" ({file_kind(mode)})"
    raise StoreCorrupted(str(path), f"not a directory{kind}")


def open_regular(path: str | Path, flags: int = os.O_RDONLY, mode: int = 0o644, *, one_name: bool = False) -> int:
    """Open ``path`` without following a link; anything but a regular file is `StoreCorrupted`.

    ``O_NONBLOCK`` makes opening a FIFO return at once instead of waiting for a writer (and is
    ignored for regular files). A directory raises `IsADirectoryError`, as ``open`` would. A file
    opened for writing (or read with ``one_name``, before a write) must have one name only: the
    store appends to such files in place, and a hard link would carry the writes to its other name.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreCorrupted(str(path), SYMLINK) from None
        if exc.errno == errno.ENXIO:  # a FIFO opened for writing with no reader
            raise StoreCorrupted(str(path), "not a regular file (a FIFO)") from None
        raise
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(status.st_mode):
            raise StoreCorrupted(str(path), f"not a regular file ({file_kind(status.st_mode)})")
        if (one_name or flags & (os.O_WRONLY | os.O_RDWR)) and status.st_nlink > 1:
            raise StoreCorrupted(str(path), hard_links(status.st_nlink))
    except BaseException:
        os.close(fd)
        raise
    return fd


def hard_links(count: int) -> str:
    """What a refusal of a file written in place that has other names says (commands and check agree)."""
    return f"has {count} hard links (the store writes this file in place, so it must have one name)"


def read_file(path: str | Path, *, one_name: bool = False) -> bytes:
    """The bytes of a regular file (see `open_regular`), at most `MAX_READ` of them."""
    fd = open_regular(path, one_name=one_name)
    try:
        size = os.fstat(fd).st_size
        chunks, total = [], 0
        while chunk := os.read(fd, max(65536, size + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_READ:
                raise StoreCorrupted(str(path), f"larger than {MAX_READ} bytes: not a file this store wrote")
        return b"".join(chunks)
    finally:
        os.close(fd)


def tmp_name(final: str) -> str:
    return f"{TMP_PREFIX}{final}-{secrets.token_hex(4)}"


def dump_json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def fsync_dir(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, payload: bytes) -> None:
    """``os.write`` until every byte is written: one call may write less (a signal, a full pipe)."""
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view) :]


def write_file_synced(path: str | Path, payload: bytes) -> None:
    """Create ``path`` (it must not exist) with ``payload`` and fsync its data."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        write_all(fd, payload)
        os.fsync(fd)
    finally:
        os.close(fd)


class SyncBatch:
    """Files and directories written now and fsynced together later.

    The first fsync forces the journal commit that carries every metadata change made so far, so
    the ones right after it are cheap: writing everything first and then fsyncing back to back
    costs about one journal commit instead of one per file.
    """

    def __init__(self) -> None:
        self._fds: list[int] = []
        self._dirs: list[str | Path] = []

    def create(self, path: str | Path, payload: bytes) -> None:
        """Create ``path`` (it must not exist) with ``payload``; its fsync waits for `flush`."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._fds.append(fd)
        write_all(fd, payload)

    def directory(self, path: str | Path) -> None:
        """fsync ``path`` at `flush`, so the entries created in it last."""
        if path not in self._dirs:
            self._dirs.append(path)

    def flush(self) -> None:
        """fsync every file, then every directory (files first: an entry must not outlive its data)."""
        for fd in self._fds:
            os.fsync(fd)
        self.close()
        for path in self._dirs:
            fsync_dir(path)
        self._dirs.clear()

    def close(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)


def write_durable(path: Path, data: Any, *, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``data`` as JSON so that readers see the old or the new file, whole."""
    tmp = path.with_name(tmp_name(path.name))
    try:
        write_file_synced(tmp, dump_json(data))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync_dir:
        fsync_dir(path.parent)


def read_json(path: str | Path) -> Any:
    """Parse a JSON file; unreadable bytes or syntax are `StoreCorrupted` naming the file.

    `FileNotFoundError` passes through: absence is the caller's decision, not corruption.
    """
    raw = read_file(path)  # files are replaced by rename: one read sees one version
    try:
        return safe_json.loads(raw)
    except safe_json.UnsafeJson as exc:
        detail = "empty file" if not raw.strip() else str(exc)
        raise StoreCorrupted(str(path), detail) from None


def read_versioned(path: str | Path) -> dict[str, Any]:
    """A JSON object stamped with this package's ``schema_version``; anything else is `StoreCorrupted`.

    One rule for every versioned meta file, so the store that refuses one and `check` that
    reports it cannot disagree. `FileNotFoundError` passes through, as in `read_json`.
    """
    data = read_json(path)
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(data, dict) or version != SCHEMA_VERSION:
        raise StoreCorrupted(str(path), f"unknown schema_version {version!r}")
    return data
