"""The conformance kit against real adapters on real HTTP: the HTTP provider, a stdlib adapter, wrong ones.

`JobsAdapter` is a second, independent adapter for the provider server (`testing/server.py`),
written with urllib as an adapter author would. Each wrong adapter below is that adapter with one
classification changed, as real adapters get it wrong; the kit must fail each one, naming the
fault, what it raised and what it should have raised.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar
from urllib.parse import quote

import pytest

from airflow_idempotent_jobs.errors import (
    InvalidConfiguration,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
)
from airflow_idempotent_jobs.paid.http import HttpPaidProvider
from airflow_idempotent_jobs.paid.provider import PaidProvider, ProviderCapabilities, RemoteState, RemoteStatus
from airflow_idempotent_jobs.testing.conformance import (
    ConformanceReport,
    Fault,
    FaultPlan,
    assert_conformant,
    check_adapter,
)
from airflow_idempotent_jobs.testing.server import ProviderServer

REQUEST = {"prompt": "a lighthouse at dusk", "units": 2}
#: Short enough that the held-answer checks cost little; the adapters' read timeout is below it.
HOLD = 3.0
#: An HTTP status and body.
Answer = tuple[int, bytes]
READ_TIMEOUT = 1.0
#: The checks on a submit another process lost (the ledger's retry runs in a fresh process).
CROSS_PROCESS_FIND = "find, the token of a submit another process lost"
CROSS_RESUBMIT = "submit again with the token of a submit another process lost (idempotent tokens)"


@pytest.fixture
def api() -> Iterator[ProviderServer]:
    with ProviderServer() as server:
        yield server


def http_provider(server: ProviderServer, **overrides: Any) -> Callable[[str], PaidProvider]:
    def build(base_url: str) -> PaidProvider:
        settings = {"read_timeout": READ_TIMEOUT, "connect_retries": 1, "backoff_initial": 0.01, **overrides}
        config = server.provider_config(base_url=base_url, **settings)
        return HttpPaidProvider(config, auth_header=server.auth_header, auth_value=server.auth_value)

    return build


def run_kit(factory: Callable[[str], PaidProvider], server: ProviderServer, **options: Any) -> ConformanceReport:
    return check_adapter(factory, api_url=server.url, request=REQUEST, hold_seconds=HOLD, **options)


def only(**faults: tuple[Fault, ...]) -> FaultPlan:
    """A plan with only these faults (the checks without a fault always run): for tests of one check."""
    return FaultPlan(**{"submit": (), "free": (), "status": (), "find": (), **faults})


def failing(report: ConformanceReport, *words: str) -> list[str]:
    """The report's FAIL lines that hold every one of ``words``."""
    return [c.line for c in report.failures if all(word in c.line for word in words)]


