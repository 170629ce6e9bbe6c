"""`PaidProviderHook` subclasses for a custom provider, how the operator resolves them, and the trigger on them.

The hooks here are what the test DAGs name with ``provider_hook=`` (``dags/paid_dags.py``):
`JobClientHook` builds the custom `JobClientProvider` (no ``astatus``: the trigger runs its
``status`` in a thread) from a plain ``http`` Connection; the others fail in the ways a wrong
``provider_hook`` can. The tests use real Connections (``AIRFLOW_CONN_*``), the real provider
server and the real trigger.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.airflow_compat import hook_class_name
from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.hooks.http_provider import HttpPaidProviderHook
from airflow_idempotent_jobs.hooks.paid_provider import (
    PaidProviderHook,
    build_provider,
    hook_class_path,
    resolve_provider_hook,
)
from airflow_idempotent_jobs.paid import ProviderError, RemoteState, RemoteStatus, SubmissionLedger
from airflow_idempotent_jobs.paid.trigger_event import decode_event, encode_error_event, encode_status_event
from airflow_idempotent_jobs.testing.server import ProviderServer, server_connection
from airflow_idempotent_jobs.triggers.paid_job import PaidJobTrigger
from tests.airflow.versions import import_string
from tests.paid.test_custom_provider import JobClientProvider

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(120)]

HERE = "tests.airflow.test_custom_provider_hook"


# -- the hooks the test DAGs name ------------------------------------------------------------------
class JobClientHook(PaidProviderHook):
    """host = the API's base URL, password = its token, extra ``{"tokens": bool, "lookup": bool}``.

    It renames the connection-id parameter (``jobs_conn_id``): the operator and the trigger build
    every hook as ``cls(**{cls.conn_name_attr: conn_id})``.
    """

    conn_name_attr = "jobs_conn_id"
    default_conn_name = "jobs_default"
    hook_name = "Job client (tests)"

    def get_provider(self) -> JobClientProvider:
        conn = self.get_connection(self.provider_conn_id)
        extra = conn.extra_dejson
        if not conn.host:
            raise InvalidConfiguration("job client connection", "host", "set the API's base URL")
        return JobClientProvider(
            conn.host, conn.password or "", tokens=extra.get("tokens") is True, lookup=extra.get("lookup") is True
        )


class BrokenHook(PaidProviderHook):
    """Reads its Connection, then fails as a vendor SDK might."""

    def get_provider(self) -> JobClientProvider:
        self.get_connection(self.provider_conn_id)
        raise RuntimeError("the vendor SDK refused to start")


class NotAProviderHook(PaidProviderHook):
    """Returns something without the PaidProvider members."""

    def get_provider(self) -> Any:
        return object()


class SlowJobClient(JobClientProvider):
    """A status call that blocks for a while, and remembers the threads it ran on."""

    threads: set[int] = set()  # noqa: RUF012  (shared on purpose: the trigger builds its own instance)

    def status(self, remote_ref: str) -> RemoteStatus:
        SlowJobClient.threads.add(threading.get_ident())
        time.sleep(0.1)
        return super().status(remote_ref)


class SlowJobClientHook(JobClientHook):
    def get_provider(self) -> JobClientProvider:
        fast = super().get_provider()
        slow = SlowJobClient(f"http://{fast.host}:{fast.port}", fast._token, tokens=False, lookup=True)
        return slow


class ConnectionInInitHook(JobClientHook):
    """Reads its Connection in ``__init__`` (many hooks do) and waits on it: a blocking constructor."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        time.sleep(0.5)  # a slow secrets backend
        self.conn = self.get_connection(self.provider_conn_id)


# -- fixtures --------------------------------------------------------------------------------------
@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(auth_token="custom-hook-secret", polls_to_finish=3) as srv:
        yield srv


def set_conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def jobs_conn(monkeypatch: pytest.MonkeyPatch, srv: ProviderServer, conn_id: str = "ij_jobs") -> None:
    extra = {"tokens": False, "lookup": True}
    set_conn(monkeypatch, conn_id, conn_type="http", host=srv.url, password=srv.auth_token, extra=extra)


