"""The owner is recorded at allocation, in the same commit, and the page uses it.

The allocation key is the DAG author's choice, so it proves nothing about who owns an episode: a
key naming another DAG must not put rows on that DAG's page, and a DAG must not take over another
DAG's episode by reusing its key. Every test runs on both stores.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.errors import AllocationConflict, InvalidIdentifier, StoreCorrupted
from airflow_idempotent_jobs.operations import Owner, episode_view, week_view
from airflow_idempotent_jobs.task_key import default_allocation_key
from tests.backends import Backend, FileBackend

WEEK = "2026-W32"
RUN = "scheduled__2026-08-03T10:00:00+00:00"
NOW = dt.datetime(2026, 8, 7, 12, tzinfo=dt.timezone.utc)
VICTIM_KEY = default_allocation_key("victim", "allocate", RUN, None)
MIMIC = Owner("mimic", "allocate", RUN, None)


def _rows(store: EpisodeStore) -> dict[str, dict[str, Any]]:
    return {row["episode_id"]: row for row in week_view(store, WEEK, budget=None, now=NOW)["episodes"]}


def _write_metadata(backend: Backend, episode_id: str, metadata: object) -> None:
    """Change the record's metadata around the store (a hand edit, a writer of its own)."""
    if isinstance(backend, FileBackend):
        record = backend.stored(episode_id)
        record["metadata"] = metadata
        backend.state_path(episode_id).write_text(json.dumps(record, indent=2), encoding="utf-8")
        return
    import psycopg
    from psycopg.types.json import Jsonb

    with psycopg.connect(backend.url, autocommit=True) as conn:
        conn.execute(
            "UPDATE idempotent_jobs.episodes SET metadata = %s WHERE episode_id = %s", (Jsonb(metadata), episode_id)
        )


def test_the_recorded_owner_is_the_owner_whatever_the_key_says(store: EpisodeStore) -> None:
    """A DAG whose key names another DAG gets its rows under its own name, marked recorded."""
    mimicked = store.allocate(WEEK, VICTIM_KEY, owner=MIMIC)
    assert mimicked.allocated_by == MIMIC
    assert store.get(mimicked.episode_id).metadata == {"allocated_by": MIMIC.to_dict()}
    outside = store.allocate(WEEK, default_allocation_key("victim", "allocate", "manual__by-hand", 2))
    ownerless = store.allocate(WEEK, "weekly-report:2026-W32")
    rows = _rows(store)
    assert (rows[mimicked.episode_id]["owner"], rows[mimicked.episode_id]["owner_source"]) == (
        MIMIC.to_dict(),
        "recorded",
    )
    # Allocated outside Airflow's operator: the owner the key names, marked as read from the key.
    assert rows[outside.episode_id]["owner"] == Owner("victim", "allocate", "manual__by-hand", 2).to_dict()
    assert rows[outside.episode_id]["owner_source"] == "key"
    assert (rows[ownerless.episode_id]["owner"], rows[ownerless.episode_id]["owner_source"]) == (None, None)
    view = episode_view(store, mimicked.episode_id, now=NOW)
    assert (view["owner"], view["owner_source"]) == (MIMIC.to_dict(), "recorded")
    assert episode_view(store, outside.episode_id, now=NOW)["owner_source"] == "key"


def test_the_owner_is_read_back_by_another_store_object(backend: Backend, store: EpisodeStore) -> None:
    mapped = Owner("media", "generate", RUN, 7)
    made = store.allocate(WEEK, "k", "fp", owner=mapped)
    with backend.open() as other:
        assert other.get(made.episode_id) == made
        assert other.get(made.episode_id).allocated_by == mapped
        assert other.find("k") == made


def test_a_retry_keeps_the_first_owner_and_another_dag_is_refused(backend: Backend, store: EpisodeStore) -> None:
    """Same DAG (retry, clear, a shared key of its own): the same episode, the first owner kept.
    Another DAG with the same key is not a retry of this invocation: refused, nothing changed."""
    first = Owner("media", "allocate", RUN, 3)
    made = store.allocate(WEEK, "media:weekly", owner=first)
    for same_dag in (first, Owner("media", "allocate_again", "manual__2026-08-04T00:00:00+00:00", None)):
        again = store.allocate(WEEK, "media:weekly", owner=same_dag)
        assert again.reused and again.episode_id == made.episode_id and again.allocated_by == first
    # An earlier release's operator (no owner recorded, the key names its DAG) and a CLI key (no owner at all).
    earlier = store.allocate(WEEK, VICTIM_KEY)
    by_hand = store.allocate(WEEK, "weekly-report:2026-W32")
    before = backend.snapshot()
    for key, holder, dag in (("media:weekly", made, "media"), (VICTIM_KEY, earlier, "victim")):
        with pytest.raises(AllocationConflict) as refused:
            store.allocate(WEEK, key, owner=MIMIC)
        assert refused.value.episode_ids == (holder.episode_id,)
        assert f"DAG {dag!r}" in str(refused.value) and "'mimic'" in str(refused.value)
    assert backend.snapshot() == before
    own = store.allocate(WEEK, VICTIM_KEY, owner=Owner("victim", "allocate", RUN, None))
    assert own.reused and own.allocated_by is None  # a retry writes nothing, not even an owner
    adopted = store.allocate(WEEK, "weekly-report:2026-W32", owner=MIMIC)
    assert adopted.episode_id == by_hand.episode_id and adopted.allocated_by is None
    assert backend.snapshot() == before
    # Without an owner (the library, the CLI) a retry is a retry, as before.
    assert store.allocate(WEEK, "media:weekly").allocated_by == first


