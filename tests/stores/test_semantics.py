"""What the source article verified, for every store: sequences, retries, week boundaries, lookups.

Only the public store API and the `Backend` methods are used, so the suite runs unchanged against
each backend in ``conftest.BACKENDS``.
"""

from __future__ import annotations

import dataclasses

import pytest

from airflow_idempotent_jobs import (
    AllocationConflict,
    Episode,
    EpisodeId,
    EpisodeNotFound,
    EpisodeStatus,
    EpisodeStore,
    InvalidIdentifier,
    StoreCorrupted,
    WeekId,
)
from tests.backends import Backend
from tests.clirun import run_cli, run_python

W32, W33 = "2026-W32", "2026-W33"


def finished(status: EpisodeStatus):
    return lambda episode: dataclasses.replace(episode, status=status)


def test_sequences_increment_within_a_week_and_reset_in_the_next(store: EpisodeStore) -> None:
    first = [store.allocate(W32, f"job-{n}").episode_id for n in range(3)]
    assert first == ["2026-W32-0", "2026-W32-1", "2026-W32-2"]
    assert store.allocate(W33, "job-next-week").episode_id == "2026-W33-0"
    assert store.allocate(W32, "job-late").episode_id == "2026-W32-3"
    assert store.allocate("2027-W01", "job-new-year").episode_id == "2027-W01-0"


def test_a_new_episode_carries_its_identity(store: EpisodeStore) -> None:
    episode = store.allocate(WeekId(2026, 32), "job-a", fingerprint="sha256:abc")
    assert (episode.week_id, episode.sequence, episode.allocation_key) == (W32, 0, "job-a")
    assert episode.fingerprint == "sha256:abc"
    assert episode.status is EpisodeStatus.ALLOCATED
    assert episode.reused is False
    assert episode.created_at.endswith("+00:00")


def test_the_same_key_gets_the_same_episode_back(store: EpisodeStore) -> None:
    first = store.allocate(W32, "airflow:weekly:allocate:run-1")
    store.allocate(W32, "airflow:weekly:allocate:run-2")
    again = store.allocate(W32, "airflow:weekly:allocate:run-1")
    assert again.episode_id == first.episode_id == "2026-W32-0"
    assert again.reused is True
    assert dataclasses.replace(again, reused=False) == first
    assert len(store.list(W32)) == 2


def test_a_retry_after_the_store_is_reopened_gets_the_same_episode(backend: Backend) -> None:
    with backend.open() as store:
        first = store.allocate(W32, "job-a")
    with backend.open() as reopened:
        again = reopened.allocate(W32, "job-a")
        assert again.episode_id == first.episode_id
        assert again.reused is True
        assert reopened.allocate(W32, "job-b").episode_id == "2026-W32-1"


def test_a_retry_from_another_process_gets_the_same_episode(backend: Backend, store: EpisodeStore) -> None:
    mine = store.allocate(W32, "job-a")
    # The command line, in another process.
    cli = run_cli("--store", backend.url, "allocate", "--week", W32, "--key", "job-a")
    assert cli.code == 0, cli.stderr
    assert cli.stdout == f"{mine.episode_id}\n"
    # The library, in another process; then this process sees what that one allocated.
    code = (
        "import sys; from airflow_idempotent_jobs import open_store\n"
        "with open_store(sys.argv[1]) as s:\n"
        "    a = s.allocate(sys.argv[2], 'job-a'); b = s.allocate(sys.argv[2], 'job-b')\n"
        "    print(a.episode_id, a.reused, b.episode_id, b.reused)"
    )
    other = run_python(code, backend.url, W32)
    assert other.code == 0, other.stderr
    assert other.stdout.split() == ["2026-W32-0", "True", "2026-W32-1", "False"]
    again = store.allocate(W32, "job-b")
    assert (again.episode_id, again.reused) == ("2026-W32-1", True)