async def run_beside_a_ticker(trigger: PaidJobTrigger) -> tuple[list[Any], int, float, int]:
    """The trigger's events, run beside a task ticking every millisecond: its ticks, the longest
    stall of the loop between two ticks, and the loop's thread."""
    ticks, gap, stop = 0, 0.0, asyncio.Event()

    async def tick() -> None:
        nonlocal ticks, gap
        last = time.monotonic()
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.001)
            now = time.monotonic()
            gap, last = max(gap, now - last), now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    events = [event.payload async for event in trigger.run()]
    stop.set()
    await ticker
    return events, ticks, gap, threading.get_ident()


# -- resolution ------------------------------------------------------------------------------------
def test_provider_hook_wins_and_reads_no_connection() -> None:
    hook = resolve_provider_hook("no_such_connection", f"{HERE}.JobClientHook")
    assert isinstance(hook, JobClientHook)
    assert hook.provider_conn_id == "no_such_connection" == hook.jobs_conn_id  # type: ignore[attr-defined]


def test_a_custom_hook_builds_its_provider_from_an_http_connection(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer
) -> None:
    jobs_conn(monkeypatch, server)
    provider = build_provider(resolve_provider_hook("ij_jobs", f"{HERE}.JobClientHook"))
    assert isinstance(provider, JobClientProvider)
    assert (provider.capabilities.idempotent_tokens, provider.capabilities.lookup) == (False, True)
    assert provider.find("no-such-token") is None


def test_the_connection_type_resolves_the_http_providers_hook(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer
) -> None:
    set_conn(monkeypatch, "ij_typed", **server_connection(server.url, server.auth_token))
    hook = resolve_provider_hook("ij_typed")
    assert type(hook) is HttpPaidProviderHook and hook.provider_conn_id == "ij_typed"
    assert hook_class_path(hook) == "airflow_idempotent_jobs.hooks.http_provider.HttpPaidProviderHook"


@pytest.mark.parametrize(
    ("conn_type", "says"),
    [
        # apache-airflow-providers-http (with the amazon provider in the test environment) registers
        # its HttpHook for ``http``: a hook, but not one that builds a paid provider.
        ("http", "no paid-provider hook is registered" if hook_class_name("http") is None else "cannot build"),
        ("generic", "no paid-provider hook is registered"),
        ("idempotent_jobs_store", "whose hook cannot build a paid provider"),  # registered, not a PaidProviderHook
    ],
)
def test_a_connection_type_without_a_paid_provider_hook_asks_for_provider_hook(
    monkeypatch: pytest.MonkeyPatch, conn_type: str, says: str
) -> None:
    set_conn(monkeypatch, "ij_untyped", conn_type=conn_type, host="http://127.0.0.1:9", password="pw-never-shown")
    with pytest.raises(InvalidConfiguration) as caught:
        resolve_provider_hook("ij_untyped")
    message = str(caught.value)
    assert says in message and "provider_hook='package.module.Class'" in message and f"{conn_type!r}" in message
    assert "\n" not in message and "pw-never-shown" not in message and not caught.value.retryable


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("tests.airflow.no_such_module.Hook", "cannot import tests.airflow.no_such_module.Hook"),
        (f"{HERE}.NoSuchClass", f"module {HERE} has no NoSuchClass"),
        ("airflow_idempotent_jobs.hooks.store.EpisodeStoreHook", "is not a subclass of"),
        (f"{HERE}.JobClientProvider", "is not a subclass of"),
        ("airflow_idempotent_jobs.hooks.paid_provider.PaidProviderHook", "does not implement get_provider"),
        ("JobClientHook", "is not a 'package.module.Class' path"),
        ("tests.airflow..JobClientHook", "is not a 'package.module.Class' path"),
    ],
)
def test_a_provider_hook_that_cannot_work_is_one_line_of_invalid_configuration(path: str, says: str) -> None:
    with pytest.raises(InvalidConfiguration) as caught:
        resolve_provider_hook("ij_anything", path)
    assert says in str(caught.value) and caught.value.field == "provider_hook"
    assert "\n" not in str(caught.value) and caught.value.exit_code == 2 and not caught.value.retryable


