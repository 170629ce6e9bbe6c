"""A file store restored from a hot backup whose ``index/`` and weeks were copied at different moments.

``cp -a``, ``tar`` and rsync walk directories in their own order while allocations go on, so the
copy of ``index/`` can be older than the copies of some weeks (their late keys unknown to it) or
newer (it records episodes those weeks lack). Whatever the order, a key never gets a second
episode and no episode id is given to a second key: an allocation finds the holder (the copied
index is verified and rebuilt from the weeks), or it fails closed in one line that says to run
``rebuild-index``. Every copy here is made with the real ``cp -a``, of a store with several weeks.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from airflow_idempotent_jobs import AllocationConflict, FileEpisodeStore, StoreCorrupted
from airflow_idempotent_jobs.store_check import check_store
from tests.clirun import run_cli
from tests.stores.crash_plans import crash_child

#: Weeks with episodes before any copy is taken.
EARLY_WEEKS = ("2026-W30", "2026-W31", "2026-W32", "2026-W33")


def cp_a(source: Path, target: Path) -> None:
    subprocess.run(["cp", "-a", str(source), str(target)], check=True, timeout=60)


def live_store(root: Path) -> FileEpisodeStore:
    store = FileEpisodeStore(root)
    for week in EARLY_WEEKS:
        for n in range(2):
            store.allocate(week, f"early:{week}:{n}")
    return store


def allocate_late(store: FileEpisodeStore, tag: str, weeks: tuple[str, ...]) -> dict[str, str]:
    """Keys allocated while the backup runs: ``{key: episode id}``."""
    late = {}
    for week in weeks:
        for n in range(2):
            key = f"{tag}:{week}:{n}"
            late[key] = store.allocate(week, key).episode_id
    return late


def start_backup(root: Path, backup: Path) -> None:
    backup.mkdir()
    for name in ("store.json", ".lock"):
        cp_a(root / name, backup / name)
    (backup / "episodes").mkdir()


def copy_weeks(root: Path, backup: Path, weeks: tuple[str, ...]) -> None:
    for week in weeks:
        cp_a(root / "episodes" / week, backup / "episodes" / week)


def week_of(episode_id: str) -> str:
    return episode_id.rsplit("-", 1)[0]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- index/ copied before the weeks: the index misses their late keys ----------------------------


def index_older(tmp_path: Path) -> tuple[Path, dict[str, str], FileEpisodeStore]:
    root, backup = tmp_path / "live", tmp_path / "backup"
    store = live_store(root)
    start_backup(root, backup)
    cp_a(root / "index", backup / "index")
    late = allocate_late(store, "late", ("2026-W31", "2026-W33", "2026-W34"))
    copy_weeks(root, backup, (*EARLY_WEEKS, "2026-W34"))
    return backup, late, store


@pytest.mark.parametrize("caller", ["api", "cli"])
def test_a_retry_in_a_store_restored_with_an_older_index_gets_its_episode_back(tmp_path: Path, caller: str) -> None:
    restored, late, _ = index_older(tmp_path)
    for key, episode_id in late.items():
        if caller == "api":
            again = FileEpisodeStore(restored).allocate(week_of(episode_id), key)
            assert (again.episode_id, again.reused) == (episode_id, True), key
        else:
            cli = run_cli("--store", str(restored), "allocate", "--week", week_of(episode_id), "--key", key)
            assert (cli.code, cli.stdout) == (0, f"{episode_id}\n"), cli.stderr
    store = FileEpisodeStore(restored)
    assert store.allocate("2026-W31", "new").episode_id == "2026-W31-4"
    assert check_store(store) == []


def test_a_key_held_in_another_week_stays_a_conflict_after_a_restore_with_an_older_index(tmp_path: Path) -> None:
    restored, late, _ = index_older(tmp_path)
    for key, episode_id in late.items():
        with pytest.raises(AllocationConflict, match=f"already allocated in {week_of(episode_id)}") as caught:
            FileEpisodeStore(restored).allocate("2026-W40", key)
        assert caught.value.episode_ids == (episode_id,)
    assert not (restored / "episodes" / "2026-W40").exists()


def test_find_without_the_lock_sees_the_late_keys_of_a_store_restored_with_an_older_index(tmp_path: Path) -> None:
    restored, late, _ = index_older(tmp_path)
    store = FileEpisodeStore(restored)
    for key, episode_id in late.items():
        found = store.find(key)
        assert found is not None and found.episode_id == episode_id


def test_a_long_lived_store_object_notices_the_restore_under_it(tmp_path: Path) -> None:
    """The process that allocated before the restore keeps its store object; the tree is replaced under it."""
    restored, late, store = index_older(tmp_path)
    shutil.rmtree(store.root)
    os.rename(restored, store.root)
    for key, episode_id in late.items():
        again = store.allocate(week_of(episode_id), key)
        assert (again.episode_id, again.reused) == (episode_id, True), key


def test_a_consistent_copy_is_verified_once_and_then_used_as_is(tmp_path: Path) -> None:
    root = tmp_path / "live"
    live_store(root)
    copy = tmp_path / "copy"
    cp_a(root, copy)
    store = FileEpisodeStore(copy)
    assert store.allocate("2026-W31", "early:2026-W31:1").episode_id == "2026-W31-1"
    meta = (copy / "index" / "meta.json").read_bytes()
    for user in (store, FileEpisodeStore(copy)):
        assert user.allocate("2026-W32", "early:2026-W32:0").reused
        assert user.allocate("2026-W32", f"more:{id(user)}").sequence >= 2
    assert (copy / "index" / "meta.json").read_bytes() == meta  # not rebuilt again
    assert check_store(store) == []


# -- the weeks copied before index/: the index records episodes they lack -----------------------


def index_newer(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root, backup = tmp_path / "live", tmp_path / "backup"
    store = live_store(root)
    start_backup(root, backup)
    copy_weeks(root, backup, EARLY_WEEKS)
    late = allocate_late(store, "late", ("2026-W31", "2026-W33", "2026-W34"))
    cp_a(root / "index", backup / "index")
    return backup, late


def assert_refused_until_rebuilt(restored: Path) -> None:
    """Every allocation fails closed, in one line naming the remedy, and nothing changes on disk."""
    before = tree(restored)
    for key, week in (("new", "2026-W31"), ("late:2026-W33:0", "2026-W33"), ("early:2026-W30:0", "2026-W30")):
        with pytest.raises(StoreCorrupted, match="rebuild-index"):
            FileEpisodeStore(restored).allocate(week, key)
        cli = run_cli("--store", str(restored), "allocate", "--week", week, "--key", key)
        assert (cli.code, cli.stdout) == (5, "")
        assert "rebuild-index" in cli.error_line()
    assert tree(restored) == before


def test_a_store_restored_with_a_newer_index_never_gives_an_id_to_a_second_key(tmp_path: Path) -> None:
    """The index proves episodes that the copied weeks lost: a new key must not take their ids."""
    restored, late = index_newer(tmp_path)
    assert_refused_until_rebuilt(restored)
    # The operator accepts the loss: the lost keys are forgotten, their ids are never given out again.
    assert run_cli("--store", str(restored), "rebuild-index").code == 0
    store = FileEpisodeStore(restored)
    lost = set(late.values())
    for week in ("2026-W31", "2026-W33", "2026-W34"):
        fresh = store.allocate(week, f"after:{week}")
        assert fresh.episode_id not in lost
        assert fresh.sequence == (4 if week != "2026-W34" else 2)
    assert store.allocate("2026-W30", "early:2026-W30:1").episode_id == "2026-W30-1"
    assert check_store(store) == []


# -- several weeks on either side of index/ ---------------------------------------------------


def test_weeks_copied_on_both_sides_of_the_index_fail_closed_then_rebuild_index_finds_every_holder(
    tmp_path: Path,
) -> None:
    root, backup = tmp_path / "live", tmp_path / "backup"
    store = live_store(root)
    start_backup(root, backup)
    copy_weeks(root, backup, ("2026-W30", "2026-W31"))
    lost = allocate_late(store, "lost", ("2026-W30", "2026-W32"))
    cp_a(root / "index", backup / "index")
    unindexed = allocate_late(store, "unindexed", ("2026-W32", "2026-W33"))
    copy_weeks(root, backup, ("2026-W32", "2026-W33"))
    kept = {k: v for k, v in lost.items() if week_of(v) == "2026-W32"}  # W32 was copied after them

    assert_refused_until_rebuilt(backup)
    assert run_cli("--store", str(backup), "rebuild-index").code == 0
    restored = FileEpisodeStore(backup)
    for key, episode_id in {**kept, **unindexed}.items():
        again = restored.allocate(week_of(episode_id), key)
        assert (again.episode_id, again.reused) == (episode_id, True), key
        with pytest.raises(AllocationConflict, match=f"already allocated in {week_of(episode_id)}"):
            restored.allocate("2026-W40", key)
    # W30's late episodes were lost with their week's copy: their ids are never given out again.
    assert restored.allocate("2026-W30", "after").episode_id == "2026-W30-4"
    assert check_store(restored) == []


# -- a SIGKILL while the restored index is rebuilt ---------------------------------------------


def test_a_sigkill_during_the_rebuild_of_a_restored_index_leaves_a_store_whose_retry_finds_its_episode(
    tmp_path: Path,
) -> None:
    """The retry that meets a copied index rebuilds it under the lock; kill it at its steps.

    A rebuild takes thousands of steps (256 buckets and logs removed and made again), so the kills
    are chosen: right before and at the removal of ``meta.json`` (the first write; the seal is
    written last), at and before every rename into place, at the first and last step of each kind,
    every 200th step and the last ten. Each leaves a store whose next retry, in a fresh process,
    gets the episode its history holds, and every late key is still found.
    """
    restored, late, _ = index_older(tmp_path)
    key, episode_id = next(iter(late.items()))
    probe = tmp_path / "probe"
    shutil.copytree(restored, probe)  # a copy of the restore is as unsealed as the restore
    done = crash_child(str(probe), week_of(episode_id), key, "0")
    assert done.returncode == 0, done.stderr
    *steps, result = done.stdout.splitlines()
    assert result == f"result\t{episode_id}\tTrue"
    names = [step.split("\t")[0] for step in steps]
    unseal = steps.index(f"unlink\t{probe}/index/meta.json") + 1
    moves = [n for n, name in enumerate(names, 1) if name in ("replace", "rename")]
    ends = [f(n for n, name in enumerate(names, 1) if name == kind) for kind in set(names) for f in (min, max)]
    kill_points = sorted(
        {unseal - 1, unseal, *moves, *(n - 1 for n in moves), *ends, *range(1, len(steps), 200)}
        | set(range(max(1, len(steps) - 9), len(steps) + 1))
    )
    roots = []
    for kill_at in kill_points:
        root = tmp_path / f"k{kill_at}"
        shutil.copytree(restored, root)
        killed = crash_child(str(root), week_of(episode_id), key, str(kill_at))
        assert killed.returncode == -signal.SIGKILL, (kill_at, steps[kill_at - 1], killed.stderr)
        roots.append(root)
    outcome = {}
    for chunk in range(0, len(roots), 8):  # a fresh process per few stores: each child is bounded
        after = crash_child("--after", week_of(episode_id), key, *map(str, roots[chunk : chunk + 8]))
        assert after.returncode == 0, after.stderr
        # One line per store (root, check's exit code, held, episode, reused); check's findings come before it.
        rows = [line.split("\t") for line in after.stdout.splitlines() if line.count("\t") == 4]
        outcome.update({row[0]: row[3:] for row in rows})
    for kill_at, root in zip(kill_points, roots, strict=True):
        where = (kill_at, steps[kill_at - 1])
        assert outcome[str(root)] == [episode_id, "True"], where
        store = FileEpisodeStore(root)
        for other, held in late.items():
            assert store.allocate(week_of(held), other).episode_id == held, where
        keys = [e.allocation_key for e in store.list()]
        assert len(keys) == len(set(keys)), where
        assert check_store(store) == [], where