# -- an adapter as an author would write it (urllib), and wrong copies of it ----------------------------
class JobsAdapter:
    """The provider server's API over urllib: tokens in ``Idempotency-Key``, lookup by ``?token=``."""

    capabilities = ProviderCapabilities(idempotent_tokens=False, lookup=True)

    def __init__(self, base_url: str, token: str, timeout: float = READ_TIMEOUT) -> None:
        self.base_url, self.timeout = base_url.rstrip("/"), timeout
        self._auth = f"Bearer {token}"

    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        code, body = self.send("POST", "/jobs", request, {"Idempotency-Key": idempotency_token})
        return str(self.answer(code, body, "submit")["job"]["id"])

    def status(self, remote_ref: str) -> RemoteStatus:
        code, body = self.send("GET", f"/jobs/{quote(remote_ref, safe='')}")
        data = self.answer(code, body, "status")
        word = {"queued": "pending", "rendering": "running", "completed": "succeeded", "error": "failed"}
        return RemoteStatus(RemoteState(word[data["job"]["status"]]), cost=(data.get("billing") or {}).get("amount"))

    def find(self, idempotency_token: str) -> str | None:
        code, body = self.send("GET", f"/jobs?token={quote(idempotency_token, safe='')}")
        return self.read_lookup(code, body)

    def read_lookup(self, code: int, body: bytes) -> str | None:
        data = parse_json(body)
        if code == 404 and isinstance(data, dict) and (data.get("error") or {}).get("code") == "no_job":
            return None
        return str(self.answer(code, body, "find")["job"]["id"])

    def send(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Authorization": self._auth, "Content-Type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except urllib.error.URLError as exc:  # raised while connecting or sending
            if isinstance(exc.reason, ConnectionRefusedError):
                raise ProviderUnavailable(f"{method} {path}: connection refused") from None
            raise self.lost(method, path, exc) from None
        except (OSError, http.client.HTTPException) as exc:  # raised while waiting for the answer
            raise self.lost(method, path, exc) from None

    def lost(self, method: str, path: str, exc: Exception) -> Exception:
        return ProviderOutcomeUnknown(f"{method} {path}: {type(exc).__name__} after sending")

    def answer(self, code: int, body: bytes, what: str) -> Any:
        if 200 <= code < 300:
            data = parse_json(body)
            if not isinstance(data, dict) or not isinstance(data.get("job"), dict):
                raise ProviderOutcomeUnknown(f"{what}: HTTP {code} without a job")
            return data
        if code == 429:
            raise ProviderUnavailable(f"{what}: HTTP 429", status=code)
        if 400 <= code < 500 and code not in (408, 409):
            raise ProviderRejected(f"{what}: HTTP {code}", status=code)
        raise ProviderOutcomeUnknown(f"{what}: HTTP {code}", status=code)


def parse_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


class DropIsRejected(JobsAdapter):
    """The deliberately wrong adapter: a connection the API closed reads as "the API refused"."""

    def lost(self, method: str, path: str, exc: Exception) -> Exception:
        if isinstance(exc, ConnectionResetError):  # http.client.RemoteDisconnected is one too
            return ProviderRejected(f"{method} {path}: the API closed the connection")
        return super().lost(method, path, exc)


class TimeoutIsUnavailable(JobsAdapter):
    """Reads a timeout as "the API is down": but the request was sent."""

    def lost(self, method: str, path: str, exc: Exception) -> Exception:
        if isinstance(exc, TimeoutError):
            return ProviderUnavailable(f"{method} {path}: timed out")
        return super().lost(method, path, exc)


class ServerErrorFailsTheJob(JobsAdapter):
    """Reads a 5xx on status as the job's failure."""

    def status(self, remote_ref: str) -> RemoteStatus:
        code, _ = self.send("GET", f"/jobs/{quote(remote_ref, safe='')}")
        if code >= 500:
            return RemoteStatus(RemoteState.FAILED, error=f"HTTP {code}")
        return super().status(remote_ref)


class AnyNotFoundIsNoJob(JobsAdapter):
    """Reads any 404 of a lookup as "no job", whatever answered it."""

    def find(self, idempotency_token: str) -> str | None:
        code, _ = self.send("GET", f"/jobs?token={quote(idempotency_token, safe='')}")
        return None if code == 404 else super().find(idempotency_token)


class RetriesThePaidCall(JobsAdapter):
    """Sends the paid call again when its answer is lost, to an API that ignores tokens."""

    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        try:
            return super().submit(request, idempotency_token)
        except ProviderOutcomeUnknown:
            return super().submit(request, idempotency_token)


class FindsAnyJob(JobsAdapter):
    """A lookup that, finding nothing for the token, falls back to the newest job it knows."""

    newest: ClassVar[str | None] = None

    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        ref = super().submit(request, idempotency_token)
        FindsAnyJob.newest = ref
        return ref

    def find(self, idempotency_token: str) -> str | None:
        return super().find(idempotency_token) or FindsAnyJob.newest


class LetsClientErrorsOut(JobsAdapter):
    """Raises the client library's own errors for a lost answer (the ledger would guess 'unknown')."""

    def lost(self, method: str, path: str, exc: Exception) -> Exception:
        return exc


class StatusGoesBack(JobsAdapter):
    """Answers "pending" on every third status call (a cache of the submit answer, say)."""

    calls = 0

    def status(self, remote_ref: str) -> RemoteStatus:
        self.calls += 1
        return RemoteStatus(RemoteState.PENDING) if self.calls % 3 == 0 else super().status(remote_ref)


class UnreadableSuccessIsRejected(JobsAdapter):
    """Reads a 2xx answer it cannot parse as a refusal ("the API sent garbage, so it failed")."""

    def answer(self, code: int, body: bytes, what: str) -> Any:
        data = parse_json(body)
        if 200 <= code < 300 and not (isinstance(data, dict) and isinstance(data.get("job"), dict)):
            raise ProviderRejected(f"{what}: HTTP {code} with an answer that is not JSON", status=code)
        return super().answer(code, body, what)


class UnreadableLookupIsNoJob(JobsAdapter):
    """Reads a lookup's 2xx answer without a job as "no job" (an empty listing, it assumes)."""

    def find(self, idempotency_token: str) -> str | None:
        code, body = self.send("GET", f"/jobs?token={quote(idempotency_token, safe='')}")
        data = parse_json(body)
        if 200 <= code < 300 and not (isinstance(data, dict) and isinstance(data.get("job"), dict)):
            return None
        if code == 404 and isinstance(data, dict) and (data.get("error") or {}).get("code") == "no_job":
            return None
        return str(self.answer(code, body, "find")["job"]["id"])


class UnreadableStatusIsFailed(JobsAdapter):
    """Reads a status answer without a job as the job's failure."""

    def answer(self, code: int, body: bytes, what: str) -> Any:
        data = parse_json(body)
        if (
            what == "status"
            and 200 <= code < 300
            and not (isinstance(data, dict) and isinstance(data.get("job"), dict))
        ):
            return {"job": {"status": "error"}}
        return super().answer(code, body, what)


def adapter(cls: type[JobsAdapter], server: ProviderServer) -> Callable[[str], PaidProvider]:
    return lambda base_url: cls(base_url, server.auth_token)


# -- adapters that conform ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "switches",
    [
        pytest.param({}, id="tokens-and-lookup"),
        pytest.param({"honour_tokens": False, "lookup_style": "list"}, id="lookup-by-list"),
        pytest.param({"honour_tokens": False, "lookup": False}, id="neither"),
    ],
)
def test_the_http_provider_conforms(switches: dict[str, Any]) -> None:
    with ProviderServer(**switches) as server:
        report = run_kit(http_provider(server), server)
    assert report.ok, str(report)
    names = [c.name for c in report.checks]
    assert "submit, paid call: connection closed after the API got the request, without an answer" in names
    assert "status: HTTP 503 answered after the API got the request" in names
    assert ("find, the token of a lost submit" in names) is (switches.get("lookup", True))
    tokens = switches.get("honour_tokens", True)
    assert ("submit again with the token of a lost submit (idempotent tokens)" in names) is tokens
    assert (CROSS_RESUBMIT in names) is tokens
    assert (CROSS_PROCESS_FIND in names) is (switches.get("lookup", True))
    assert report.adapter == "HttpPaidProvider" and report.paid.startswith("by default, every request")