@pytest.mark.parametrize(
    ("hook", "says"),
    [
        ("BrokenHook", "get_provider() failed: RuntimeError: the vendor SDK refused to start"),
        ("NotAProviderHook", "get_provider() returned object, which lacks the PaidProvider members"),
    ],
)
def test_a_hook_whose_get_provider_fails_is_invalid_configuration(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer, hook: str, says: str
) -> None:
    jobs_conn(monkeypatch, server)
    with pytest.raises(InvalidConfiguration) as caught:
        build_provider(resolve_provider_hook("ij_jobs", f"{HERE}.{hook}"))
    assert says in str(caught.value) and not caught.value.retryable


def test_the_default_aget_provider_builds_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer
) -> None:
    jobs_conn(monkeypatch, server)
    seen: list[int] = []

    class Recording(JobClientHook):
        def get_provider(self) -> JobClientProvider:
            seen.append(threading.get_ident())
            return super().get_provider()

    async def build() -> tuple[Any, int]:
        return await Recording(jobs_conn_id="ij_jobs").aget_provider(), threading.get_ident()

    provider, loop_thread = asyncio.run(build())
    assert isinstance(provider, JobClientProvider)
    assert seen and seen[0] != loop_thread


# -- the trigger -----------------------------------------------------------------------------------
def test_the_trigger_serializes_the_hook_path_and_round_trips() -> None:
    kwargs = {
        "episode_id": "2026-W32-0",
        "remote_ref": "job-1",
        "provider_conn_id": "ij_jobs",
        "provider_hook": f"{HERE}.JobClientHook",
        "poll_initial_delay": 0.5,
        "poll_max_delay": 4.0,
    }
    classpath, serialized = PaidJobTrigger(**kwargs).serialize()  # type: ignore[arg-type]
    assert serialized == kwargs
    json.dumps(serialized)  # a row in Airflow's database
    assert import_string(classpath)(**serialized).serialize() == (classpath, kwargs)
    with pytest.raises(ValueError, match="provider_hook"):
        PaidJobTrigger(**{**kwargs, "provider_hook": "NoDots"})  # type: ignore[arg-type]


def trigger_for_a_submitted_job(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer, tmp_path: Path, label: str, hook: str
) -> tuple[str, str, PaidJobTrigger]:
    """A job submitted through ``JobClientHook``, and a trigger polling it through ``hook`` (a class here)."""
    jobs_conn(monkeypatch, server)
    store = open_store(tmp_path / "store")
    eid = store.allocate("2026-W32", label).episode_id
    provider = JobClientHook(jobs_conn_id="ij_jobs").get_provider()
    ref = SubmissionLedger(store).submit(eid, provider, {"prompt": "p", "units": 2}).submission.remote_ref
    assert ref is not None
    trigger = PaidJobTrigger(
        episode_id=eid,
        remote_ref=ref,
        provider_conn_id="ij_jobs",
        provider_hook=f"{HERE}.{hook}",
        poll_initial_delay=0.01,
    )
    return eid, ref, trigger


def test_the_trigger_runs_a_providers_status_in_a_thread_without_blocking_the_loop(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer, tmp_path: Path
) -> None:
    eid, ref, trigger = trigger_for_a_submitted_job(
        monkeypatch, server, tmp_path, "custom-trigger", "SlowJobClientHook"
    )
    SlowJobClient.threads.clear()
    events, ticks, _, loop_thread = asyncio.run(asyncio.wait_for(run_beside_a_ticker(trigger), timeout=30))
    assert events == [
        {
            "episode_id": eid,
            "remote_ref": ref,
            "status": "terminal",
            "state": "succeeded",
            "cost": 2.5,
            "result": {"url": f"https://media.invalid/{ref}.mp4"},
            "error": None,
        }
    ]
    assert server.stats()["jobs"][ref]["polls"] == 3  # three status calls of 0.1 s each...
    assert ticks > 100  # ...while the loop kept running
    assert SlowJobClient.threads and loop_thread not in SlowJobClient.threads


