"""A key lookup for read is a read: `find` and `holders` write nothing; the locked retry repairs.

What a lookup finds missing (a holder's marker or key-log line, a record known only from its
history entry) stays missing until a writer holding the lock gives it back.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_idempotent_jobs import FileEpisodeStore
from airflow_idempotent_jobs.stores.file import key_digest


def _tree(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and directory under ``root`` with its modification time and (for files) its bytes."""
    seen = {}
    for path in sorted(root.rglob("*")):
        status = path.lstat()
        seen[str(path.relative_to(root))] = (status.st_mtime_ns, b"" if path.is_dir() else path.read_bytes())
    return seen


def _marker(root: Path) -> None:
    (found,) = root.glob("index/keys/*/*.2026-W32-1")
    found.unlink()


def _log_line(root: Path) -> None:
    log = root / "index" / "log" / f"{key_digest('k1')[:2]}.log"
    log.write_bytes(b"".join(line for line in log.read_bytes().splitlines(keepends=True) if b"2026-W32-1" not in line))


def _record(root: Path) -> None:
    shutil.rmtree(root / "episodes" / "2026-W32" / "2026-W32-1")  # fresh: its history entry holds it


LOSSES: dict[str, Callable[[Path], None]] = {"marker": _marker, "key-log line": _log_line, "fresh record": _record}


@pytest.mark.parametrize("loss", LOSSES)
def test_a_lookup_for_read_writes_nothing_and_the_locked_retry_repairs(tmp_path: Path, loss: str) -> None:
    root = tmp_path / "store"
    store = FileEpisodeStore(root)
    for key in ("k0", "k1", "k2"):
        store.allocate("2026-W32", key)
    LOSSES[loss](root)
    before = _tree(root)
    found = store.find("k1")
    assert found is not None and found.episode_id == "2026-W32-1"
    assert [e.episode_id for e in store.holders("k1")] == ["2026-W32-1"]
    assert _tree(root) == before
    again = store.allocate("2026-W32", "k1")
    assert (again.episode_id, again.reused) == ("2026-W32-1", True)
    assert _tree(root) != before
    assert store.check([]).problems == []
