"""The file store's on-disk layout choices: hard-linked markers, the history spare, index upgrades."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from airflow_idempotent_jobs import FileEpisodeStore
from airflow_idempotent_jobs.check import check_store
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


def test_the_history_is_valid_json_and_its_spare_is_a_private_temp_file(tmp_path: Path) -> None:
    store = FileEpisodeStore(tmp_path / "store")
    for n in range(4):
        store.allocate("2026-W32", f"job-{n}")
        week_dir = store.week_dir(store.get(f"2026-W32-{n}").id.week)
        history = json.loads((week_dir / "history.json").read_bytes())
        assert history["highest_sequence"] == n
        assert [e["episode_id"] for e in history["episodes"]] == [f"2026-W32-{i}" for i in range(n + 1)]
        hidden = sorted(p.name for p in week_dir.iterdir() if p.name.startswith("."))
        assert hidden in ([], [".tmp-history.json-spare"])
        if hidden:
            spare, current = (week_dir / hidden[0]).stat(), (week_dir / "history.json").stat()
            assert spare.st_ino != current.st_ino
            assert (spare.st_nlink, current.st_nlink) == (1, 1)
    assert check_store(store) == []


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
