"""Atomic, durable file primitives: write a temp file, fsync it, rename it, fsync the directory."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from ..episode import SCHEMA_VERSION
from ..errors import StoreCorrupted

__all__ = [
    "TMP_PREFIX",
    "SyncBatch",
    "dump_json",
    "fsync_dir",
    "read_json",
    "read_versioned",
    "tmp_name",
    "write_all",
    "write_durable",
    "write_file_synced",
]

#: Every temporary name starts with this; readers skip such entries, a crash may leave them behind.
TMP_PREFIX = ".tmp-"


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
    with open(path, "rb") as handle:  # files are replaced by rename: one read sees one version
        raw = handle.read()
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        detail = "empty file" if not raw.strip() else f"invalid JSON ({exc})"
        raise StoreCorrupted(str(path), detail) from exc


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