def test_no_update_changes_or_drops_the_recorded_owner(backend: Backend, store: EpisodeStore) -> None:
    made = store.allocate(WEEK, "k", owner=MIMIC)
    before = backend.snapshot()
    for metadata in ({}, {"allocated_by": Owner("victim", "allocate", RUN, None).to_dict()}):

        def change(episode: Episode, metadata: dict[str, Any] = metadata) -> Episode:
            return dataclasses.replace(episode, metadata=metadata)

        with pytest.raises(ValueError, match="owner"):
            store.update(made.episode_id, change)
    assert backend.snapshot() == before
    noted = store.update(made.episode_id, lambda e: dataclasses.replace(e, metadata={**e.metadata, "note": "x"}))
    assert noted.allocated_by == MIMIC


@pytest.mark.parametrize(
    "bad",
    [
        "mimic",
        {"dag_id": "mimic", "task_id": "allocate", "run_id": RUN},
        {"dag_id": "mi mic", "task_id": "allocate", "run_id": RUN, "map_index": None},
        {"dag_id": "mimic", "task_id": "allocate", "run_id": "", "map_index": None},
        {"dag_id": "mimic", "task_id": "allocate", "run_id": None, "map_index": None},
        {"dag_id": "mimic", "task_id": "allocate", "run_id": RUN, "map_index": -1},
        {"dag_id": "mimic", "task_id": "allocate", "run_id": RUN, "map_index": True},
        {"dag_id": "mimic", "task_id": "allocate", "run_id": "a\nb", "map_index": None},
        {"dag_id": "mimic", "task_id": "allocate", "run_id": RUN, "map_index": None, "team": "a"},
    ],
)
def test_a_malformed_recorded_owner_is_store_corrupted(backend: Backend, store: EpisodeStore, bad: object) -> None:
    made = store.allocate(WEEK, "k", owner=MIMIC)
    store.update(made.episode_id, lambda e: dataclasses.replace(e, metadata={**e.metadata, "note": "x"}))
    _write_metadata(backend, made.episode_id, {"allocated_by": bad})
    with pytest.raises(StoreCorrupted, match="allocated_by"):
        store.get(made.episode_id)


def test_an_owner_that_breaks_the_rules_is_bad_input(backend: Backend, store: EpisodeStore) -> None:
    before = backend.snapshot()
    for bad in (
        Owner("mi mic", "t", RUN, None),
        Owner("d", "t", None, None),
        Owner("d", "t", RUN, -1),
        {"dag_id": "d", "task_id": "t", "run_id": RUN, "map_index": None},
    ):
        with pytest.raises(InvalidIdentifier, match="owner"):
            store.allocate(WEEK, "k", owner=bad)  # type: ignore[arg-type]
    assert backend.snapshot() == before


def test_the_file_store_rebuilds_a_lost_fresh_record_with_its_owner(tmp_path: Any) -> None:
    """The history entry is the commit: it carries the owner, so a record lost after it comes back owned."""
    backend = FileBackend(tmp_path / "store")
    with backend.open() as store:
        made = store.allocate(WEEK, "k", owner=MIMIC)
        backend.state_path(made.episode_id).unlink()
        assert store.get(made.episode_id) == made
        assert store.allocate(WEEK, "k", owner=MIMIC).allocated_by == MIMIC  # the retry writes it back
        assert backend.stored(made.episode_id)["metadata"] == {"allocated_by": MIMIC.to_dict()}
        history = (tmp_path / "store" / "episodes" / WEEK / "history.jsonl").read_text().splitlines()
        assert json.loads(history[1])["owner"] == MIMIC.to_dict()
        assert store.check([]).problems == []


def test_check_reports_a_record_whose_owner_disagrees_with_its_commit(tmp_path: Any) -> None:
    """A hand edit that moves an episode onto another DAG's page: the history entry still names the first."""
    backend = FileBackend(tmp_path / "store")
    with backend.open() as store:
        made = store.allocate(WEEK, "k", owner=MIMIC)
        _write_metadata(backend, made.episode_id, {"allocated_by": Owner("victim", "allocate", RUN, None).to_dict()})
        problems = [str(p) for p in store.check([]).problems]
    assert any(f"history gives {made.episode_id} another owner" in p for p in problems), problems
