"""The file store's lock: one owner of the policy (waiting, timeout), shared safely by threads.

Airflow's triggerer and any threaded caller may share one store object. Its lock must exclude
the other threads of the process as well as other processes: a lock that only counts re-entries
would let a second thread walk into the critical section and take the same sequence.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from airflow_idempotent_jobs import FileEpisodeStore, StoreUnavailable
from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.store_check import check_store

THREADS = 8
PER_THREAD = 15


def test_threads_sharing_one_store_object_get_distinct_contiguous_sequences(tmp_path: Path) -> None:
    store = FileEpisodeStore(tmp_path / "store")
    store.allocate("2026-W01", "warm")
    start = threading.Barrier(THREADS)
    results: list[str] = []
    errors: list[BaseException] = []

    def work(n: int) -> None:
        start.wait()
        try:
            for i in range(PER_THREAD):
                results.append(store.allocate("2026-W32", f"t{n}-{i}").episode_id)
        except BaseException as exc:  # reported below: the assertion is about every thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    total = THREADS * PER_THREAD
    assert sorted(results, key=lambda e: int(e.rsplit("-", 1)[1])) == [f"2026-W32-{n}" for n in range(total)]
    assert [e.sequence for e in store.list("2026-W32")] == list(range(total))
    assert check_store(store) == []


def test_a_store_used_inside_its_own_update_does_not_deadlock(tmp_path: Path) -> None:
    """Re-entry from the same thread (a change function that reads through the lock) still works."""
    store = FileEpisodeStore(tmp_path / "store", lock_timeout=5)
    store.allocate("2026-W32", "k0")

    def change(episode: Episode) -> Episode:
        store.allocate("2026-W32", "k1")
        return episode

    store.update("2026-W32-0", change)
    assert [e.episode_id for e in store.list()] == ["2026-W32-0", "2026-W32-1"]


def _holder(path: Path) -> subprocess.Popen[str]:
    """Another process that takes an exclusive flock on ``path`` (creating it) and keeps it until told."""
    code = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    return holder


def _let_go(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=30)


def test_a_waiter_whose_lock_file_was_replaced_locks_the_new_file(tmp_path: Path) -> None:
    """A waiter that finally locks a lock file nobody can open any more must not go on: it locks the current one."""
    root = tmp_path / "store"
    FileEpisodeStore(root).allocate("2026-W32", "k0")
    lock = root / ".lock"
    first = _holder(lock)
    done: list[str] = []
    waiter = threading.Thread(
        target=lambda: done.append(FileEpisodeStore(root, lock_timeout=60).allocate("2026-W32", "k1").episode_id)
    )
    waiter.start()
    time.sleep(0.3)  # the waiter has opened the old file and polls it
    lock.unlink()
    second = _holder(lock)  # a newcomer creates the file anew and holds it
    _let_go(first)
    waiter.join(timeout=2)
    assert done == [], "the waiter allocated while another process held the store's lock file"
    _let_go(second)
    waiter.join(timeout=60)
    assert done == ["2026-W32-1"]


def _allocate_in_a_new_process(root: Path, key: str, lock_timeout: float) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        "from airflow_idempotent_jobs import FileEpisodeStore\n"
        "store = FileEpisodeStore(sys.argv[1], lock_timeout=float(sys.argv[3]))\n"
        "print(store.allocate('2026-W32', sys.argv[2]).episode_id)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(root), key, str(lock_timeout)], capture_output=True, text=True, timeout=60
    )


def test_a_wait_that_timed_out_does_not_keep_the_lock_once_its_holder_lets_go(tmp_path: Path) -> None:
    """A waiter that gave up holds nothing: the next process gets the lock as soon as its holder lets go."""
    root = tmp_path / "store"
    FileEpisodeStore(root).allocate("2026-W32", "k0")
    holder = _holder(root / ".lock")
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="could not lock"):
        FileEpisodeStore(root, lock_timeout=0.5).allocate("2026-W32", "k1")
    assert time.monotonic() - started < 10
    _let_go(holder)
    after = _allocate_in_a_new_process(root, "k2", lock_timeout=5)
    assert (after.returncode, after.stdout) == (0, "2026-W32-1\n"), after.stderr


def test_a_waiter_gets_the_lock_as_soon_as_its_holder_lets_go(tmp_path: Path) -> None:
    """A waiter blocked on another process's lock goes on once it is released, and only then."""
    root = tmp_path / "store"
    FileEpisodeStore(root).allocate("2026-W32", "k0")
    holder = _holder(root / ".lock")
    done: list[str] = []
    waiter = threading.Thread(
        target=lambda: done.append(FileEpisodeStore(root, lock_timeout=60).allocate("2026-W32", "k1").episode_id)
    )
    waiter.start()
    time.sleep(0.3)
    assert done == []
    _let_go(holder)
    waiter.join(timeout=30)
    assert done == ["2026-W32-1"]
    assert check_store(FileEpisodeStore(root)) == []
