"""The local Replicate double itself, over plain HTTP: what it refuses, how it pages, cancels and caps.

The provider's tests lean on it, so its shape is pinned here: 401 without the token, 422 for a body
field the API's schema does not allow, ``Cancel-After`` (at least 5 s) as the prediction's deadline,
cursor pages newest first that honour ``created_after``/``created_before``, and cancel.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from airflow_idempotent_jobs.testing._replicate_predictions import rfc3339
from airflow_idempotent_jobs.testing.replicate_api import ReplicateApi


@pytest.fixture
def api() -> Iterator[ReplicateApi]:
    with ReplicateApi(page_size=2) as running:
        yield running


@pytest.fixture
def http(api: ReplicateApi) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {api.api_token}"}) as client:
        yield client


def create(http: httpx.Client, **headers: str) -> httpx.Response:
    return http.post("/v1/models/acme/img/predictions", json={"input": {"prompt": "x"}}, headers=headers)


def test_every_call_needs_the_token(api: ReplicateApi) -> None:
    for headers in ({}, {"Authorization": "Bearer r8_wrong"}, {"Authorization": api.api_token}):
        answer = httpx.get(f"{api.url}/v1/predictions", headers=headers)
        assert answer.status_code == 401 and answer.json()["title"] == "Unauthenticated"
    assert api.stats()["unauthorized"] == 3 and api.accepted() == 0


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        ("/v1/models/acme/img/predictions", {"input": {}, "version": "x"}, "Additional property version"),
        ("/v1/predictions", {"input": {}, "version": "a" * 64, "metadata": {}}, "Additional property metadata"),
        ("/v1/predictions", {"input": {}, "version": "nope"}, "not a model or version"),
        ("/v1/predictions", {"version": "a" * 64}, "input"),
    ],
)
def test_a_body_the_schema_refuses_is_422(http: httpx.Client, path: str, body: dict[str, Any], detail: str) -> None:
    answer = http.post(path, json=body)
    assert answer.status_code == 422 and detail in answer.json()["detail"]


def test_cancel_after_is_the_deadline_and_at_least_five_seconds(api: ReplicateApi, http: httpx.Client) -> None:
    assert create(http, **{"Cancel-After": "3s"}).status_code == 422
    assert create(http, **{"Cancel-After": "soon"}).status_code == 422
    made = create(http, **{"Cancel-After": "1h30m"}).json()
    deadline = dt.datetime.fromisoformat(made["deadline"].replace("Z", "+00:00"))
    created = dt.datetime.fromisoformat(made["created_at"].replace("Z", "+00:00"))
    assert (deadline - created).total_seconds() == 5400 and api.accepted() == 1


def test_pages_are_newest_first_by_cursor_and_filtered_by_creation_time(api: ReplicateApi, http: httpx.Client) -> None:
    made = [create(http).json() for _ in range(5)]
    seen: list[str] = []
    url: str | None = "/v1/predictions"
    while url is not None:
        page = http.get(url).json()
        assert len(page["results"]) <= 2 and page["previous"] is None
        seen += [one["id"] for one in page["results"]]
        url = page["next"]
    assert seen == [one["id"] for one in reversed(made)]
    third = made[2]["created_at"]
    after = http.get("/v1/predictions", params={"created_after": third}).json()
    assert [one["id"] for one in after["results"]] == [made[4]["id"], made[3]["id"]] and after["next"]
    before = http.get("/v1/predictions", params={"created_before": third}).json()
    assert [one["id"] for one in before["results"]] == [made[1]["id"], made[0]["id"]] and before["next"] is None
    assert http.get("/v1/predictions", params={"created_after": "yesterday"}).status_code == 400
    assert rfc3339(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)) == "2026-01-01T00:00:00.000000Z"


def test_cancel_ends_a_prediction_that_has_not_started(api: ReplicateApi, http: httpx.Client) -> None:
    made = create(http).json()
    canceled = http.post(f"/v1/predictions/{made['id']}/cancel").json()
    assert canceled["status"] == "canceled" and canceled["metrics"]["predict_time"] == 0.0
    assert http.get(f"/v1/predictions/{made['id']}").json()["status"] == "canceled"
    assert api.stats()["cancel_calls"] == 1
