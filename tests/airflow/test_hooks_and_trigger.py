"""Hooks resolved from real Connections (``AIRFLOW_CONN_*``), and the trigger against a real server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.hooks.http_provider import HttpPaidProviderHook
from airflow_idempotent_jobs.hooks.store import EpisodeStoreHook
from airflow_idempotent_jobs.paid.ledger import SubmissionLedger
from airflow_idempotent_jobs.testing.server import ProviderServer, server_connection
from airflow_idempotent_jobs.triggers.paid_job import PaidJobTrigger
from tests.airflow.conftest import postgres_connection
from tests.airflow.versions import import_string

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(120)]


def set_conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(auth_token="hook-test-secret-token", polls_to_finish=3) as srv:
        yield srv


def http_conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, srv: ProviderServer, token: str) -> None:
    set_conn(monkeypatch, conn_id, **server_connection(srv.url, token))


# -- store hook ------------------------------------------------------------------------------------
def test_store_hook_opens_the_store_its_connection_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    set_conn(monkeypatch, "ij_store", conn_type="idempotent_jobs_store", host=str(tmp_path / "by-host"))
    set_conn(
        monkeypatch, "ij_store_extra", conn_type="idempotent_jobs_store", extra={"url": f"file://{tmp_path}/by-url"}
    )
    hook = EpisodeStoreHook("ij_store")
    allocated = hook.store.allocate("2026-W32", "hook-key")
    assert open_store(tmp_path / "by-host").get(allocated.episode_id) == allocated
    assert EpisodeStoreHook("ij_store_extra").store.location == str(tmp_path / "by-url")
    assert hook.test_connection() == (True, f"episode store reachable at {tmp_path / 'by-host'}")


def test_store_hook_builds_a_postgres_url_from_a_postgres_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    set_conn(
        monkeypatch,
        "ij_pg",
        conn_type="postgres",
        host="db.internal",
        port=6543,
        login="svc",
        password="p@ss/word",
        schema="jobs",
        extra={"sslmode": "require", "unrelated": "x"},
    )
    assert (
        EpisodeStoreHook("ij_pg").get_store_url()
        == "postgresql://svc:p%40ss%2Fword@db.internal:6543/jobs?sslmode=require"
    )


@pytest.mark.postgres
def test_store_hook_opens_the_postgres_store_of_a_postgres_connection(
    monkeypatch: pytest.MonkeyPatch, pg_database: str
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_IJ_PG_REAL", postgres_connection(pg_database))
    hook = EpisodeStoreHook("ij_pg_real")
    assert hook.test_connection()[0]
    allocated = hook.store.allocate("2026-W32", "hook-pg-key")
    hook.close()
    with open_store(pg_database) as store:
        assert store.get(allocated.episode_id) == allocated


def test_store_hook_reports_a_connection_without_a_store(monkeypatch: pytest.MonkeyPatch) -> None:
    set_conn(monkeypatch, "ij_empty", conn_type="idempotent_jobs_store")
    ok, message = EpisodeStoreHook("ij_empty").test_connection()
    assert not ok
    assert "names no store" in message


# -- HTTP provider hook ----------------------------------------------------------------------------
def test_http_hook_test_connection_checks_reachability_and_credentials(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer
) -> None:
    http_conn(monkeypatch, "ij_good", server, server.auth_token)
    http_conn(monkeypatch, "ij_bad", server, "wrong-token-value")
    assert HttpPaidProviderHook("ij_good").test_connection() == (
        True,
        f"provider reachable at {server.url}; credentials accepted",
    )
    ok, message = HttpPaidProviderHook("ij_bad").test_connection()
    assert not ok and "HTTP 401" in message
    assert "wrong-token-value" not in message
    provider = HttpPaidProviderHook("ij_good").get_provider()
    assert server.auth_token not in repr(provider)
    assert server.stats()["unauthorized"] == 1


def test_http_hook_refuses_unknown_config_keys(monkeypatch: pytest.MonkeyPatch, server: ProviderServer) -> None:
    set_conn(monkeypatch, "ij_typo", conn_type="idempotent_jobs_http", host=server.url, extra={"stauts_path": "/x"})
    ok, message = HttpPaidProviderHook("ij_typo").test_connection()
    assert not ok and "stauts_path" in message


# -- trigger ---------------------------------------------------------------------------------------
def test_trigger_serializes_exactly_its_constructor_arguments() -> None:
    kwargs = {
        "episode_id": "2026-W32-0",
        "remote_ref": "job-1",
        "provider_conn_id": "ij_provider",
        "poll_initial_delay": 0.5,
        "poll_max_delay": 4.0,
    }
    classpath, serialized = PaidJobTrigger(**kwargs).serialize()  # type: ignore[arg-type]
    assert serialized == kwargs
    again = import_string(classpath)(**serialized)
    assert isinstance(again, PaidJobTrigger)
    assert again.serialize() == (classpath, kwargs)


@pytest.mark.parametrize("bad", [{"episode_id": "2026-W32-007"}, {"remote_ref": ""}, {"poll_initial_delay": -1}])
def test_trigger_validates_its_arguments(bad: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"episode_id": "2026-W32-0", "remote_ref": "job-1", "provider_conn_id": "c", **bad}
    with pytest.raises(ValueError):
        PaidJobTrigger(**kwargs)


async def first_event(trigger: PaidJobTrigger) -> tuple[Any, list[Any]]:
    """The trigger's first event, and anything else it would yield (it must yield exactly one)."""
    events = [event async for event in trigger.run()]
    return events[0].payload, events[1:]