def test_a_key_never_silently_crosses_iso_weeks(backend: Backend, store: EpisodeStore) -> None:
    held = store.allocate(W32, "airflow:weekly:allocate:run-1")
    before = backend.snapshot()
    with pytest.raises(AllocationConflict) as caught:
        store.allocate(W33, "airflow:weekly:allocate:run-1")
    assert caught.value.episode_ids == (held.episode_id,)
    assert caught.value.allocation_key == "airflow:weekly:allocate:run-1"
    assert "2026-W32" in str(caught.value)
    assert backend.snapshot() == before
    assert store.list(W33) == []
    # The next genuine allocation in the other week still starts at 0.
    assert store.allocate(W33, "another-key").episode_id == "2026-W33-0"


def test_a_different_fingerprint_is_a_conflict_not_a_reuse(backend: Backend, store: EpisodeStore) -> None:
    store.allocate(W32, "job-a", fingerprint="sha256:one")
    before = backend.snapshot()
    for other in ("sha256:two", None):
        with pytest.raises(AllocationConflict, match="fingerprint"):
            store.allocate(W32, "job-a", fingerprint=other)
    assert backend.snapshot() == before
    assert store.allocate(W32, "job-a", fingerprint="sha256:one").reused is True
    unbound = store.allocate(W32, "job-b")
    with pytest.raises(AllocationConflict):
        store.allocate(W32, "job-b", fingerprint="sha256:late")
    assert store.allocate(W32, "job-b").episode_id == unbound.episode_id


def test_completed_episodes_coexist_in_one_week_group(store: EpisodeStore) -> None:
    for n, status in enumerate([EpisodeStatus.SUCCEEDED, EpisodeStatus.FAILED, EpisodeStatus.SUCCEEDED]):
        episode = store.allocate(W32, f"run-{n}")
        assert episode.sequence == n
        done = store.update(episode.episode_id, finished(status))
        assert done.status is status
    latest = store.allocate(W32, "run-3")
    assert latest.episode_id == "2026-W32-3"
    week = store.list(W32)
    assert [(e.sequence, e.status) for e in week] == [
        (0, EpisodeStatus.SUCCEEDED),
        (1, EpisodeStatus.FAILED),
        (2, EpisodeStatus.SUCCEEDED),
        (3, EpisodeStatus.ALLOCATED),
    ]
    # A retry of a finished run still gets its own episode back, whatever happened to it.
    again = store.allocate(W32, "run-0")
    assert (again.episode_id, again.status, again.reused) == ("2026-W32-0", EpisodeStatus.SUCCEEDED, True)


def test_a_sequence_is_never_reused(backend: Backend, store: EpisodeStore) -> None:
    ids = [store.allocate(W32, f"run-{n}").episode_id for n in range(3)]
    store.update(ids[2], finished(EpisodeStatus.CANCELLED))
    store.update(ids[1], finished(EpisodeStatus.CANCELLED))
    assert store.allocate(W32, "run-3").sequence == 3
    with backend.open() as reopened:
        assert reopened.allocate(W32, "run-4").sequence == 4
    sequences = [e.sequence for e in store.list(W32)]
    assert sequences == [0, 1, 2, 3, 4]
    assert len({e.allocation_key for e in store.list(W32)}) == 5


def test_get_accepts_text_or_an_episode_id(store: EpisodeStore) -> None:
    episode = store.allocate(W32, "job-a")
    by_text = store.get("2026-W32-0")
    by_id = store.get(EpisodeId(WeekId(2026, 32), 0))
    assert by_text == by_id == dataclasses.replace(episode, reused=False)
    assert by_text.reused is False


def test_get_of_an_unknown_episode_raises_not_found(store: EpisodeStore) -> None:
    store.allocate(W32, "job-a")
    with pytest.raises(EpisodeNotFound) as caught:
        store.get("2026-W32-1")
    assert caught.value.episode_id == "2026-W32-1"
    with pytest.raises(EpisodeNotFound):
        store.get("2026-W33-0")
    with pytest.raises(InvalidIdentifier):
        store.get("2026-W32-01")


