"""``check`` is read-only and lock-free: run against a store that four processes are writing,
it must never report a problem, because every intermediate state of an allocation is one that
``check`` accepts (leftover temp names, a marker whose episode is not committed yet, a history
not yet appended to, or read while an append is half done)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from airflow_idempotent_jobs import FileEpisodeStore
from airflow_idempotent_jobs.store_check import check_store
from tests import workers

PROCESSES = 4
PER_PROCESS = 30
DEADLINE = 120


def test_check_finds_nothing_wrong_while_processes_allocate(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = FileEpisodeStore(root)
    store.allocate("2026-W32", "seed")
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    start_file = tmp_path / "start"
    jobs = [[(("2026-W32", "2026-W33")[j % 2], f"p{p}-{j}") for j in range(PER_PROCESS)] for p in range(PROCESSES)]
    procs = [
        ctx.Process(target=workers.allocate_all, args=(str(root), ready, str(start_file), job, results)) for job in jobs
    ]
    for proc in procs:
        proc.start()
    checks = 0
    try:
        for _ in procs:
            ready.get(timeout=DEADLINE)
        start_file.touch()
        while any(proc.is_alive() for proc in procs) or checks < 3:
            assert check_store(store) == [], f"after {checks} clean checks"
            checks += 1
        outcomes = [results.get(timeout=DEADLINE) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=DEADLINE)
    assert all(outcome[0] == "ok" for outcome in outcomes), outcomes
    assert checks >= 3, checks
    assert [e.sequence for e in store.list("2026-W32")] == list(range(1 + PROCESSES * PER_PROCESS // 2))
    assert [e.sequence for e in store.list("2026-W33")] == list(range(PROCESSES * PER_PROCESS // 2))
    assert check_store(store) == []