def test_the_trigger_builds_a_hook_whose_constructor_blocks_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer, tmp_path: Path
) -> None:
    # The triggerer runs every deferred task's trigger on one loop: a hook's constructor that waits
    # on a secrets backend must not stall the others.
    _, _, trigger = trigger_for_a_submitted_job(
        monkeypatch, server, tmp_path, "custom-trigger-init", "ConnectionInInitHook"
    )
    events, _, gap, _ = asyncio.run(asyncio.wait_for(run_beside_a_ticker(trigger), timeout=30))
    assert [(e["status"], e["state"]) for e in events] == [("terminal", "succeeded")]
    assert gap < 0.25, f"the event loop stalled {gap:.2f} s while the hook was built"


def test_a_trigger_whose_hook_cannot_be_built_yields_one_error_event(monkeypatch: pytest.MonkeyPatch) -> None:
    trigger = PaidJobTrigger(
        episode_id="2026-W32-0", remote_ref="job-1", provider_conn_id="x", provider_hook="tests.airflow.nope.Hook"
    )

    async def run() -> list[Any]:
        return [event.payload async for event in trigger.run()]

    (payload,) = asyncio.run(run())
    assert payload["status"] == "error" and "cannot import tests.airflow.nope.Hook" in payload["message"]
    # What only a real triggerer meets: it does not put the DAGs folder on its path (dag.test() runs
    # the trigger in the task's process, where a hook beside the DAGs imports fine).
    assert (
        "the triggerer imports the hook: install it as a package or put it in the plugins folder"
        in (payload["message"])
    )


# -- the event codec -------------------------------------------------------------------------------
def test_the_event_codec_round_trips_a_terminal_status() -> None:
    status = RemoteStatus(state=RemoteState.FAILED, cost=float("nan"), result={"a": 1}, error="token s3cr3t refused")
    event = encode_status_event(
        "2026-W32-0", "job-1", status, result_limit=1024, redact=lambda t: t.replace("s3cr3t", "*")
    )
    json.dumps(event, allow_nan=False)
    assert event["cost"] == "nan" and event["error"] == "token * refused"
    back = decode_event(event, "2026-W32-0", redact=lambda t: t)
    assert (back.state, back.result, back.error) == (RemoteState.FAILED, {"a": 1}, "token * refused")
    assert back.cost != back.cost  # NaN again: the ledger records it as an anomaly
    small = decode_event(
        encode_status_event("2026-W32-0", "j", status, result_limit=2, redact=str), "2026-W32-0", redact=str
    )
    assert small.result.size == len('{"a":1}')  # an OmittedResult: size and sha256 travel instead


@pytest.mark.parametrize(
    "event",
    [
        None,
        {"status": "done"},
        {"status": "terminal", "episode_id": "2026-W32-1", "state": "succeeded"},
        {"status": "terminal", "episode_id": "2026-W32-0", "state": "finished"},
        {"status": "terminal", "episode_id": "2026-W32-0", "state": "succeeded", "cost": True},
        {"status": "terminal", "episode_id": "2026-W32-0", "state": "succeeded", "result_omitted": {"x": 1}},
    ],
)
def test_an_event_that_is_not_the_triggers_is_refused(event: Any) -> None:
    with pytest.raises(ValueError):
        decode_event(event, "2026-W32-0", redact=str)


def test_an_error_event_is_a_retryable_provider_error_with_its_text_redacted() -> None:
    event = encode_error_event("2026-W32-0", "job-1", "HTTP 401 for s3cr3t")
    with pytest.raises(ProviderError) as caught:
        decode_event(event, "2026-W32-0", redact=lambda t: t.replace("s3cr3t", "*"))
    assert caught.value.retryable and "HTTP 401 for *" in str(caught.value) and "s3cr3t" not in str(caught.value)