def test_find_returns_the_holder_or_none(store: EpisodeStore) -> None:
    store.allocate(W32, "job-a")
    held = store.allocate(W33, "job-b")
    found = store.find("job-b")
    assert found is not None
    assert found.episode_id == held.episode_id
    assert store.find("never-allocated") is None
    with pytest.raises(InvalidIdentifier):
        store.find("bad\nkey")  # keys are opaque text ("/" is fine since 1bd0900), but never a control


def test_list_filters_by_week_and_orders_by_week_then_sequence(store: EpisodeStore) -> None:
    assert store.list() == []
    order = [(W33, "a"), ("2025-W52", "b"), (W32, "c"), (W33, "d"), (W32, "e"), ("2027-W01", "f")]
    for week, key in order:
        store.allocate(week, key)
    everything = [e.episode_id for e in store.list()]
    assert everything == ["2025-W52-0", "2026-W32-0", "2026-W32-1", "2026-W33-0", "2026-W33-1", "2027-W01-0"]
    assert [e.allocation_key for e in store.list(W32)] == ["c", "e"]
    assert [e.episode_id for e in store.list(WeekId(2026, 33))] == ["2026-W33-0", "2026-W33-1"]
    assert store.list("2026-W40") == []
    with pytest.raises(InvalidIdentifier):
        store.list("2026-32")


def test_update_persists_the_change(backend: Backend, store: EpisodeStore) -> None:
    episode = store.allocate(W32, "job-a")
    changed = store.update(
        EpisodeId.parse(episode.episode_id),
        lambda e: dataclasses.replace(e, status=EpisodeStatus.RUNNING, metadata={"note": "started"}),
    )
    assert changed.status is EpisodeStatus.RUNNING
    with backend.open() as reopened:
        stored = reopened.get(episode.episode_id)
    assert stored.status is EpisodeStatus.RUNNING
    assert dict(stored.metadata) == {"note": "started"}
    assert (stored.allocation_key, stored.created_at) == (episode.allocation_key, episode.created_at)


def test_a_refused_update_writes_nothing(backend: Backend, store: EpisodeStore) -> None:
    episode = store.allocate(W32, "job-a")
    before = backend.snapshot()

    def refuse(_episode: Episode) -> Episode:
        raise RuntimeError("not now")

    with pytest.raises(RuntimeError, match="not now"):
        store.update(episode.episode_id, refuse)
    with pytest.raises(ValueError, match=r"identity|id"):
        store.update(episode.episode_id, lambda e: dataclasses.replace(e, allocation_key="job-b"))
    with pytest.raises(EpisodeNotFound):
        store.update("2026-W32-7", finished(EpisodeStatus.FAILED))
    store.update(episode.episode_id, lambda e: e)  # no change: nothing to write
    assert backend.snapshot() == before


def test_update_in_week_sees_only_the_other_episodes_of_that_week(store: EpisodeStore) -> None:
    target = store.allocate(W32, "job-a")
    store.allocate(W32, "job-b")
    store.allocate(W32, "job-c")
    store.allocate(W33, "job-d")
    seen: list[str] = []

    def note(episode: Episode, others: list[Episode]) -> Episode:
        seen.extend(sorted(o.episode_id for o in others))
        return dataclasses.replace(episode, metadata={"peers": len(others)})

    after = store.update_in_week(target.episode_id, note)
    assert seen == ["2026-W32-1", "2026-W32-2"]
    assert store.get(target.episode_id).metadata == {"peers": 2}
    assert after.metadata == {"peers": 2}


def test_only_update_in_week_reads_the_rest_of_the_week(backend: Backend, store: EpisodeStore) -> None:
    """A plain update (every ledger move) reads its own record only, not the week under the lock."""
    target = store.allocate(W32, "job-a")
    store.allocate(W32, "job-b")
    backend.corrupt("2026-W32-1", "not-json")  # a sibling that any read of the week would trip on
    assert store.update(target.episode_id, finished(EpisodeStatus.RUNNING)).status is EpisodeStatus.RUNNING
    with pytest.raises(StoreCorrupted, match="2026-W32-1"):
        store.update_in_week(target.episode_id, lambda episode, _others: episode)
