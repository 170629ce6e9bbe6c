"""The conformance kit runs `OpenAIBatchProvider`, with the real SDK, behind its fault proxy.

The upload is free and the batch creation paid (``paid=["POST /v1/batches"]``). The same adapter with
the SDK's own retries left on for the paid call must fail the kit: a lost answer, retried by the
SDK, bills a second batch, which is what Airflow's own batch operators do.
"""

from __future__ import annotations

from collections.abc import Callable

import openai

from airflow_idempotent_jobs.paid import PaidProvider
from airflow_idempotent_jobs.testing.conformance import Fault, FaultPlan, assert_conformant, check_adapter
from airflow_idempotent_jobs.testing.openai_api import OpenAIApi
from airflow_idempotent_jobs.vendors.openai import OpenAIBatchProvider
from tests.vendors.openai.support import PRICES, chat_request

HOLD = 2.0
REQUEST = chat_request(1)


def factory(
    api: OpenAIApi, cls: type[OpenAIBatchProvider] = OpenAIBatchProvider, max_retries: int = 0
) -> Callable[[str], PaidProvider]:
    """The client's ``max_retries`` governs reads only (the adapter's paid call never retries): 0 here, so
    that each read fault is judged on one answer in a few seconds; test_lookup keeps the SDK's default."""

    def build(base_url: str) -> OpenAIBatchProvider:
        client = openai.OpenAI(api_key=api.api_key, base_url=base_url, timeout=1.0, max_retries=max_retries)
        return cls(prices=PRICES, client_factory=lambda: client)

    return build


def test_the_openai_adapter_conforms(api: OpenAIApi) -> None:
    report = assert_conformant(
        factory(api), api_url=api.base_url, request=REQUEST, paid=["POST /v1/batches"], hold_seconds=HOLD
    )
    lines = {check.name: check.detail for check in report.checks}
    assert (
        "raised ProviderOutcomeUnknown"
        in lines["submit, paid call: connection closed after the API got the request, without an answer"]
    )
    assert "find, the token of a submit another process lost" in lines


class RetryingCreate(OpenAIBatchProvider):
    """The paid call made with the SDK's default retries, as Airflow's OpenAI batch operators make it."""

    def _paid_client(self) -> openai.OpenAI:
        return self._client.with_options(max_retries=openai.DEFAULT_MAX_RETRIES)


def test_the_kit_catches_the_sdks_retries_on_the_paid_call(api: OpenAIApi) -> None:
    only_paid_faults = FaultPlan(submit=(Fault.drop(),), free=(), status=(), find=())
    report = check_adapter(
        factory(api, RetryingCreate), api_url=api.base_url, request=REQUEST, paid=["POST /v1/batches"],
        hold_seconds=HOLD, plan=only_paid_faults,
    )  # fmt: skip
    assert not report.ok
    unsafe = [check for check in report.failures if "sent the paid call 2 times" in check.detail]
    assert len(unsafe) == 1 and all(check.name.startswith("submit, paid call") for check in unsafe)
    assert api.accepted() > 3  # the kit's own submits, and a second batch for each fault
