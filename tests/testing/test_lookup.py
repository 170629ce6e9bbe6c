"""The conformance kit against lookups and idempotent tokens that lie where a one-process kit cannot see.

The ledger's retry runs in a fresh process, so a lookup that answers from its own process's memory
(on the object, its class or its module) looks right in one process and pays twice in the next:
the kit has another process make a lost submit and asks ``find`` in its own. And a JSON 404 or 200
that is not the API's declared "no job" answer (a wrong path, a gateway's JSON error, another
service behind the host) proves nothing: the kit injects several. Each wrong adapter below fails
with UNSAFE, naming the check; the honest ones, a 200-with-an-empty-list lookup included, conform.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import pytest

from airflow_idempotent_jobs.errors import ProviderOutcomeUnknown
from airflow_idempotent_jobs.paid.provider import PaidProvider, ProviderCapabilities
from airflow_idempotent_jobs.testing.conformance import FaultPlan, assert_conformant, check_adapter
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.testing.test_kit import (
    CROSS_PROCESS_FIND,
    CROSS_RESUBMIT,
    HOLD,
    REQUEST,
    JobsAdapter,
    adapter,
    failing,
    only,
    parse_json,
    run_kit,
)


@pytest.fixture
def api() -> Iterator[ProviderServer]:
    with ProviderServer() as server:
        yield server


#: `RemembersItsSubmits`'s cache when it lives in the module: token -> the job's id (None until answered).
_SENT_BY_THIS_PROCESS: dict[str, str | None] = {}


class RemembersItsSubmits(JobsAdapter):
    """A lookup backed by an in-process cache: a token this process never sent is "no job".

    Right in the process that submitted, wrong in the fresh process a retry runs in: there it says
    "no job" for the job the lost submit created, and the retry pays again. ``memory`` says where the
    cache lives: on the object, on the class, or in the module (which survives a fresh object).
    """

    shared: ClassVar[dict[str, str | None]] = {}

    def __init__(self, base_url: str, token: str, memory: str) -> None:
        super().__init__(base_url, token)
        own: dict[str, str | None] = {}
        self.sent = {"object": own, "class": RemembersItsSubmits.shared, "module": _SENT_BY_THIS_PROCESS}[memory]

    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        self.sent[idempotency_token] = None
        ref = super().submit(request, idempotency_token)
        self.sent[idempotency_token] = ref
        return ref

    def find(self, idempotency_token: str) -> str | None:
        if idempotency_token not in self.sent:
            return None
        return self.sent[idempotency_token] or super().find(idempotency_token)


class RemembersNoJob(JobsAdapter):
    """Keeps every "no job" its lookup got, in the module (an ``lru_cache`` of None answers, say).

    Right the first time a token is asked for; wrong once a submit, lost, made the job meanwhile.
    """

    no_job: ClassVar[set[str]] = set()

    def find(self, idempotency_token: str) -> str | None:
        if idempotency_token in RemembersNoJob.no_job:
            return None
        ref = super().find(idempotency_token)
        if ref is None:
            RemembersNoJob.no_job.add(idempotency_token)
        return ref


class DedupsInMemory(JobsAdapter):
    """Declares idempotent tokens for an API that ignores them, keeping them itself, in process memory.

    A token this process sent before is looked up instead of sent again: right in one process, but
    the ledger's retry in a fresh one sends the paid call again, and the API makes a second job.
    """

    capabilities = ProviderCapabilities(idempotent_tokens=True, lookup=False)
    seen: ClassVar[set[str]] = set()

    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        if idempotency_token in DedupsInMemory.seen:
            return str(super().find(idempotency_token))
        DedupsInMemory.seen.add(idempotency_token)
        return super().submit(request, idempotency_token)


class JsonNotFoundIsNoJob(JobsAdapter):
    """Reads every JSON 404 of its lookup as "no job" (a wrong path, a gateway's JSON error too)."""

    def read_lookup(self, code: int, body: bytes) -> str | None:
        return None if code == 404 and parse_json(body) is not None else super().read_lookup(code, body)


class JsonWithoutJobIsNoJob(JobsAdapter):
    """Reads a lookup's JSON 2xx answer without a job as "no job" (an HTML page it does not trust)."""

    def read_lookup(self, code: int, body: bytes) -> str | None:
        data = parse_json(body)
        if 200 <= code < 300 and isinstance(data, dict) and not isinstance(data.get("job"), dict):
            return None
        return super().read_lookup(code, body)


class ListingJobsAdapter(JobsAdapter):
    """The honest lookup of an API whose declared "no job" is a 200 with an empty list (``lookup_style="list"``)."""

    def read_lookup(self, code: int, body: bytes) -> str | None:
        data = parse_json(body)
        jobs = data.get("jobs") if 200 <= code < 300 and isinstance(data, dict) else None
        if jobs == []:
            return None
        if isinstance(jobs, list) and len(jobs) == 1 and isinstance(jobs[0], dict) and jobs[0].get("id"):
            return str(jobs[0]["id"])
        if not 200 <= code < 300:
            self.answer(code, body, "find")  # raises the error the status calls for
        raise ProviderOutcomeUnknown(f"find: HTTP {code} without a list of jobs: whether a job exists is unknown")


def remembers(memory: str, server: ProviderServer) -> Callable[[str], PaidProvider]:
    if memory == "no-job":
        return adapter(RemembersNoJob, server)
    return lambda base_url: RemembersItsSubmits(base_url, server.auth_token, memory)


@pytest.mark.parametrize("memory", ["module", "class", "object", "no-job"])
def test_the_kit_fails_a_lookup_that_answers_from_process_memory(api: ProviderServer, memory: str) -> None:
    # The ledger's retry runs in a fresh process: a lookup that knows only its own process's
    # submits says "no job" there for the job the lost submit created, and the retry pays again;
    # so does one that keeps an earlier "no job" for the token.
    report = run_kit(remembers(memory, api), api, plan=only())
    [line] = failing(report, CROSS_PROCESS_FIND)
    assert "returned None" in line and "UNSAFE" in line and "pay twice" in line, line
    assert "another process" in line, line
    if memory != "object":  # an object's cache is already forgotten by the fresh adapter of the same process
        assert [c.line for c in report.failures] == [line], str(report)


def test_a_lookup_backed_by_a_module_cache_does_not_conform(api: ProviderServer) -> None:
    factory = lambda base_url: RemembersItsSubmits(base_url, api.auth_token, "module")  # noqa: E731
    with pytest.raises(AssertionError) as caught:
        assert_conformant(factory, api_url=api.url, request=REQUEST, hold_seconds=HOLD)
    report = str(caught.value)
    assert report.startswith("RemembersItsSubmits does NOT conform (1 of "), report.splitlines()[0]
    [line] = [line for line in report.splitlines() if line.startswith("FAIL")]
    assert line.startswith(f"FAIL  {CROSS_PROCESS_FIND}: returned None") and "UNSAFE" in line


LOST_ELSEWHERE = "FAIL  a submit another process lost (for find and resubmission): the submit in another process"


def test_a_submit_in_another_process_that_hangs_is_killed_and_said(api: ProviderServer) -> None:
    parent = os.getpid()

    def build(base_url: str) -> PaidProvider:
        if os.getpid() != parent:  # the forked child's factory never returns
            time.sleep(120)
        return JobsAdapter(base_url, api.auth_token)

    started = time.monotonic()
    report = check_adapter(build, api_url=api.url, request=REQUEST, hold_seconds=HOLD, call_timeout=2.0, plan=only())
    [line] = failing(report)
    assert line.startswith(f"{LOST_ELSEWHERE} did not return within 2 s"), line
    assert CROSS_PROCESS_FIND not in [c.name for c in report.checks]  # nothing to judge: said, not passed
    assert time.monotonic() - started < 30.0
    assert multiprocessing.active_children() == []  # killed and reaped


def test_without_fork_the_check_across_processes_fails_closed(
    api: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_fork(method: str) -> Any:
        raise ValueError(f"cannot find context for {method!r}")  # what Windows says

    monkeypatch.setattr(multiprocessing, "get_context", no_fork)
    report = run_kit(adapter(JobsAdapter, api), api, plan=only())
    [line] = failing(report)
    assert line.startswith(f"{LOST_ELSEWHERE} could not run: this platform cannot fork a process"), line


def test_the_kit_fails_idempotent_tokens_kept_in_process_memory(api: ProviderServer) -> None:
    api.configure(honour_tokens=False)
    report = run_kit(adapter(DedupsInMemory, api), api, plan=only())
    [line] = [c.line for c in report.failures]
    assert line.startswith(f"FAIL  {CROSS_RESUBMIT}: returned 'job-") and "UNSAFE" in line, str(report)
    assert "made another job for a token it had seen" in line
    [same] = [c for c in report.checks if c.name == "submit again with the token of a lost submit (idempotent tokens)"]
    assert same.passed, same.line  # in one process it looks right


@pytest.mark.parametrize(
    ("wrong", "status"),
    [pytest.param(JsonNotFoundIsNoJob, 404, id="json-404"), pytest.param(JsonWithoutJobIsNoJob, 200, id="json-200")],
)
def test_the_kit_fails_a_lookup_that_reads_a_json_answer_it_was_not_promised_as_no_job(
    api: ProviderServer, wrong: type[JobsAdapter], status: int
) -> None:
    # A JSON 404 (or 200) that is not the API's declared "no job" answer (a wrong path, a gateway's
    # JSON error, another service behind the host) proves nothing: the job exists, so None pays twice.
    report = run_kit(adapter(wrong, api), api, plan=only(find=FaultPlan().find))
    injected = [f for f in FaultPlan().find if f.status == status and f.content_type == "application/json"]
    assert len(injected) >= 3
    lines = failing(report, f"find: HTTP {status}")
    assert len(lines) == len(injected) and len(report.failures) == len(injected), str(report)
    assert all("returned None" in line and "UNSAFE" in line and "pay twice" in line for line in lines), lines
    # The HTML answer of the same status is not JSON: that adapter does not trust it, and passes.
    html = [c for c in report.checks if c.name.startswith(f"find: HTTP {status}") and c.passed]
    assert len(html) == 1, str(report)


def test_a_lookup_whose_no_job_answer_is_a_200_with_an_empty_list_conforms() -> None:
    with ProviderServer(lookup_style="list") as server:
        report = assert_conformant(
            adapter(ListingJobsAdapter, server), api_url=server.url, request=REQUEST, hold_seconds=HOLD
        )
    names = [c.name for c in report.checks]
    assert CROSS_PROCESS_FIND in names and "find, a token never used" in names
    assert sum(name.startswith("find: HTTP 200") for name in names) >= 4
