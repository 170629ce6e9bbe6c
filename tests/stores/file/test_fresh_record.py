"""The fresh record's fast rendering writes exactly the bytes of the general one, whatever the key."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_idempotent_jobs.allocation import new_episode
from airflow_idempotent_jobs.episode import EpisodeStatus
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.owner import Owner
from airflow_idempotent_jobs.stores.durable import dump_json
from airflow_idempotent_jobs.stores.file._fresh_record import record_bytes

KEYS = st.text(min_size=1, max_size=80)
FINGERPRINTS = st.none() | st.text(alphabet=st.characters(blacklist_categories=("Z", "C")), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(key=KEYS, fingerprint=FINGERPRINTS, sequence=st.integers(0, 999_999_999), week=st.integers(1, 52))
def test_a_fresh_record_renders_as_dump_json_would(key: str, fingerprint: str | None, sequence: int, week: int) -> None:
    episode = new_episode(WeekId(2026, week), sequence, key, fingerprint)
    assert record_bytes(episode) == dump_json(episode.to_record())


OWNERS = st.builds(
    Owner,
    dag_id=st.from_regex(r"[\w.-]{1,40}", fullmatch=True),
    task_id=st.from_regex(r"[\w.-]{1,40}", fullmatch=True),
    run_id=st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")), min_size=1),
    map_index=st.none() | st.integers(0, 2**31 - 1),
)


@settings(max_examples=300, deadline=None)
@given(key=KEYS, fingerprint=FINGERPRINTS, sequence=st.integers(0, 999_999_999), owner=OWNERS)
def test_a_fresh_record_with_its_owner_renders_as_dump_json_would(
    key: str, fingerprint: str | None, sequence: int, owner: Owner
) -> None:
    episode = new_episode(WeekId(2026, 32), sequence, key, fingerprint, owner)
    assert record_bytes(episode) == dump_json(episode.to_record())


def test_a_record_that_is_not_fresh_takes_the_general_path() -> None:
    episode = new_episode(WeekId(2026, 32), 0, 'quote " and \\ and \u202e', "fp")
    changed = [
        dataclasses.replace(episode, status=EpisodeStatus.RUNNING),
        dataclasses.replace(episode, metadata={"note": "x"}),
        dataclasses.replace(episode, updated_at="2030-01-01T00:00:00.000000+00:00"),
    ]
    for other in changed:
        assert record_bytes(other) == dump_json(other.to_record())
        assert record_bytes(other) != record_bytes(episode)