def test_a_urllib_adapter_conforms(api: ProviderServer) -> None:
    report = assert_conformant(adapter(JobsAdapter, api), api_url=api.url, request=REQUEST, hold_seconds=HOLD)
    assert report.ok
    assert str(report).splitlines()[0].startswith(f"JobsAdapter conforms: {len(report.checks)} checks")


def test_every_check_submits_the_sample_request_with_its_own_token(api: ProviderServer) -> None:
    report = run_kit(http_provider(api), api, paid=["POST /jobs"])
    assert report.ok, str(report)
    stats = api.stats()
    assert stats["submissions"] >= 10 and max(stats["submissions_per_token"].values()) <= 2  # 2: the resubmit check
    assert all(job["request"] == REQUEST for job in stats["jobs"].values())


# -- the deliberately wrong adapter -------------------------------------------------------------------
def test_the_kit_fails_an_adapter_that_reads_a_dropped_connection_as_a_rejection(api: ProviderServer) -> None:
    with pytest.raises(AssertionError) as caught:
        assert_conformant(adapter(DropIsRejected, api), api_url=api.url, request=REQUEST, hold_seconds=HOLD)
    report = str(caught.value)
    assert report.startswith("DropIsRejected does NOT conform")
    drop = "submit, paid call: connection closed after the API got the request, without an answer"
    line = next(line for line in report.splitlines() if line.startswith(f"FAIL  {drop}"))
    assert "raised ProviderRejected" in line and "expected ProviderOutcomeUnknown: UNSAFE" in line
    assert "the API created the job (POST /jobs answered HTTP 201)" in line
    reset = next(line for line in report.splitlines() if "submit, paid call: connection reset" in line)
    assert reset.startswith("FAIL") and "raised ProviderRejected" in reset
    status = next(line for line in report.splitlines() if line.startswith("FAIL  status: connection closed"))
    assert "raised ProviderRejected" in status and "expected ProviderUnavailable or ProviderOutcomeUnknown" in status
    # Everything else it does right passes: the failures are exactly the dropped or reset connections.
    failed = [line for line in report.splitlines() if line.startswith("FAIL")]
    assert failed and all("connection closed" in line or "connection reset" in line for line in failed), failed
    assert any(line.startswith("PASS  submit, paid call: HTTP 503") for line in report.splitlines())


