"""The conformance kit against the two example adapters, each behind the proxy in front of its local API.

The batch style makes two calls per job: the kit is told which one is paid (``POST /v1/batches``),
so a lost answer to the free upload must read as "not sent" and a lost batch answer as "maybe
created". Told nothing, the kit counts both calls as paid and says so, in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_idempotent_jobs.errors import ProviderOutcomeUnknown, ProviderUnavailable
from airflow_idempotent_jobs.paid.provider import PaidProvider
from airflow_idempotent_jobs.testing.conformance import ConformanceReport, assert_conformant, check_adapter
from example_adapters.batch_api import BatchApi
from example_adapters.batch_style import BatchStyleProvider
from example_adapters.prediction_api import PredictionApi
from example_adapters.prediction_style import PredictionStyleProvider

REQUEST = {"prompt": "a lighthouse at dusk", "units": 2}
HOLD = 3.0
CROSS_FIND = "find, the token of a submit another process lost"
#: The adapters' own client options: a read timeout under the kit's hold, quick connect retries.
CLIENT: dict[str, Any] = {"read_timeout": 1.0, "connect_retries": 1, "backoff_initial": 0.01}


@pytest.fixture
def prediction_api() -> Iterator[PredictionApi]:
    with PredictionApi() as api:
        yield api


@pytest.fixture
def batch_api() -> Iterator[BatchApi]:
    with BatchApi() as api:
        yield api


def prediction(api: PredictionApi, **options: Any) -> Callable[[str], PaidProvider]:
    return lambda base_url: PredictionStyleProvider(base_url, api.auth_token, **CLIENT, **options)


def batch(api: BatchApi, **options: Any) -> Callable[[str], PaidProvider]:
    return lambda base_url: BatchStyleProvider(base_url, api.auth_token, **CLIENT, **options)


def names(report: ConformanceReport) -> list[str]:
    return [check.name for check in report.checks]


@pytest.mark.parametrize("lookup", [True, False], ids=["b-listing", "c-no-listing"])
def test_the_prediction_style_adapter_conforms(prediction_api: PredictionApi, lookup: bool) -> None:
    report = assert_conformant(
        prediction(prediction_api, lookup=lookup),
        api_url=prediction_api.url,
        request=REQUEST,
        paid=["POST /v1/predictions"],
        hold_seconds=HOLD,
    )
    assert ("find, the token of a lost submit" in names(report)) is lookup
    assert (CROSS_FIND in names(report)) is lookup  # its "no job" is a 200 with an empty list: it still passes
    assert "submit, paid call: connection closed after the API got the request, without an answer" in names(report)


@pytest.mark.parametrize("lookup", [True, False], ids=["b-listing", "c-no-listing"])
def test_the_batch_style_adapter_conforms_with_its_paid_call_named(batch_api: BatchApi, lookup: bool) -> None:
    report = assert_conformant(
        batch(batch_api, lookup=lookup),
        api_url=batch_api.url,
        request=REQUEST,
        paid=["POST /v1/batches"],
        hold_seconds=HOLD,
    )
    lines = {check.name: check.detail for check in report.checks}
    assert (CROSS_FIND in lines) is lookup
    drop = "connection closed after the API got the request, without an answer"
    upload = f"submit, free call POST /v1/files (request 1): {drop}"
    assert "raised ProviderUnavailable" in lines[upload]
    batch_drop = f"submit, paid call: {drop}"
    assert "raised ProviderOutcomeUnknown" in lines[batch_drop]
    assert report.paid == "POST /v1/batches"


def test_the_batch_styles_upload_is_not_mistaken_for_the_paid_call(batch_api: BatchApi) -> None:
    # Told nothing, the kit counts the upload as paid too, and stops at its first check, saying why.
    report = check_adapter(batch(batch_api), api_url=batch_api.url, request=REQUEST, hold_seconds=HOLD)
    assert not report.ok and names(report) == ["the PaidProvider port", "submit, no fault"]
    detail = report.checks[-1].detail
    assert "sent 2 requests the kit counts as paid" in detail
    assert "POST /v1/files -> 200" in detail or "POST /v1/files -> 201" in detail
    assert "name the one request that creates the billable job with paid=[...]" in detail


def test_a_batch_adapter_that_reads_a_lost_upload_as_maybe_paid_is_told_the_batch_was_never_sent(
    batch_api: BatchApi,
) -> None:
    class CautiousUpload(BatchStyleProvider):
        """Says "maybe created" when the free upload's answer is lost: safe, but a reconcile for nothing."""

        def upload(self, request: Any, idempotency_token: str) -> str:
            try:
                return super().upload(request, idempotency_token)
            except ProviderUnavailable as exc:
                raise ProviderOutcomeUnknown(str(exc)) from None

    report = check_adapter(
        lambda base_url: CautiousUpload(base_url, batch_api.auth_token, **CLIENT),
        api_url=batch_api.url,
        request=REQUEST,
        paid=["POST /v1/batches"],
        hold_seconds=HOLD,
    )
    failed = [check for check in report.failures if check.name.startswith("submit, free call POST /v1/files")]
    assert failed and all("expected ProviderUnavailable" in check.detail for check in failed)
    assert all("the paid call (POST /v1/batches) was never sent" in check.detail for check in failed)
    assert all(not check.name.startswith("submit, paid call") for check in report.failures)
