"""A store written before allocations were committed by their history entry upgrades in place.

Layout 2 (the previous release): week histories with a version 1 header and entries without the
fingerprint, appended after the record's directory rename (the commit point then), and an index
whose ``meta.json`` says ``layout: 2``. Opened by this code, the index is rebuilt (its layout
differs), and the rebuild rewrites every week's history as version 2 from the records: entries
with fingerprints, a mark for each record rewritten since its allocation. Nothing else moves.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from airflow_idempotent_jobs import FileEpisodeStore
from airflow_idempotent_jobs.store_check import check_store
from airflow_idempotent_jobs.stores.file import key_digest


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def write_lines(path: Path, data: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(json.dumps(d, sort_keys=True, separators=(",", ":")).encode() + b"\n" for d in data))


def as_layout_2(root: Path) -> None:
    """Rewrite a store's derived files exactly as the previous release wrote them."""
    for history in root.glob("episodes/*/history.jsonl"):
        header, *rest = lines(history)
        entries = [{k: v for k, v in e.items() if k != "fingerprint"} for e in rest if "sequence" in e]
        write_lines(history, [{**header, "schema_version": 1}, *entries])
    meta = root / "index" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "layout": 2}))


def old_store(root: Path) -> FileEpisodeStore:
    store = FileEpisodeStore(root)
    for n in range(3):
        store.allocate("2026-W32", f"job-{n}", fingerprint=f"fp-{n}")
    store.allocate("2026-W33", "job-3")
    store.update("2026-W32-1", lambda e: dataclasses.replace(e, metadata={"note": "rewritten"}))
    as_layout_2(root)
    return FileEpisodeStore(root)


def test_a_layout_2_store_is_upgraded_on_first_open_and_keeps_every_episode(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = old_store(root)
    records = {e.episode_id: e.to_record() for e in store.list()}
    assert lines(root / "episodes" / "2026-W32" / "history.jsonl")[0]["schema_version"] == 1

    retried = store.allocate("2026-W32", "job-2", fingerprint="fp-2")
    assert (retried.episode_id, retried.reused) == ("2026-W32-2", True)
    assert json.loads((root / "index" / "meta.json").read_text())["layout"] == 3
    header, *rest = lines(root / "episodes" / "2026-W32" / "history.jsonl")
    assert header == {"schema_version": 2, "week_id": "2026-W32", "highest_sequence": 2}
    assert [(e["episode_id"], e["fingerprint"]) for e in rest if "sequence" in e] == [
        (f"2026-W32-{n}", f"fp-{n}") for n in range(3)
    ]
    # Only the rewritten record is marked: a lost fresh record may come back from its entry, that one may not.
    assert [e for e in rest if "updated" in e] == [{"episode_id": "2026-W32-1", "updated": True}]
    assert {e.episode_id: e.to_record() for e in store.list()} == records
    assert store.allocate("2026-W32", "job-4").episode_id == "2026-W32-3"
    assert store.allocate("2026-W33", "job-5").episode_id == "2026-W33-1"
    assert check_store(store) == []


def test_a_version_1_history_met_later_is_rewritten_before_anything_is_appended(tmp_path: Path) -> None:
    """A week restored from an older backup into an upgraded store: its history is upgraded under the lock."""
    root = tmp_path / "store"
    old_store(root).allocate("2026-W40", "upgrade-now")  # upgrades the store
    history = root / "episodes" / "2026-W32" / "history.jsonl"
    header, *rest = lines(history)
    write_lines(
        history,
        [
            {**header, "schema_version": 1},
            *[{k: v for k, v in e.items() if k != "fingerprint"} for e in rest if "sequence" in e],
        ],
    )
    store = FileEpisodeStore(root)
    assert store.allocate("2026-W32", "job-6").episode_id == "2026-W32-3"
    header, *rest = lines(history)
    assert header["schema_version"] == 2
    assert [e["episode_id"] for e in rest if "sequence" in e] == [f"2026-W32-{n}" for n in range(4)]
    assert {"episode_id": "2026-W32-1", "updated": True} in rest
    assert check_store(store) == []


def test_an_upgrade_interrupted_by_a_crash_is_redone_on_the_next_open(tmp_path: Path) -> None:
    """The rebuild removes ``meta.json`` first and writes it last: a store without it is rebuilt again."""
    root = tmp_path / "store"
    store = old_store(root)
    (root / "index" / "meta.json").unlink()  # as if the upgrade died right after removing it
    assert store.allocate("2026-W32", "job-0", fingerprint="fp-0").reused
    assert lines(root / "episodes" / "2026-W33" / "history.jsonl")[0]["schema_version"] == 2
    assert check_store(store) == []


def test_an_index_of_the_previous_release_is_verified_against_the_weeks_and_sealed_on_first_open(
    tmp_path: Path,
) -> None:
    """Layout 3 without a seal: this code cannot tell whether it was restored, so it rebuilds it once.

    Here it lacks both records of ``job-1`` (as a restore of an index older than its week leaves
    it), which the retry must not take for a new key. The fields the previous release reads stay
    as they were, so it keeps using the sealed index as it is.
    """
    root = tmp_path / "store"
    store = FileEpisodeStore(root)
    for n in range(3):
        store.allocate("2026-W32", f"job-{n}")
    meta_path = root / "index" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({k: v for k, v in meta.items() if k != "seal"}))
    digest = key_digest("job-1")
    (root / "index" / "keys" / digest[:2] / f"{digest}.2026-W32-1").unlink()
    log = root / "index" / "log" / f"{digest[:2]}.log"
    kept = [line + b"\n" for line in log.read_bytes().splitlines() if not line.startswith(digest.encode())]
    log.write_bytes(b"".join(kept))

    again = FileEpisodeStore(root).allocate("2026-W32", "job-1")
    assert (again.episode_id, again.reused) == ("2026-W32-1", True)
    sealed = json.loads(meta_path.read_text())
    assert set(sealed["seal"]) == {"keys", "log"}
    read_by_the_previous_release = ("schema_version", "kind", "bucket_chars", "layout")
    assert {k: sealed[k] for k in read_by_the_previous_release} == {k: meta[k] for k in read_by_the_previous_release}
    assert FileEpisodeStore(root).allocate("2026-W32", "job-3").episode_id == "2026-W32-3"
    assert json.loads(meta_path.read_text()) == sealed  # sealed once, not rebuilt again
    assert check_store(store) == []