def test_the_kit_fails_a_timeout_read_as_unavailable(api: ProviderServer) -> None:
    report = run_kit(adapter(TimeoutIsUnavailable, api), api, plan=only(submit=(Fault.hold(),)))
    [line] = failing(report, "submit, paid call: answer held back past the read timeout")
    assert "raised ProviderUnavailable" in line and "UNSAFE" in line and "the API received POST /jobs" in line


def test_the_kit_fails_a_server_error_turned_into_a_failed_job(api: ProviderServer) -> None:
    report = run_kit(adapter(ServerErrorFailsTheJob, api), api, plan=only(status=FaultPlan().status))
    lines = failing(report, "status: HTTP 5")
    assert len(lines) == 2, str(report)  # 500 and 503
    assert all("returned RemoteStatus(state=<RemoteState.FAILED" in line for line in lines)
    assert all("expected ProviderUnavailable or ProviderOutcomeUnknown" in line for line in lines)


def test_the_kit_fails_a_lookup_that_reads_any_404_as_no_job(api: ProviderServer) -> None:
    report = run_kit(adapter(AnyNotFoundIsNoJob, api), api, plan=only(find=FaultPlan().find))
    lines = failing(report, "find: HTTP 404")
    assert len(lines) == sum(f.status == 404 for f in FaultPlan().find) == 4  # the HTML page, three JSON bodies
    assert all("returned None" in line and "UNSAFE" in line and "pay twice" in line for line in lines), lines


def test_the_kit_fails_an_adapter_that_sends_the_paid_call_twice(api: ProviderServer) -> None:
    api.configure(honour_tokens=False)
    report = run_kit(adapter(RetriesThePaidCall, api), api, plan=only(submit=(Fault.drop(), Fault.answer(503))))
    lines = failing(report, "one submit sent the paid call 2 times")
    assert lines and all("UNSAFE" in line for line in lines)


def test_the_kit_fails_idempotent_tokens_declared_for_an_api_that_ignores_them(api: ProviderServer) -> None:
    api.configure(honour_tokens=False)
    report = run_kit(http_provider(api, tokens_honoured=True), api, plan=only())
    [line] = failing(report, "submit again with the token of a lost submit")
    assert "UNSAFE" in line and "made another job for a token it had seen" in line


