"""The trigger's event is a row in Airflow's database: bounded, strict JSON, whatever the provider says.

The real trigger, resolving a real Connection, polling a real HTTP job API (`RawProvider`) whose
status answer the test writes by hand.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_idempotent_jobs.testing.server import ServerConfig, server_connection
from airflow_idempotent_jobs.triggers.paid_job import PaidJobTrigger
from tests.airflow.versions import import_string
from tests.paid.raw_provider import TOKEN, RawProvider

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(120)]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[RawProvider]:
    with RawProvider() as running:
        connection = server_connection(running.url, TOKEN, ServerConfig(lookup=False))
        monkeypatch.setenv("AIRFLOW_CONN_IJ_RAW", json.dumps(connection))
        yield running


def event_of(trigger: PaidJobTrigger) -> dict[str, Any]:
    async def first() -> list[Any]:
        return [event async for event in trigger.run()]

    events = asyncio.run(asyncio.wait_for(first(), timeout=60))
    assert len(events) == 1
    payload: dict[str, Any] = events[0].payload
    json.dumps(payload, allow_nan=False)  # strict JSON, or this raises
    return payload


def trigger(**options: Any) -> PaidJobTrigger:
    return PaidJobTrigger(
        episode_id="2026-W32-0", remote_ref="job-0", provider_conn_id="ij_raw", poll_initial_delay=0.01, **options
    )


def test_a_5mb_result_is_left_out_of_the_event(api: RawProvider) -> None:
    result = {"frames": ["x" * 1000] * 5000}
    api.result = json.dumps(result)
    payload = event_of(trigger())
    assert payload["status"] == "terminal" and payload["result"] is None
    canonical = json.dumps(result, sort_keys=True, separators=(",", ":")).encode()
    assert payload["result_omitted"]["size"] == len(canonical)
    assert payload["result_omitted"]["sha256"] == hashlib.sha256(canonical).hexdigest()
    assert len(json.dumps(payload)) < 1024


def test_the_events_bound_follows_the_operators(api: RawProvider) -> None:
    api.result = '{"url": "https://media.invalid/x.mp4"}'
    assert event_of(trigger())["result"] == {"url": "https://media.invalid/x.mp4"}
    small = event_of(trigger(max_result_bytes=8))
    assert small["result"] is None and small["result_omitted"]["limit"] == 8


@pytest.mark.parametrize(("raw", "sent"), [('"NaN"', "nan"), ('"1e999"', "inf"), ("-5", -5.0), ("2.5", 2.5)])
def test_a_cost_json_cannot_hold_travels_as_text(api: RawProvider, raw: str, sent: Any) -> None:
    api.cost = raw
    assert event_of(trigger())["cost"] == sent


def test_a_long_error_text_is_bounded(api: RawProvider) -> None:
    api.state, api.error = "error", "e" * 100_000
    payload = event_of(trigger())
    assert payload["state"] == "failed" and len(payload["error"]) < 2100


def test_max_result_bytes_round_trips_and_is_validated() -> None:
    kwargs = {
        "episode_id": "2026-W32-0",
        "remote_ref": "job-1",
        "provider_conn_id": "ij_raw",
        "poll_initial_delay": 0.5,
        "poll_max_delay": 4.0,
        "max_result_bytes": 1024,
    }
    classpath, serialized = PaidJobTrigger(**kwargs).serialize()  # type: ignore[arg-type]
    assert serialized == kwargs
    assert import_string(classpath)(**serialized).serialize() == (classpath, kwargs)
    for bad in (-1, 1.5, True, "64"):
        with pytest.raises(ValueError, match="max_result_bytes"):
            PaidJobTrigger(**{**kwargs, "max_result_bytes": bad})  # type: ignore[arg-type]


def test_the_operators_default_bound_is_the_ledgers() -> None:
    import inspect

    from airflow_idempotent_jobs.operators import PaidGenerationOperator
    from airflow_idempotent_jobs.paid.results import DEFAULT_RESULT_LIMIT

    default = inspect.signature(PaidGenerationOperator.__init__).parameters["max_result_bytes"].default
    assert default == DEFAULT_RESULT_LIMIT
