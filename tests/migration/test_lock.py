"""Two migrations into one store never run at once: the second stops with one line, changing nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from airflow_idempotent_jobs import FileEpisodeStore
from tests.clirun import run_cli
from tests.legacy_fixtures import make_legacy, tree

#: Holds an exclusive flock on argv[1] until its stdin closes (another migration, as the OS sees it).
HOLDER = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_a_migration_while_another_holds_the_migration_lock_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    FileEpisodeStore(root).allocate("2026-W40", "before")
    (root / "migrations").mkdir()
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    before = tree(legacy)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root / "migrations" / ".lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        done = run_cli("--store", str(root), "migrate", "--from", str(legacy), "--apply")
    finally:
        holder.communicate(timeout=30)
    assert (done.code, done.stdout) == (5, ""), done.stderr
    assert "another migration" in done.error_line()
    assert tree(legacy) == before
    assert [e.episode_id for e in FileEpisodeStore(root).list()] == ["2026-W40-0"]
    # Once the other one is gone, the migration runs.
    assert run_cli("--store", str(root), "migrate", "--from", str(legacy), "--apply").code == 0
