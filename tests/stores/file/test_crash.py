"""Crash consistency of the file store: a real SIGKILL before each step of an allocation's write.

For every step K of one allocation (counted by the child wrapping the ``os`` calls it makes), a
fresh copy of a store is given to a child that dies by SIGKILL right before step K. Then
``idempotent-jobs check`` must accept the store, a retry of the same key in a fresh process must
get the episode the commit promised (the next sequence, or the committed one back), and no key
may ever be held twice nor a sequence skipped. The commit point is the append of the episode's
entry to the week's history: a kill after it and before the record is written leaves an episode
known only from its entry, which readers see and the retry writes back.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_idempotent_jobs import FileEpisodeStore
from airflow_idempotent_jobs.verify import check_store
from tests.clirun import CHILD_TIMEOUT, run_cli

CHILD = Path(__file__).parents[2] / "crash_child.py"
KEY = "airflow:weekly:allocate:scheduled__2026-08-03"


def child(root: Path, week: str, kill_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), str(root), week, KEY, str(kill_at)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )


def copy_store(base: Path, root: Path) -> None:
    """A copy of ``base`` with its index built there, as after the copy's first locked call.

    A copied index is verified against the weeks and rebuilt on first use
    (`test_file_store_restore.py` kills that rebuild); this test kills the allocation itself.
    """
    shutil.copytree(base, root)
    FileEpisodeStore(root).rebuild_index()


def steps_of_one_allocation(base: Path, tmp_path: Path, week: str) -> tuple[list[str], str]:
    """Every step of one allocation on a copy of ``base``, and the id it allocates."""
    probe = tmp_path / "probe"
    copy_store(base, probe)
    done = child(probe, week, 0)
    assert done.returncode == 0, done.stderr
    *steps, result = done.stdout.splitlines()
    _, episode_id, reused = result.split("\t")
    assert reused == "False"
    shutil.rmtree(probe)
    return steps, episode_id


def assert_consistent(store: FileEpisodeStore) -> None:
    """No key held twice; every week's sequences are exactly 0..n-1."""
    episodes = store.list()
    keys = [e.allocation_key for e in episodes]
    assert len(keys) == len(set(keys))
    for week in {e.week_id for e in episodes}:
        assert [e.sequence for e in store.list(week)] == list(range(len(store.list(week))))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with history: two episodes in 2026-W32, one in 2026-W33."""
    root = tmp_path_factory.mktemp("crash") / "base"
    store = FileEpisodeStore(root)
    store.allocate("2026-W32", "earlier-0")
    store.allocate("2026-W32", "earlier-1")
    store.allocate("2026-W33", "earlier-2")
    return root


@pytest.mark.parametrize("week", ["2026-W32", "2026-W40"], ids=["week-with-history", "new-week"])
def test_sigkill_at_every_step_leaves_a_store_that_check_accepts_and_a_retry_completes(
    base: Path, tmp_path: Path, week: str
) -> None:
    steps, expected_id = steps_of_one_allocation(base, tmp_path, week)
    # The commit point is the write that appends the episode's entry to the week's history (then
    # fdatasynced): the first write after the history is last opened.
    appended = max(
        n for n, step in enumerate(steps, 1) if step == f"open\t{tmp_path}/probe/episodes/{week}/history.jsonl"
    )
    commit = next(n for n, step in enumerate(steps, 1) if n > appended and step == "write\t")
    assert steps[commit] == "fdatasync\t" or steps[commit] == "fsync\t"
    assert 5 < commit < len(steps)
    roots = {}
    for kill_at in range(1, len(steps) + 1):
        root = roots[kill_at] = tmp_path / f"k{kill_at}"
        copy_store(base, root)
        killed = child(root, week, kill_at)
        assert killed.returncode == -signal.SIGKILL, (kill_at, steps[kill_at - 1], killed.stderr)
        holders = [e.episode_id for e in FileEpisodeStore(root).list() if e.allocation_key == KEY]
        assert holders == ([expected_id] if kill_at > commit else []), (kill_at, steps[kill_at - 1])

    # One fresh process checks every crashed store with the CLI, then retries the key in it.
    after = subprocess.run(
        [sys.executable, str(CHILD), "--after", week, KEY, *map(str, roots.values())],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    assert after.returncode == 0, after.stderr
    outcome = {Path(line.split("\t")[0]): line.split("\t")[1:] for line in after.stdout.splitlines()}
    for kill_at, root in roots.items():
        where = (kill_at, steps[kill_at - 1])
        assert outcome[root] == ["0", expected_id, str(kill_at > commit)], where
        store = FileEpisodeStore(root)
        assert [e.episode_id for e in store.list() if e.allocation_key == KEY] == [expected_id], where
        assert_consistent(store)
        assert check_store(store) == [], where
        # The store goes on: the next allocation of the week takes the next sequence.
        following = store.allocate(week, "after-the-crash")
        assert following.sequence == int(expected_id.rsplit("-", 1)[1]) + 1, where
        assert check_store(store) == [], where


def test_check_from_the_command_line_accepts_a_store_killed_mid_write(base: Path, tmp_path: Path) -> None:
    """The same verdict from ``idempotent-jobs check`` run as its own process, at a mid-write step."""
    steps, _ = steps_of_one_allocation(base, tmp_path, "2026-W32")
    root = tmp_path / "killed"
    copy_store(base, root)
    kill_at = next(n for n, step in enumerate(steps, 1) if step.startswith("rename\t"))
    assert child(root, "2026-W32", kill_at).returncode == -signal.SIGKILL
    leftovers = [p.name for p in (root / "episodes" / "2026-W32").iterdir() if p.name.startswith(".tmp-")]
    assert leftovers, "the kill should have left the uncommitted write behind"
    check = run_cli("--store", str(root), "check")
    assert check.code == 0, check.stdout
    assert "0 problems" in check.stderr