def test_trigger_polls_asynchronously_until_terminal(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer, tmp_path: Path
) -> None:
    http_conn(monkeypatch, "ij_async", server, server.auth_token)
    store = open_store(tmp_path / "store")
    episode = store.allocate("2026-W32", "trigger-key")
    provider = HttpPaidProviderHook("ij_async").get_provider()
    accepted = SubmissionLedger(store).submit(episode.episode_id, provider, {"prompt": "p", "units": 4})
    ref = accepted.submission.remote_ref
    assert ref is not None
    trigger = PaidJobTrigger(
        episode_id=episode.episode_id, remote_ref=ref, provider_conn_id="ij_async", poll_initial_delay=0.01
    )

    async def with_heartbeat() -> tuple[Any, list[Any], int]:
        # A ticker on the same loop keeps running while the trigger waits: nothing blocks the loop.
        ticks = 0
        stop = asyncio.Event()

        async def tick() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        ticker = asyncio.create_task(tick())
        payload, rest = await asyncio.wait_for(first_event(trigger), timeout=30)
        stop.set()
        await ticker
        return payload, rest, ticks

    payload, rest, ticks = asyncio.run(with_heartbeat())
    assert rest == []
    assert payload == {
        "episode_id": episode.episode_id,
        "remote_ref": ref,
        "status": "terminal",
        "state": "succeeded",
        "cost": 5.0,
        "result": {"url": f"https://media.invalid/{ref}.mp4"},
        "error": None,
    }
    assert server.stats()["jobs"][ref]["polls"] == 3
    assert ticks > 3
    # The trigger only reads: the ledger still says accepted until execute_complete records it.
    assert store.get(episode.episode_id).submission.state.value == "accepted"


def test_trigger_reports_an_unknown_job_as_an_error_event(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer
) -> None:
    http_conn(monkeypatch, "ij_async", server, server.auth_token)
    trigger = PaidJobTrigger(episode_id="2026-W32-0", remote_ref="job-missing", provider_conn_id="ij_async")
    payload, rest = asyncio.run(asyncio.wait_for(first_event(trigger), timeout=30))
    assert rest == []
    assert payload["status"] == "error" and "HTTP 404" in payload["message"]


