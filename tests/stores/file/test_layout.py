"""The file store's on-disk layout choices: hard-linked markers, the append-only history, index upgrades."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest

from airflow_idempotent_jobs import FileEpisodeStore, StoreCorrupted
from airflow_idempotent_jobs.store_check import check_store
from airflow_idempotent_jobs.stores.file import key_digest


def marker(store: FileEpisodeStore, key: str, episode_id: str) -> Path:
    digest = key_digest(key)
    return store.key_bucket(digest) / f"{digest}.{episode_id}"


def test_key_markers_are_empty_hard_links_of_one_template(tmp_path: Path) -> None:
    store = FileEpisodeStore(tmp_path / "store")
    for n in range(3):
        store.allocate("2026-W32", f"job-{n}")
    template = (store.index_dir / "marker").stat()
    markers = [marker(store, f"job-{n}", f"2026-W32-{n}").stat() for n in range(3)]
    assert {m.st_ino for m in markers} == {template.st_ino}
    assert template.st_nlink == 4
    assert template.st_size == 0
    assert len(os.listdir(store.index_dir / "keys")) == 256


def test_markers_fall_back_to_plain_files_where_the_template_cannot_be_linked(tmp_path: Path) -> None:
    store = FileEpisodeStore(tmp_path / "store")
    store.allocate("2026-W32", "job-0")
    # A directory cannot be hard-linked (EPERM): every marker is then made as its own file.
    template = store.index_dir / "marker"
    template.unlink()
    template.mkdir()
    reopened = FileEpisodeStore(tmp_path / "store")
    episode = reopened.allocate("2026-W32", "job-1")
    made = marker(reopened, "job-1", episode.episode_id)
    assert made.is_file()
    assert made.stat().st_nlink == 1
    assert reopened.allocate("2026-W32", "job-1").reused is True
    assert check_store(reopened) == []


def history_lines(store: FileEpisodeStore, week: str) -> list[dict[str, object]]:
    raw = (store.root / "episodes" / week / "history.jsonl").read_bytes()
    return [json.loads(line) for line in raw.splitlines()]


def test_the_history_is_appended_one_json_line_per_episode_in_place(tmp_path: Path) -> None:
    store = FileEpisodeStore(tmp_path / "store")
    store.allocate("2026-W32", "job-0")
    path = store.root / "episodes" / "2026-W32" / "history.jsonl"
    inode = path.stat().st_ino
    for n in range(1, 4):
        store.allocate("2026-W32", f"job-{n}")
    header, *entries = history_lines(store, "2026-W32")
    assert header == {"schema_version": 2, "week_id": "2026-W32"}
    assert [(e["episode_id"], e["sequence"], e["allocation_key"], e["fingerprint"]) for e in entries] == [
        (f"2026-W32-{n}", n, f"job-{n}", None) for n in range(4)
    ]
    assert [e["created_at"] for e in entries] == [store.get(f"2026-W32-{n}").created_at for n in range(4)]
    # Appended to, never rewritten, and no temp file left beside it.
    assert path.stat().st_ino == inode
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []
    assert check_store(store) == []


def test_a_torn_last_line_is_ignored_then_truncated_by_the_next_append(tmp_path: Path) -> None:
    store = FileEpisodeStore(tmp_path / "store")
    store.allocate("2026-W32", "job-0")
    path = store.root / "episodes" / "2026-W32" / "history.jsonl"
    with path.open("ab") as handle:
        handle.write(b'{"allocation_key":"job-1","created_at":"2026-')  # an append cut short
    assert check_store(store) == []
    assert store.allocate("2026-W32", "job-1").episode_id == "2026-W32-1"
    assert [e["episode_id"] for e in history_lines(store, "2026-W32")[1:]] == ["2026-W32-0", "2026-W32-1"]
    assert check_store(store) == []


def test_a_history_that_lost_its_tail_is_caught_up_by_the_next_allocation(tmp_path: Path) -> None:
    store = FileEpisodeStore(tmp_path / "store")
    for n in range(4):
        store.allocate("2026-W32", f"job-{n}")
    path = store.root / "episodes" / "2026-W32" / "history.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]))  # as after a power loss: only job-0 made it to disk
    assert check_store(store) == []  # a lagging derived file is normal
    assert store.allocate("2026-W32", "job-4").episode_id == "2026-W32-4"
    assert [e["sequence"] for e in history_lines(store, "2026-W32")[1:]] == [0, 1, 2, 3, 4]
    # With no history at all, or only a torn header, the week's directories are listed instead.
    path.write_bytes(b'{"schema_ver')
    assert store.allocate("2026-W32", "job-5").episode_id == "2026-W32-5"
    path.unlink()
    assert store.allocate("2026-W32", "job-6").episode_id == "2026-W32-6"
    assert [e["sequence"] for e in history_lines(store, "2026-W32")[1:]] == list(range(7))
    assert check_store(store) == []


def test_the_highest_sequence_comes_from_the_tail_of_a_big_history(tmp_path: Path) -> None:
    store = FileEpisodeStore(tmp_path / "store")
    # Long keys: the last entries span more than one read window at the end of the file.
    for n in range(40):
        store.allocate("2026-W32", f"{n:03d}-" + "k" * 500)
    path = store.root / "episodes" / "2026-W32" / "history.jsonl"
    assert path.stat().st_size > 16_384
    # Remove the last two episodes' records but keep their lines: only the tail can say 39.
    for n in (38, 39):
        shutil.rmtree(store.root / "episodes" / "2026-W32" / f"2026-W32-{n}")
    assert store.allocate("2026-W32", "after").episode_id == "2026-W32-40"


def test_a_last_line_longer_than_the_read_window_is_still_parsed(tmp_path: Path) -> None:
    store = FileEpisodeStore(tmp_path / "store")
    for n in range(3):
        store.allocate("2026-W32", f"job-{n}")
    path = store.root / "episodes" / "2026-W32" / "history.jsonl"
    # A hand-made entry of 20 kB, more than two read windows: only its parse can say 5.
    entry = {"allocation_key": "big", "created_at": "x" * 20_000, "episode_id": "2026-W32-5", "sequence": 5}
    with path.open("ab") as handle:
        handle.write(json.dumps(entry).encode() + b"\n")
    assert store.allocate("2026-W32", "job-3").episode_id == "2026-W32-6"


def test_a_rebuild_never_lowers_the_highest_sequence_and_ignores_an_old_history_json(tmp_path: Path) -> None:
    store = FileEpisodeStore(tmp_path / "store")
    for n in range(3):
        store.allocate("2026-W32", f"job-{n}")
    store.update("2026-W32-2", lambda e: dataclasses.replace(e, metadata={"note": "rewritten"}))
    week_dir = store.root / "episodes" / "2026-W32"
    (week_dir / "history.json").write_bytes(b'{"schema_version": 1, "highest_sequence": 99}')
    shutil.rmtree(week_dir / "2026-W32-2")  # a lost directory must not give its sequence away again
    assert store.rebuild_index() == 2
    header, *lines = history_lines(store, "2026-W32")
    assert header == {"schema_version": 2, "week_id": "2026-W32", "highest_sequence": 2}
    # The lost episode's entry stays, marked: its record is gone for good, and its key fails closed.
    assert [e.get("sequence") for e in lines] == [0, 1, 2, None]
    assert lines[-1] == {"episode_id": "2026-W32-2", "updated": True}
    with pytest.raises(StoreCorrupted, match="2026-W32-2"):
        store.allocate("2026-W32", "job-2")
    assert store.allocate("2026-W32", "job-3").episode_id == "2026-W32-3"
    assert store.rebuild_index() == 3
    assert history_lines(store, "2026-W32")[0]["highest_sequence"] == 3


def test_a_fresh_record_lost_after_its_commit_comes_back_from_its_entry(tmp_path: Path) -> None:
    """Its directory is written after the commit without an fsync: a power loss may take it."""
    store = FileEpisodeStore(tmp_path / "store")
    for n in range(3):
        store.allocate("2026-W32", f"job-{n}")
    week_dir = store.root / "episodes" / "2026-W32"
    before = (week_dir / "2026-W32-1" / "state.json").read_bytes()
    shutil.rmtree(week_dir / "2026-W32-1")
    fresh = FileEpisodeStore(store.root)
    assert [e.episode_id for e in fresh.list("2026-W32")] == ["2026-W32-0", "2026-W32-1", "2026-W32-2"]
    assert fresh.get("2026-W32-1").to_record() == json.loads(before)
    assert check_store(fresh) == []
    retried = fresh.allocate("2026-W32", "job-1")  # under the lock: written back
    assert (retried.episode_id, retried.reused) == ("2026-W32-1", True)
    assert (week_dir / "2026-W32-1" / "state.json").read_bytes() == before
    assert fresh.allocate("2026-W32", "job-3").episode_id == "2026-W32-3"


def test_an_index_built_with_another_bucket_width_is_rebuilt_on_open(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = FileEpisodeStore(root)
    store.allocate("2026-W32", "job-a")
    store.allocate("2026-W33", "job-b")
    # The index as an older version laid it out: three-character buckets, no width in meta.json.
    keys = root / "index" / "keys"
    shutil.rmtree(keys)
    for key, episode_id in (("job-a", "2026-W32-0"), ("job-b", "2026-W33-0")):
        digest = key_digest(key)
        (keys / digest[:3]).mkdir(parents=True, exist_ok=True)
        (keys / digest[:3] / f"{digest}.{episode_id}").touch()
    meta = root / "index" / "meta.json"
    meta.write_text(json.dumps({"schema_version": 1, "kind": "key-index", "built_at": "then"}))

    reopened = FileEpisodeStore(root)
    again = reopened.allocate("2026-W33", "job-b")
    assert (again.episode_id, again.reused) == ("2026-W33-0", True)
    assert json.loads(meta.read_bytes())["bucket_chars"] == 2
    assert marker(reopened, "job-a", "2026-W32-0").is_file()
    assert reopened.allocate("2026-W32", "job-c").episode_id == "2026-W32-1"
    assert check_store(reopened) == []


def test_a_listing_taken_before_a_record_was_renamed_in_still_lists_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unlocked `list` reads the directory, then the history: a commit in between must not vanish.

    The directory listing is made stale by hand (as if taken right before the record's rename); the
    history, read after it, names the episode, whose record is then read (here: rewritten since).
    """
    store = FileEpisodeStore(tmp_path / "store")
    store.allocate("2026-W32", "job-0")
    store.update("2026-W32-0", lambda e: dataclasses.replace(e, metadata={"note": "rewritten"}))
    monkeypatch.setattr(store.tree, "committed_ids", lambda week: [])
    (listed,) = store.list("2026-W32")
    assert listed.metadata == {"note": "rewritten"}