def test_a_lookup_without_a_declared_no_job_answer_is_safe_but_said(api: ProviderServer) -> None:
    undeclared = {"lookup_no_job_status": None, "lookup_no_job_path": None, "lookup_no_job_value": None}
    report = run_kit(http_provider(api, **undeclared), api, plan=only(find=FaultPlan().find))
    assert report.ok, str(report)
    [line] = [c.line for c in report.checks if c.name == "find, a token never used"]
    assert "raised ProviderOutcomeUnknown" in line and "never proves 'no job'" in line


def test_the_kit_fails_a_lookup_that_finds_another_runs_job(api: ProviderServer) -> None:
    report = run_kit(adapter(FindsAnyJob, api), api, plan=only())
    [line] = failing(report, "find, a token never used")
    assert "UNSAFE" in line and "a retry would adopt another run's job" in line


@pytest.mark.parametrize(
    ("wrong", "check", "says"),
    [
        pytest.param(
            UnreadableSuccessIsRejected,
            "submit, paid call: HTTP 200",
            "expected ProviderOutcomeUnknown: UNSAFE",
            id="submit-rejected",
        ),
        pytest.param(
            UnreadableLookupIsNoJob, "find: HTTP 200", "returned None, expected ProviderError: UNSAFE", id="find-no-job"
        ),
        pytest.param(
            UnreadableStatusIsFailed,
            "status: HTTP 200",
            "the HTTP 200 fault became the job's state; expected ProviderError",
            id="status-failed",
        ),
    ],
)
def test_the_kit_fails_an_unreadable_success_answer_read_as_an_outcome(
    api: ProviderServer, wrong: type[JobsAdapter], check: str, says: str
) -> None:
    # The API created the job (or holds it) and a 2xx came back that the adapter cannot read (a
    # captive portal, a gateway's HTML, a truncated body): that proves nothing either way.
    report = run_kit(adapter(wrong, api), api)
    lines = failing(report)
    # That one fault, nothing else; a lookup that reads any 2xx without a job as "no job" fails on the
    # JSON bodies too (a 200 {} from a gateway).
    expected = [f"FAIL  {check} with a body that is not the API's answer, after the API got the request"]
    if wrong is UnreadableLookupIsNoJob:
        json_200 = [f for f in FaultPlan().find if f.unreadable and f.shown_body()]
        expected += [f"FAIL  {check} {f.shown_body()}, which is not the API's answer" for f in json_200]
    assert len(lines) == len(expected), lines
    assert all(line.startswith(want) and says in line for line, want in zip(lines, expected, strict=True)), lines


def test_the_kit_fails_an_adapter_that_lets_its_client_errors_out(api: ProviderServer) -> None:
    report = run_kit(adapter(LetsClientErrorsOut, api), api, plan=only(submit=(Fault.drop(), Fault.hold())))
    [line] = failing(report, "submit, paid call: connection closed")
    assert "raised RemoteDisconnected" in line and "expected ProviderOutcomeUnknown" in line
    [line] = failing(report, "submit, paid call: answer held back")
    assert "raised TimeoutError" in line and "expected ProviderOutcomeUnknown" in line


def test_a_factory_that_ignores_the_base_url_is_told_so(api: ProviderServer) -> None:
    report = run_kit(lambda base_url: JobsAdapter(api.url, api.auth_token), api)
    assert not report.ok and report.checks[-1].name == "submit, no fault"
    assert "does factory use the base_url it is given?" in report.checks[-1].detail


def test_the_kit_fails_a_status_that_goes_back(api: ProviderServer) -> None:
    report = run_kit(adapter(StatusGoesBack, api), api, plan=only())
    [line] = failing(report, "status, 3 calls in a row")
    assert "the answers went running, succeeded, pending: a job's state never goes back" in line


