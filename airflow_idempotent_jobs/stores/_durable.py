"""Atomic, durable file primitives: write a temp file, fsync it, rename it, fsync the directory."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from ..errors import StoreCorrupted

__all__ = [
    "TMP_PREFIX",
    "SyncBatch",
    "dump_json",
    "fsync_dir",
    "read_json",
    "tmp_name",
    "write_durable",
    "write_file_synced",
]

#: Every temporary name starts with this; readers skip such entries, a crash may leave them behind.
TMP_PREFIX = ".tmp-"


def tmp_name(final: str) -> str:
    return f"{TMP_PREFIX}{final}-{secrets.token_hex(4)}"


def dump_json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_synced(path: Path, payload: bytes) -> None:
    """Create ``path`` (it must not exist) with ``payload`` and fsync its data."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
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
        self._dirs: list[Path] = []

    def create(self, path: Path, payload: bytes) -> None:
        """Create ``path`` (it must not exist) with ``payload``; its fsync waits for `flush`."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._fds.append(fd)
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]

    def rewrite(self, path: Path, payload: bytes, *, distinct_from: Path) -> None:
        """Put ``payload`` in the file at ``path`` reusing its inode, or in a new file if there is none.

        Allocating an inode is the dearest step of a small write on ext4 (0.5 ms against 0.02 ms
        for a rename on the reference disk); ``path`` must be a private temp name. A file that is
        also reachable under another name (``distinct_from`` or any other link) is never written
        in place: it is unlinked and a fresh file made, so a visible file is never modified.
        """
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            self.create(path, payload)
            return
        try:
            mine = os.fstat(fd)
            try:
                other = os.stat(distinct_from)
                shared = (other.st_dev, other.st_ino) == (mine.st_dev, mine.st_ino)
            except FileNotFoundError:
                shared = False
            if shared or mine.st_nlink != 1:
                os.close(fd)
                os.unlink(path)
                self.create(path, payload)
                return
        except BaseException:
            os.close(fd)
            raise
        self._fds.append(fd)
        view, offset = memoryview(payload), 0
        while offset < len(payload):
            offset += os.pwrite(fd, view[offset:], offset)
        os.ftruncate(fd, len(payload))

    def directory(self, path: Path) -> None:
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


def _stable_read(path: Path, attempts: int = 5) -> bytes:
    """The bytes of ``path`` as one version of the file.

    Writers replace files by rename, and the file store reuses a displaced history inode for the
    next history: a reader that opened the old inode could see it rewritten. So the read is
    retried while the name no longer points at what was read (inode, size, mtime). History files
    only grow, so a reused inode never comes back with the size it had.
    """
    for _ in range(attempts):
        with open(path, "rb") as handle:
            before = os.fstat(handle.fileno())
            raw = handle.read()
        try:
            after = os.stat(path)
        except FileNotFoundError:
            continue
        if len(raw) == before.st_size and _version_of(before) == _version_of(after):
            break
    return raw


def _version_of(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def read_json(path: Path) -> Any:
    """Parse a JSON file; unreadable bytes or syntax are `StoreCorrupted` naming the file.

    `FileNotFoundError` passes through: absence is the caller's decision, not corruption.
    """
    raw = _stable_read(path)
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        detail = "empty file" if not raw.strip() else f"invalid JSON ({exc})"
        raise StoreCorrupted(str(path), detail) from exc
