"""Many OS processes allocating at once, behind a start barrier; and the lock timeout.

Processes are spawned (not forked, not threads): each has its own interpreter, store object and
lock handle, as Airflow workers do. Deadlines only guard against hangs; the assertions are about
what was allocated.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStore, FileEpisodeStore, StoreUnavailable
from tests import workers
from tests.backends import Backend
from tests.clirun import run_cli

PROCESSES = 8
DEADLINE = 120


def race(backend: Backend, tmp_path: Path, jobs_per_process: list[list[tuple[str, str]]]) -> list[Any]:
    """Run each job list in its own spawned process, all released at once; returns every result."""
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    start_file = tmp_path / "start"
    procs = [
        ctx.Process(target=workers.allocate_all, args=(backend.url, ready, str(start_file), jobs, results))
        for jobs in jobs_per_process
    ]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            ready.get(timeout=DEADLINE)
        start_file.touch()
        outcomes = [results.get(timeout=DEADLINE) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=DEADLINE)
            if proc.is_alive():  # pragma: no cover - only on a hang
                proc.kill()
    errors = [o for o in outcomes if o[0] != "ok"]
    assert not errors, errors
    assert all(proc.exitcode == 0 for proc in procs)
    return [row for _, _, rows in outcomes for row in rows]


def test_distinct_keys_get_exactly_the_sequences_0_to_n_minus_1(
    backend: Backend, store: EpisodeStore, tmp_path: Path
) -> None:
    per_process = 5
    jobs = [[("2026-W32", f"p{p}-job{j}") for j in range(per_process)] for p in range(PROCESSES)]
    rows = race(backend, tmp_path, jobs)
    total = PROCESSES * per_process
    assert len(rows) == total
    assert not any(reused for *_, reused in rows)
    sequences = sorted(int(episode_id.rsplit("-", 1)[1]) for _, _, episode_id, _ in rows)
    assert sequences == list(range(total))  # no gap, no duplicate
    listed = store.list("2026-W32")
    assert [e.sequence for e in listed] == list(range(total))
    assert {e.allocation_key: e.episode_id for e in listed} == {key: eid for _, key, eid, _ in rows}


def test_one_shared_key_gives_one_episode_to_everybody(backend: Backend, store: EpisodeStore, tmp_path: Path) -> None:
    jobs = [[("2026-W32", "airflow:weekly:allocate:run-1")] * 3 for _ in range(PROCESSES)]
    rows = race(backend, tmp_path, jobs)
    assert {episode_id for _, _, episode_id, _ in rows} == {"2026-W32-0"}
    assert Counter(reused for *_, reused in rows) == {True: 3 * PROCESSES - 1, False: 1}
    assert [e.episode_id for e in store.list()] == ["2026-W32-0"]


def test_processes_spread_over_weeks_keep_every_week_contiguous(
    backend: Backend, store: EpisodeStore, tmp_path: Path
) -> None:
    weeks = ["2026-W52", "2026-W53", "2027-W01"]
    jobs = [[(weeks[(p + j) % 3], f"p{p}-job{j}") for j in range(4)] for p in range(PROCESSES)]
    # Two processes also retry a key another one allocates.
    jobs[0].append(("2026-W53", "p1-job0"))
    jobs[7].append(("2026-W53", "p1-job0"))
    rows = race(backend, tmp_path, jobs)
    wanted = Counter(week for job in jobs for week, key in job if not key.startswith("p1-job0"))
    wanted["2026-W53"] += 1  # p1-job0 itself
    for week in weeks:
        sequences = [e.sequence for e in store.list(week)]
        assert sequences == list(range(wanted[week])), week
    holders = {eid for _, key, eid, _ in rows if key == "p1-job0"}
    assert len(holders) == 1


def hold_lock(root: Path) -> subprocess.Popen[str]:
    """Another process takes the file store's lock (as `FileEpisodeStore` does) and keeps it."""
    code = (
        "import sys, time, filelock\n"
        "lock = filelock.FileLock(sys.argv[1], timeout=10)\n"
        "lock.acquire()\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(root / ".lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    return holder


def test_a_held_lock_times_out_as_store_unavailable(tmp_path: Path) -> None:
    root = tmp_path / "store"
    FileEpisodeStore(root).allocate("2026-W32", "job-a")
    holder = hold_lock(root)
    try:
        with pytest.raises(StoreUnavailable, match="could not lock"):
            FileEpisodeStore(root, lock_timeout=0.2).allocate("2026-W32", "job-b")
        cli = run_cli("--store", str(root), "--lock-timeout", "0.2", "allocate", "--week", "2026-W32", "--key", "job-b")
        assert cli.code == 5
        assert "could not lock" in cli.error_line()
        assert cli.stdout == ""
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=DEADLINE)
    # Once the holder is gone the same call goes through, and the refused ones left nothing.
    episode = FileEpisodeStore(root, lock_timeout=0.2).allocate("2026-W32", "job-b")
    assert episode.episode_id == "2026-W32-1"
    assert os.path.exists(root / ".lock")