# -- store URLs and credentials --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "shown", "passwords"),
    [
        ("postgresql://svc:s3cret@db:5432/jobs", "postgresql://svc:***@db:5432/jobs", ["s3cret"]),
        ("postgresql://svc:p%40ss%2Fw@db/jobs?namespace=a", "postgresql://svc:***@db/jobs?namespace=a", ["p@ss/w"]),
        # One reading: the store sends "a@b" (the password ends at the last "@"); no parser may take "a".
        ("postgresql://svc:a@b@db/jobs", "postgresql://svc:***@db/jobs", ["a@b"]),
        ("postgresql://svc:?a#b@db/jobs", "postgresql://svc:***@db/jobs", ["?a#b"]),
        # Two readings: refused by the store, shown (and masked) as a whole.
        (
            "postgresql://svc:a@db/b@db/jobs",
            "postgresql://(cannot be read: not shown)",
            ["postgresql://svc:a@db/b@db/jobs"],
        ),
        ("postgresql://svc:a/b@db/jobs", "postgresql://svc:***@db/jobs", ["a/b"]),
        (
            "postgresql://svc@db/jobs?password=qq&namespace=n",
            "postgresql://svc@db/jobs?password=***&namespace=n",
            ["qq"],
        ),
        ("postgres://db/jobs?sslpassword=kk", "postgres://db/jobs?sslpassword=***", ["kk"]),
        ("postgresql://svc@db/jobs", "postgresql://svc@db/jobs", []),
        ("/var/lib/jobs", "/var/lib/jobs", []),
        ("file:///var/lib/jobs", "file:///var/lib/jobs", []),
    ],
)
def test_store_url_passwords_are_found_and_redacted(url: str, shown: str, passwords: list[str]) -> None:
    from airflow_idempotent_jobs.hooks._store_url import redact_store_url, url_passwords

    assert redact_store_url(url) == shown
    assert url_passwords(url) == passwords


def test_a_sealed_store_url_shows_only_its_redacted_text() -> None:
    import copy
    import pickle

    from airflow_idempotent_jobs.hooks._store_url import SealedStoreUrl, seal_store_url

    sealed = seal_store_url("postgresql://svc:pw@db/jobs")
    assert isinstance(sealed, SealedStoreUrl)
    assert sealed == "postgresql://svc:***@db/jobs" and json.dumps(sealed) == '"postgresql://svc:***@db/jobs"'
    assert f"{sealed}" == str(sealed) == "postgresql://svc:***@db/jobs" and "pw" not in repr(sealed)
    assert sealed.secret == "postgresql://svc:pw@db/jobs"
    assert copy.deepcopy(sealed).secret == sealed.secret
    assert pickle.loads(pickle.dumps(sealed)) == "postgresql://svc:***@db/jobs"  # never the secret
    assert seal_store_url("/var/lib/jobs") == "/var/lib/jobs"
    assert not isinstance(seal_store_url("postgresql://svc@db/jobs"), SealedStoreUrl)


