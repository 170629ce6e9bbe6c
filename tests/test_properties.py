"""Property-based: random sequences of allocate/find/list/get agree with a small in-memory model.

The model is the allocation rule stated plainly: a key owns at most one episode, forever, in one
week, with one fingerprint; a new episode takes its week's next sequence. Each example runs on a
fresh file store in its own temporary directory; examples are bounded to keep the run short.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from airflow_idempotent_jobs import (
    AllocationConflict,
    EpisodeNotFound,
    FileEpisodeStore,
    WeekId,
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
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="ij-prop-")
        self.store = FileEpisodeStore(self.root)
        self.held: dict[str, Held] = {}
        self.next_sequence: dict[str, int] = {}

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

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
        self.store = FileEpisodeStore(self.root)

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


AllocationModel.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_allocation_matches_the_model = AllocationModel.TestCase
