"""A file store killed in the middle of a write: what the file store alone leaves behind.

The kill at each step of an allocation, for every store, is tests/stores/test_crash.py; here the
uncommitted temporary file a kill leaves, and ``idempotent-jobs check`` run as its own process on it.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.clirun import run_cli
from tests.stores.crash_plans import FileCrashes, copy_file_store, file_child, seed


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crash") / "base"
    seed(str(root))
    return root


def test_check_from_the_command_line_accepts_a_store_killed_mid_write(base: Path, tmp_path: Path) -> None:
    """The same verdict from ``idempotent-jobs check`` run as its own process, at a mid-write step."""
    steps, _ = FileCrashes(base, tmp_path).steps_of_one_allocation("2026-W32")
    root = tmp_path / "killed"
    copy_file_store(base, root)
    kill_at = next(n for n, step in enumerate(steps, 1) if step.startswith("rename\t"))
    assert file_child(root, "2026-W32", kill_at).returncode == -signal.SIGKILL
    leftovers = [p.name for p in (root / "episodes" / "2026-W32").iterdir() if p.name.startswith(".tmp-")]
    assert leftovers, "the kill should have left the uncommitted write behind"
    check = run_cli("--store", str(root), "check")
    assert check.code == 0, check.stdout
    assert "0 problems" in check.stderr