def test_store_connection_builds_its_postgres_url_from_login_and_password(monkeypatch: pytest.MonkeyPatch) -> None:
    set_conn(
        monkeypatch,
        "ij_fields",
        conn_type="idempotent_jobs_store",
        host="postgresql://db.internal/jobs?namespace=team-a",
        login="svc",
        password="p@ss/word",
        port=6543,
    )
    assert EpisodeStoreHook("ij_fields").get_store_url() == (
        "postgresql://svc:p%40ss%2Fword@db.internal:6543/jobs?namespace=team-a"
    )
    set_conn(
        monkeypatch, "ij_schema", conn_type="idempotent_jobs_store", host="postgresql://db", login="svc", schema="jobs"
    )
    assert EpisodeStoreHook("ij_schema").get_store_url() == "postgresql://svc@db/jobs"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"host": "postgresql://svc:hunter2-host@db/jobs"}, "host"),
        ({"host": "postgresql://svc@db/jobs?password=hunter2-query"}, "host"),
        ({"extra": {"url": "postgresql://svc:hunter2-extra@db/jobs"}}, "extra 'url'"),
        ({"host": "postgresql://db/jobs", "extra": {"password": "hunter2-key"}}, "extra 'password'"),
        ({"host": "/var/lib/jobs", "password": "hunter2-file"}, "password"),
        ({"host": "postgresql://alice@db/jobs", "login": "bob", "password": "hunter2-login"}, "login"),
        ({"host": "postgresql://db/jobs", "password": "hunter2-nologin"}, "password"),
    ],
)
def test_store_connection_refuses_credentials_outside_the_password_field(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], field: str
) -> None:
    from airflow_idempotent_jobs.errors import InvalidConfiguration

    set_conn(monkeypatch, "ij_leaky", conn_type="idempotent_jobs_store", **fields)
    with pytest.raises(InvalidConfiguration) as caught:
        EpisodeStoreHook("ij_leaky").get_store_url()
    assert caught.value.field == field and not caught.value.retryable
    assert "hunter2" not in str(caught.value)
    ok, message = EpisodeStoreHook("ij_leaky").test_connection()
    assert not ok and "hunter2" not in message


def test_postgres_connection_refuses_a_url_in_its_host(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_idempotent_jobs.errors import InvalidConfiguration

    set_conn(monkeypatch, "ij_pg_url_host", conn_type="postgres", host="postgresql://svc:hunter2@db/jobs")
    with pytest.raises(InvalidConfiguration) as caught:
        EpisodeStoreHook("ij_pg_url_host").get_store_url()
    assert caught.value.field == "host" and "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://svc:a?b#c@db/jobs",  # SQLAlchemy reads the password up to the first '@'
        "postgresql://svc:x@y@db/jobs",  # urllib reads it up to the last
        "postgresql://svc:zz%3F@db/jobs",
    ],
)
def test_odd_passwords_are_hidden_however_a_parser_splits_them(url: str) -> None:
    from sqlalchemy.engine import make_url

    from airflow_idempotent_jobs.hooks._store_url import redact_store_url, seal_store_url

    password = make_url(url).password
    assert password and password not in redact_store_url(url) and password not in seal_store_url(url)
    assert redact_store_url(url).startswith("postgresql://svc:***@")


@pytest.mark.postgres
def test_a_postgres_connection_sets_the_stores_own_options_and_cannot_change_its_session(
    monkeypatch: pytest.MonkeyPatch, pg_database: str
) -> None:
    """namespace/schema/timeouts come from the extra; libpq ``options`` could turn our timeouts off."""
    from urllib.parse import urlsplit

    from airflow_idempotent_jobs.errors import InvalidConfiguration
    from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore

    parts = urlsplit(pg_database)
    base = {
        "conn_type": "postgres",
        "host": parts.hostname,
        "port": parts.port,
        "login": parts.username,
        "schema": parts.path.lstrip("/"),
    }
    extra = {"namespace": "team-a", "lock_timeout": "7", "statement_timeout": "9", "unrelated": "x"}
    set_conn(monkeypatch, "ij_pg_opts", **base, extra=extra)
    hook = EpisodeStoreHook("ij_pg_opts")
    store = hook.store
    assert isinstance(store, PostgresEpisodeStore)
    assert (store.namespace, store.lock_timeout) == ("team-a", 7.0)
    allocated = store.allocate("2026-W32", "hook-pg-options")
    hook.close()
    with open_store(pg_database + "?namespace=team-a") as reopened:
        assert reopened.get(allocated.episode_id) == allocated
    set_conn(monkeypatch, "ij_pg_session", **base, extra={"options": "-c statement_timeout=0"})
    with pytest.raises(InvalidConfiguration, match="options"):
        EpisodeStoreHook("ij_pg_session").store  # noqa: B018  (opening is the point)
