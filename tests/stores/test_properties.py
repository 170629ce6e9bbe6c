"""Property-based: random sequences of allocate/find/list/get agree with a small in-memory model.

The model is the allocation rule stated plainly: a key owns at most one episode, forever, in one
week, with one fingerprint; a new episode takes its week's next sequence. Each example runs on a
fresh store: the file store in its own temporary directory, the PostgreSQL store in a namespace of
its own within the test's database. Examples are bounded to keep the run short.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from airflow_idempotent_jobs import (
    AllocationConflict,
    EpisodeNotFound,
    EpisodeStore,
    FileEpisodeStore,
    WeekId,
    open_store,
)

WEEKS = st.sampled_from(["2026-W52", "2026-W53", "2027-W01", "2020-W53"])
KEYS = st.sampled_from(["a", "b", "c", "d", "e", "airflow:dag:task:run:0"])
FINGERPRINTS = st.sampled_from([None, "sha256:1", "sha256:2"])


@dataclass(frozen=True)
class Held:
    week: str
    sequence: int
    fingerprint: str | None

    @property
    def episode_id(self) -> str:
        return f"{self.week}-{self.sequence}"


class AllocationModel(RuleBasedStateMachine):
    def __init__(self, opener: Callable[[], EpisodeStore], cleanup: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self.opener = opener
        self.cleanup = cleanup
        self.store = opener()
        self.held: dict[str, Held] = {}
        self.next_sequence: dict[str, int] = {}

    def teardown(self) -> None:
        self.store.close()
        self.cleanup()

    @rule(week=WEEKS, key=KEYS, fingerprint=FINGERPRINTS)
    def allocate(self, week: str, key: str, fingerprint: str | None) -> None:
        held = self.held.get(key)
        if held is not None and (held.week != week or held.fingerprint != fingerprint):
            with pytest.raises(AllocationConflict) as caught:
                self.store.allocate(week, key, fingerprint)
            assert caught.value.episode_ids == (held.episode_id,)
            return
        episode = self.store.allocate(WeekId.parse(week), key, fingerprint)
        if held is None:
            held = Held(week, self.next_sequence.get(week, 0), fingerprint)
            self.held[key] = held
            self.next_sequence[week] = held.sequence + 1
            assert episode.reused is False
        else:
            assert episode.reused is True
        assert (episode.episode_id, episode.week_id, episode.sequence) == (held.episode_id, week, held.sequence)
        assert (episode.allocation_key, episode.fingerprint) == (key, fingerprint)

    @rule(key=KEYS)
    def find(self, key: str) -> None:
        found = self.store.find(key)
        held = self.held.get(key)
        assert (found and found.episode_id) == (held and held.episode_id)

    @rule(week=WEEKS, sequence=st.integers(min_value=0, max_value=4))
    def get(self, week: str, sequence: int) -> None:
        wanted = f"{week}-{sequence}"
        owners = [key for key, held in self.held.items() if held.episode_id == wanted]
        if owners:
            assert self.store.get(wanted).allocation_key == owners[0]
        else:
            with pytest.raises(EpisodeNotFound):
                self.store.get(wanted)

    @rule()
    def reopen(self) -> None:
        """Another store object (as another process would have) sees the same state."""
        self.store.close()
        self.store = self.opener()

    @invariant()
    def list_matches_the_model(self) -> None:
        listed = [(e.episode_id, e.allocation_key) for e in self.store.list()]
        expected = sorted(((h.episode_id, k) for k, h in self.held.items()), key=lambda x: _order(x[0]))
        assert listed == expected
        for week, count in self.next_sequence.items():
            assert [e.sequence for e in self.store.list(week)] == list(range(count))


def _order(episode_id: str) -> tuple[str, int]:
    week, sequence = episode_id.rsplit("-", 1)
    return week, int(sequence)


SETTINGS = settings(
    max_examples=50,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class FileStoreModel(AllocationModel):
    def __init__(self) -> None:
        root = tempfile.mkdtemp(prefix="ij-prop-")
        super().__init__(lambda: FileEpisodeStore(root), lambda: shutil.rmtree(root, ignore_errors=True))


class PostgresStoreModel(AllocationModel):
    #: The test's database; every example takes a namespace of its own in it.
    database_url: ClassVar[str] = ""

    def __init__(self) -> None:
        url = f"{self.database_url}?namespace=prop-{uuid.uuid4().hex}"
        super().__init__(lambda: open_store(url))


def test_the_file_store_matches_the_model() -> None:
    run_state_machine_as_test(FileStoreModel, settings=SETTINGS)


@pytest.mark.postgres
def test_the_postgres_store_matches_the_model(pg_database: str) -> None:
    PostgresStoreModel.database_url = pg_database
    run_state_machine_as_test(PostgresStoreModel, settings=SETTINGS)