def test_a_status_that_repeats_a_nan_cost_is_repeatable() -> None:
    # NaN is never equal to itself: two identical answers with a NaN cost are still the same answer.
    with ProviderServer(price=float("nan"), polls_to_finish=1) as server:
        report = run_kit(http_provider(server), server, plan=only())
    [check] = [c for c in report.checks if c.name.startswith("status, 3 calls")]
    assert check.passed and check.detail == "succeeded, succeeded, succeeded", check.line


# -- how the kit is told what to do -------------------------------------------------------------------
def test_paid_routes_that_match_nothing_stop_the_run_with_one_clear_line(api: ProviderServer) -> None:
    report = run_kit(http_provider(api), api, paid=["POST /v1/batches"])
    [check] = report.checks[-1:]
    assert not report.ok and check.name == "submit, no fault"
    assert "sent no request the kit counts as paid (POST /v1/batches) among POST /jobs -> 201" in check.detail
    assert "paid=[...]" in check.detail


def test_bad_paid_routes_are_refused_before_anything_runs(api: ProviderServer) -> None:
    for paid in (["jobs"], "POST /jobs", [], ["POST /jobs extra"]):
        with pytest.raises(InvalidConfiguration, match="paid"):
            run_kit(http_provider(api), api, paid=paid)
    assert api.submissions() == 0


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("api_url", "ftp://127.0.0.1/x"),
        ("api_url", "http://127.0.0.1:1/?q=1"),
        ("request", ["not", "a", "mapping"]),
        ("hold_seconds", 0),
        ("call_timeout", float("nan")),
        ("hold_seconds", True),
    ],
)
def test_bad_options_are_refused_before_anything_runs(api: ProviderServer, option: str, value: Any) -> None:
    options: dict[str, Any] = {"api_url": api.url, "request": REQUEST, "hold_seconds": HOLD, option: value}
    with pytest.raises(InvalidConfiguration, match=option):
        check_adapter(http_provider(api), **options)
    assert api.submissions() == 0


def test_a_sample_request_the_api_refuses_is_said_and_stops_the_run(api: ProviderServer) -> None:
    report = check_adapter(http_provider(api), api_url=api.url, request={"prompt": ""}, hold_seconds=HOLD)
    assert [c.name for c in report.checks] == ["the PaidProvider port", "submit, no fault"]
    assert "raised ProviderRejected" in report.checks[1].detail and "the API accepts" in report.checks[1].detail


def test_a_plan_carries_the_apis_own_error_bodies(api: ProviderServer) -> None:
    body = b'{"detail": "prompt too long"}'
    plan = only(submit=(Fault.answer(400, body),))
    report = run_kit(http_provider(api), api, plan=plan)
    [check] = [c for c in report.checks if c.name.startswith("submit, paid call")]
    assert check.passed and "prompt too long" in check.detail


def test_an_adapter_with_a_read_timeout_longer_than_the_hold_is_told_so(api: ProviderServer) -> None:
    plan = only(submit=(Fault.hold(),))
    report = check_adapter(
        http_provider(api, read_timeout=5.0), api_url=api.url, request=REQUEST, hold_seconds=0.3, plan=plan
    )
    [line] = failing(report, "answer held back")
    assert "its read timeout is longer, or it has none" in line


def test_a_hanging_call_is_bounded_by_call_timeout(api: ProviderServer) -> None:
    plan = only(submit=(Fault.hold(),))
    started = time.monotonic()
    report = check_adapter(
        http_provider(api, read_timeout=60.0),
        api_url=api.url,
        request=REQUEST,
        hold_seconds=30.0,
        call_timeout=1.0,
        plan=plan,
    )
    [line] = failing(report, "answer held back")
    assert "did not return within 1 s" in line and "needs a read timeout" in line
    assert time.monotonic() - started < 15.0


def test_the_kit_imports_without_airflow() -> None:
    code = (
        "import json, sys; import airflow_idempotent_jobs.testing.conformance; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'sqlalchemy'))))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert loaded == []
