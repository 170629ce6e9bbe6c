"""The file store's derived files may be lost; a retry must never get a second episode for its key.

The key index (markers, per-bucket key logs, ``index/meta.json``) and the week histories are
derived from the episode records. Deleting any one of them (or a directory holding several) must
leave a retry with an existing key either getting its episode back or failing closed, in the same
week and from another week, through the store API (a fresh store and the long-lived one that
allocated) and through the CLI. Two records carrying one key (a copy from a backup, a hand edit)
fail closed where the store can see them, and `check` reports them everywhere.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_idempotent_jobs import AllocationConflict, FileEpisodeStore, StoreCorrupted
from airflow_idempotent_jobs.store_check import check_store
from airflow_idempotent_jobs.stores.file import key_digest
from tests.clirun import run_cli

KEYS = ["k0", "k1", "k2"]


def marker_of(root: Path, episode_id: str) -> Path:
    (found,) = root.glob(f"index/keys/*/*.{episode_id}")
    return found


def _unlink(path: Path) -> None:
    path.unlink()


def _rmtree(path: Path) -> None:
    shutil.rmtree(path)


#: One deletion each, as an operator (or a bad cleanup script) would do it. ``k1`` is 2026-W32-1.
DELETIONS: dict[str, Callable[[Path], None]] = {
    "marker": lambda root: _unlink(marker_of(root, "2026-W32-1")),
    "bucket": lambda root: _rmtree(marker_of(root, "2026-W32-1").parent),
    "key-log": lambda root: _unlink(root / "index" / "log" / f"{key_digest('k1')[:2]}.log"),
    "all-buckets": lambda root: _rmtree(root / "index" / "keys"),
    "all-key-logs": lambda root: _rmtree(root / "index" / "log"),
    "meta": lambda root: _unlink(root / "index" / "meta.json"),
    "whole-index": lambda root: _rmtree(root / "index"),
    "history": lambda root: _unlink(root / "episodes" / "2026-W32" / "history.jsonl"),
    "marker-template": lambda root: _unlink(root / "index" / "marker"),
}


def three_episodes(root: Path) -> FileEpisodeStore:
    store = FileEpisodeStore(root)
    for key in KEYS:
        store.allocate("2026-W32", key)
    return store


def ids(root: Path) -> list[str]:
    return [e.episode_id for e in FileEpisodeStore(root).list()]


@pytest.mark.parametrize("deletion", DELETIONS)
@pytest.mark.parametrize("opened", ["fresh", "long-lived"])
def test_a_retry_after_losing_a_derived_file_gets_its_episode_back(tmp_path: Path, deletion: str, opened: str) -> None:
    root = tmp_path / "store"
    store = three_episodes(root)
    DELETIONS[deletion](root)
    user = FileEpisodeStore(root) if opened == "fresh" else store
    again = user.allocate("2026-W32", "k1")
    assert (again.episode_id, again.reused) == ("2026-W32-1", True)
    assert ids(root) == ["2026-W32-0", "2026-W32-1", "2026-W32-2"]
    # The store goes on at the next sequence, and every key keeps its episode.
    assert user.allocate("2026-W32", "k3").episode_id == "2026-W32-3"
    for n, key in enumerate(KEYS):
        assert user.allocate("2026-W32", key).episode_id == f"2026-W32-{n}"


@pytest.mark.parametrize("deletion", DELETIONS)
@pytest.mark.parametrize("opened", ["fresh", "long-lived"])
def test_a_key_held_in_another_week_stays_a_conflict_after_losing_a_derived_file(
    tmp_path: Path, deletion: str, opened: str
) -> None:
    root = tmp_path / "store"
    store = three_episodes(root)
    DELETIONS[deletion](root)
    user = FileEpisodeStore(root) if opened == "fresh" else store
    with pytest.raises(AllocationConflict, match="already allocated in 2026-W32") as caught:
        user.allocate("2026-W33", "k1")
    assert caught.value.episode_ids == ("2026-W32-1",)
    assert ids(root) == ["2026-W32-0", "2026-W32-1", "2026-W32-2"]


@pytest.mark.parametrize("deletion", DELETIONS)
def test_the_cli_gets_the_episode_back_or_exits_3_after_losing_a_derived_file(tmp_path: Path, deletion: str) -> None:
    root = tmp_path / "store"
    three_episodes(root)
    DELETIONS[deletion](root)
    same = run_cli("--store", str(root), "allocate", "--week", "2026-W32", "--key", "k1")
    assert (same.code, same.stdout) == (0, "2026-W32-1\n"), same.stderr
    other = run_cli("--store", str(root), "allocate", "--week", "2026-W33", "--key", "k1")
    assert (other.code, other.stdout) == (3, "")
    assert "2026-W32-1" in other.error_line()
    assert ids(root) == ["2026-W32-0", "2026-W32-1", "2026-W32-2"]
    assert run_cli("--store", str(root), "check").code == 0


def test_find_without_the_lock_still_finds_a_key_whose_bucket_was_lost(tmp_path: Path) -> None:
    root = tmp_path / "store"
    three_episodes(root)
    DELETIONS["bucket"](root)
    found = FileEpisodeStore(root).find("k1")
    assert found is not None and found.episode_id == "2026-W32-1"


def test_a_record_the_key_log_vouches_for_that_went_missing_fails_closed(tmp_path: Path) -> None:
    """The log line is written after the commit, so it proves the episode existed: never reallocate it.

    A record rewritten since its allocation (here: a note added) cannot be rebuilt from its history
    entry; the entry's mark says so. A fresh one comes back from its entry
    (`test_file_store_layout.py`); with its history lost as well, only the key log still speaks.
    """
    root = tmp_path / "store"
    store = three_episodes(root)
    store.update("2026-W32-1", lambda e: dataclasses.replace(e, metadata={"note": "rewritten"}))
    shutil.rmtree(root / "episodes" / "2026-W32" / "2026-W32-1")
    for user in (store, FileEpisodeStore(root)):
        with pytest.raises(StoreCorrupted, match="2026-W32-1"):
            user.allocate("2026-W32", "k1")
    cli = run_cli("--store", str(root), "allocate", "--week", "2026-W32", "--key", "k1")
    assert (cli.code, cli.stdout) == (5, "")
    assert "2026-W32-1" in cli.error_line()
    assert ids(root) == ["2026-W32-0", "2026-W32-2"]
    # Without its history either (both lost), the key log still fails the key closed.
    (root / "episodes" / "2026-W32" / "history.jsonl").unlink()
    with pytest.raises(StoreCorrupted, match="2026-W32-1"):
        FileEpisodeStore(root).allocate("2026-W32", "k1")


# -- two records carrying one key -------------------------------------------------------------


def copy_episode(root: Path, source: str, target: str) -> None:
    """An episode directory copied in from a backup under another id (the record made to match)."""
    week, sequence = target.rsplit("-", 1)
    src = root / "episodes" / source.rsplit("-", 1)[0] / source
    dst = root / "episodes" / week / target
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dst)
    record = json.loads((dst / "state.json").read_text())
    record.update(episode_id=target, week_id=week, sequence=int(sequence))
    (dst / "state.json").write_text(json.dumps(record))


def edit_key(root: Path, episode_id: str, key: str) -> None:
    path = root / "episodes" / episode_id.rsplit("-", 1)[0] / episode_id / "state.json"
    record = json.loads(path.read_text())
    record["allocation_key"] = key
    path.write_text(json.dumps(record))


def assert_conflict_naming(root: Path, store: FileEpisodeStore, week: str, key: str, held: tuple[str, ...]) -> None:
    for user in (store, FileEpisodeStore(root)):
        with pytest.raises(AllocationConflict) as caught:
            user.allocate(week, key)
        assert caught.value.episode_ids == held
    cli = run_cli("--store", str(root), "allocate", "--week", week, "--key", key)
    assert (cli.code, cli.stdout) == (3, "")
    assert ", ".join(held) in cli.error_line()


def assert_check_names(root: Path, *episode_ids: str) -> None:
    check = run_cli("--store", str(root), "check")
    assert check.code == 1, check.stderr
    for episode_id in episode_ids:
        assert episode_id in check.stdout


@pytest.mark.parametrize("target", ["2026-W32-3", "2026-W32-7"], ids=["next-id", "past-a-gap"])
def test_a_copy_in_the_same_week_makes_a_retry_fail_closed_naming_both(tmp_path: Path, target: str) -> None:
    root = tmp_path / "store"
    store = three_episodes(root)
    copy_episode(root, "2026-W32-0", target)
    before = ids(root)
    assert_conflict_naming(root, store, "2026-W32", "k0", ("2026-W32-0", target))
    assert_check_names(root, "2026-W32-0", target)
    # A new key in that week neither takes the copy's sequence nor lets the copy go unnoticed.
    fresh = FileEpisodeStore(root).allocate("2026-W32", "k9")
    assert fresh.sequence == int(target.rsplit("-", 1)[1]) + 1
    assert_conflict_naming(root, store, "2026-W32", "k0", ("2026-W32-0", target))
    assert set(ids(root)) == {*before, fresh.episode_id}


def test_a_copy_in_another_week_is_found_once_that_week_is_used(tmp_path: Path) -> None:
    """Seeing a record nobody indexed in a week nobody touches needs a walk of every week: `check` does it."""
    root = tmp_path / "store"
    store = three_episodes(root)
    copy_episode(root, "2026-W32-0", "2026-W33-0")
    assert_check_names(root, "2026-W32-0", "2026-W33-0")
    # The copy's own week: allocating there indexes it first, so the key is then held twice.
    with pytest.raises(AllocationConflict):
        store.allocate("2026-W33", "k0")
    assert FileEpisodeStore(root).allocate("2026-W33", "k9").episode_id == "2026-W33-1"
    assert_conflict_naming(root, store, "2026-W32", "k0", ("2026-W32-0", "2026-W33-0"))


def test_a_record_whose_key_was_edited_by_hand_fails_closed_for_both_keys_in_its_week(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = three_episodes(root)
    edit_key(root, "2026-W32-1", "k0")
    # k0: the holder's week is read whole on a retry, so the second record carrying it is seen.
    assert_conflict_naming(root, store, "2026-W32", "k0", ("2026-W32-0", "2026-W32-1"))
    # k1: the key log proves 2026-W32-1 was allocated for k1; its record no longer says so.
    assert_conflict_naming(root, store, "2026-W32", "k1", ("2026-W32-1",))
    assert_check_names(root, "2026-W32-0", "2026-W32-1")
    assert ids(root) == ["2026-W32-0", "2026-W32-1", "2026-W32-2"]


def test_a_record_edited_in_another_week_fails_closed_for_its_old_key_and_check_reports_it(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = three_episodes(root)
    store.allocate("2026-W33", "k3")
    edit_key(root, "2026-W33-0", "k0")
    assert_conflict_naming(root, store, "2026-W33", "k3", ("2026-W33-0",))
    assert_conflict_naming(root, store, "2026-W33", "k0", ("2026-W32-0",))
    assert_check_names(root, "2026-W32-0", "2026-W33-0")


def test_rebuild_index_after_a_copy_makes_the_duplicate_visible_to_every_retry(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = three_episodes(root)
    copy_episode(root, "2026-W32-1", "2026-W40-0")
    assert run_cli("--store", str(root), "rebuild-index").code == 0
    assert_conflict_naming(root, store, "2026-W32", "k1", ("2026-W32-1", "2026-W40-0"))
    assert check_store(FileEpisodeStore(root)) != []


def test_a_record_edited_to_a_key_never_allocated_is_reported_by_check_and_fails_closed_on_its_first_retry(
    tmp_path: Path,
) -> None:
    """The documented limit: nothing but the record itself knows of this edit, and the allocation of a
    new key does not read every record of the store. `check` reports the edit before anything is
    allocated, and the first retry of the key (which reads its holder's week) fails closed."""
    root = tmp_path / "store"
    store = three_episodes(root)
    edit_key(root, "2026-W32-1", "k-edited")
    assert_check_names(root, "2026-W32-1")
    assert store.allocate("2026-W32", "k-edited").episode_id == "2026-W32-3"
    assert_conflict_naming(root, store, "2026-W32", "k-edited", ("2026-W32-1", "2026-W32-3"))


def test_a_hand_edited_key_written_with_json_escapes_is_still_seen_by_a_retry(tmp_path: Path) -> None:
    """The retry skips records that cannot carry the key by their bytes: an escaped key must not slip by."""
    root = tmp_path / "store"
    store = three_episodes(root)
    path = root / "episodes" / "2026-W32" / "2026-W32-1" / "state.json"
    text = path.read_text().replace('"allocation_key": "k1"', '"allocation_key": "\\u006b0"')
    assert "\\u006b0" in text
    path.write_text(text)
    assert_conflict_naming(root, store, "2026-W32", "k0", ("2026-W32-0", "2026-W32-1"))
