"""The conformance kit on `AnthropicBatchProvider` with the real SDK, behind the fault proxy.

Batches end on their first read (``seconds_to_finish=0``), so the kit's lookups can prove whose
batch each is. The same adapter with the SDK's retries left on for the create call must fail the
kit: one lost answer, and the SDK sends the paid call again on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from airflow_idempotent_jobs.testing.anthropic_api import AnthropicApi
from airflow_idempotent_jobs.testing.conformance import Fault, FaultPlan, assert_conformant, check_adapter
from airflow_idempotent_jobs.vendors.anthropic import AnthropicBatchProvider
from tests.vendors.anthropic.support import REQUEST, provider

HOLD = 2.0
PAID = ["POST /v1/messages/batches"]


@pytest.fixture
def api() -> Iterator[AnthropicApi]:
    with AnthropicApi(seconds_to_finish=0.0) as running:
        yield running


class RetryingProvider(AnthropicBatchProvider):
    """The mistake Airflow's own batch operators make: the SDK's default retries on the paid call."""

    paid_call_options: ClassVar[dict[str, Any]] = {}


def test_the_anthropic_batch_provider_conforms(api: AnthropicApi) -> None:
    report = assert_conformant(
        lambda base_url: provider(api, base_url, timeout=1.0),
        api_url=api.url,
        request=REQUEST,
        paid=PAID,
        hold_seconds=HOLD,
    )
    names = [check.name for check in report.checks]
    assert "find, the token of a lost submit" in names
    assert "find, the token of a submit another process lost" in names
    assert api.stats()["unauthorized"] == 0


def test_the_sdk_retries_on_the_paid_call_fail_the_kit(api: AnthropicApi) -> None:
    plan = FaultPlan(submit=(Fault.answer(500),), free=(), status=(), find=())
    report = check_adapter(
        lambda base_url: RetryingProvider(
            api_key=api.api_key, base_url=base_url, prices=provider(api).prices, timeout=1.0
        ),
        api_url=api.url,
        request=REQUEST,
        paid=PAID,
        plan=plan,
        hold_seconds=HOLD,
    )
    failed = [check for check in report.checks if not check.passed]
    assert not report.ok
    unsafe = [check for check in failed if "UNSAFE" in check.detail and "sent the paid call" in check.detail]
    assert unsafe, str(report)  # the SDK sent the create call again on its own
    per_tag = api.stats()["batches_per_tag"]
    assert 2 in per_tag.values(), per_tag  # one token, billed twice by one submit
