"""The conformance kit on `ReplicatePredictionProvider` with the real SDK, behind the fault proxy.

With the token in the input (capability (b)) the kit's lookups must find the prediction of a lost
submit, also one another process made; without it (``token_input=None``, capability (c)) every
fault must still be classified honestly, and there is nothing to look up.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_idempotent_jobs.testing.conformance import assert_conformant
from airflow_idempotent_jobs.testing.replicate_api import ReplicateApi
from tests.vendors.replicate.support import REQUEST, VERSION_REQUEST, provider

HOLD = 2.0


@pytest.fixture
def api() -> Iterator[ReplicateApi]:
    with ReplicateApi(seconds_to_finish=0.0) as running:
        yield running


def test_the_replicate_provider_conforms_with_lookup(api: ReplicateApi) -> None:
    report = assert_conformant(
        lambda base_url: provider(api, base_url, timeout=1.0),
        api_url=api.url,
        request=REQUEST,
        paid=["POST /v1/models/*/*/predictions"],
        hold_seconds=HOLD,
    )
    names = [check.name for check in report.checks]
    assert "find, the token of a lost submit" in names
    assert "find, the token of a submit another process lost" in names
    assert api.stats()["unauthorized"] == 0


def test_the_replicate_provider_conforms_without_lookup(api: ReplicateApi) -> None:
    report = assert_conformant(
        lambda base_url: provider(api, base_url, timeout=1.0, token_input=None),
        api_url=api.url,
        request=VERSION_REQUEST,
        paid=["POST /v1/predictions"],
        hold_seconds=HOLD,
    )
    assert not any(check.name.startswith("find") for check in report.checks)
    assert "untagged" in api.stats()["predictions_per_token"]
