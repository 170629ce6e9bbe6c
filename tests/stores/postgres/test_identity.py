"""Each PostgreSQL store has a random identity of its own, and idempotency tokens derive from it.

Were every store's tokens derived from its namespace alone (``default``), staging and production
would derive the same token for ``2026-W32-0``, and a provider that honours tokens would hand one
the other's paid job.
Migration 0002 gives each namespace a random identity; namespaces in use at the upgrade get one
then, and their recorded submissions keep the tokens they were sent with.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import multiprocessing
import socket
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs import EpisodeNotFound, SubmissionState, open_store
from airflow_idempotent_jobs.allocation import new_episode
from airflow_idempotent_jobs.episode import EpisodeStatus
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.paid.ledger import DEFAULT_CLAIM_LEASE, SubmissionLedger, idempotency_token
from airflow_idempotent_jobs.store_check import check_store
from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from airflow_idempotent_jobs.stores.postgres._session import IDENTITY_RE
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import PostgresBackend
from tests.clirun import run_cli, run_python
from tests.paid.support import jobs_for, provider_for
from tests.pg import PgServer, insert_before_approvals, pg_url, spawn_together

pytestmark = pytest.mark.postgres

EPISODE = "2026-W32-0"
REQUEST = {"prompt": "the week in review"}
SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def other_database(pg_server: PgServer) -> Iterator[str]:
    name = pg_server.create()
    try:
        yield pg_url(name)
    finally:
        pg_server.drop(name)


def _token(url: str) -> tuple[str, str]:
    with open_store(url) as store:
        assert store.allocate("2026-W32", "weekly:scheduled__2026-08-03").episode_id == EPISODE
        return store.identity, SubmissionLedger(store).token_for(EPISODE)


def test_two_databases_never_share_a_token(pg_database: str, other_database: str) -> None:
    """Staging and production, both namespace ``default``."""
    staging, production = _token(pg_database), _token(other_database)
    assert staging[0] != production[0]
    assert staging[1] != production[1]
    for identity, _ in (staging, production):
        assert IDENTITY_RE.fullmatch(identity) and identity != "default"


def test_two_namespaces_of_one_database_never_share_a_token(pg_database: str) -> None:
    first, second = _token(pg_database), _token(pg_database + "?namespace=team-b")
    assert first[0] != second[0] and first[1] != second[1]


def test_the_identity_survives_reopening_in_another_process(pg_database: str) -> None:
    identity, token = _token(pg_database)
    code = (
        "import sys\nfrom airflow_idempotent_jobs import open_store\n"
        "from airflow_idempotent_jobs.paid.ledger import SubmissionLedger\n"
        "with open_store(sys.argv[1]) as s: print(s.identity, SubmissionLedger(s).token_for('2026-W32-0'))"
    )
    done = run_python(code, pg_database)
    assert done.code == 0, done.stderr
    assert done.stdout.split() == [identity, token]


def test_asking_before_any_write_creates_it_once(pg_database: str) -> None:
    with open_store(pg_database + "?namespace=fresh") as store:
        asked = store.identity
    with open_store(pg_database + "?namespace=fresh") as store:
        store.allocate("2026-W32", "k")
        assert store.identity == asked


def test_a_first_write_that_fails_records_no_identity(pg_database: str) -> None:
    backend = PostgresBackend(pg_database)
    before = backend.snapshot()
    with open_store(pg_database) as store, pytest.raises(EpisodeNotFound):
        store.update(EPISODE, lambda episode: episode)
    assert backend.snapshot() == before
    assert not [key for key in before if key.startswith("store_identity/")]


def test_the_identity_cannot_be_changed_or_deleted(pg_database: str) -> None:
    _token(pg_database)
    with psycopg.connect(pg_database, autocommit=True) as conn:
        for statement in (
            "UPDATE idempotent_jobs.store_identity SET identity = repeat('0', 32)",
            "DELETE FROM idempotent_jobs.store_identity",
        ):
            with pytest.raises(psycopg.Error) as caught:
                conn.execute(statement)
            assert caught.value.sqlstate == "IJ003"


def _first_writer(url: str, key: str, barrier: Any, results: Any) -> None:
    try:
        with open_store(url) as store:
            barrier.wait(timeout=60)
            store.allocate("2026-W32", key)
            results.put(store.identity)
    except BaseException as exc:
        results.put(f"{type(exc).__name__}: {exc}")


def test_first_writes_of_a_namespace_at_once_agree_on_one_identity(pg_database: str) -> None:
    url = pg_database + "?namespace=brand-new"
    got = spawn_together(_first_writer, [(url, f"k{i}") for i in range(4)], timeout=60)
    assert len(set(got)) == 1 and IDENTITY_RE.fullmatch(got[0]), got
    with psycopg.connect(pg_database) as conn:
        rows = conn.execute("SELECT identity FROM idempotent_jobs.store_identity WHERE namespace = 'brand-new'")
        assert rows.fetchall() == [(got[0],)]


def test_check_reports_a_namespace_without_identity(pg_database: str) -> None:
    _token(pg_database)
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("ALTER TABLE idempotent_jobs.store_identity DISABLE TRIGGER store_identity_guard")
        conn.execute("DELETE FROM idempotent_jobs.store_identity")
    with open_store(pg_database) as store:
        problems = check_store(store)
    assert [(p.where.split()[-1], p.message) for p in problems] == [
        ("idempotent_jobs.store_identity[default]", "no identity recorded for this namespace")
    ]
    done = run_cli("--store", pg_database, "check")
    assert done.code == 1 and "store_identity[default]" in done.stdout, (done.stdout, done.stderr)


# -- the upgrade from version 1 --------------------------------------------------------------------


def _dead_pid() -> int:
    child = SPAWN.Process(target=int)
    child.start()
    child.join()
    assert child.pid is not None
    return child.pid


def _version_1_store(url: str, token: str) -> None:
    """A store as version 1 left it: ``2026-W32-0`` submitting, its token sent, its submitter dead."""
    engine_store = PostgresEpisodeStore(url)
    with engine_store.engine.begin() as conn:
        pg_schema.migrate(conn, "idempotent_jobs", where="v1", lock_timeout_ms=5000, target=1)
    engine_store.close()
    episode = new_episode(WeekId.parse("2026-W32"), 0, "weekly:scheduled__2026-08-03", None)
    # A version-1 claim is host:pid:nonce, with no PID namespace: only its lease proves its writer gone.
    claimed_at = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=DEFAULT_CLAIM_LEASE + 5)).isoformat()
    submission = episode.submission.moved_to(
        SubmissionState.SUBMITTING,
        episode_id=EPISODE,
        note="intent written before calling the provider",
        token=token,
        attempts=1,
        claimed_by=f"{socket.gethostname()}:{_dead_pid()}:0badc0de",
        claimed_at=claimed_at,
    )
    episode = dataclasses.replace(episode, submission=submission, status=EpisodeStatus.RUNNING)
    other = new_episode(WeekId.parse("2026-W30"), 0, "team-b:first", None)
    with psycopg.connect(url) as conn:
        insert_before_approvals(conn, "default", episode)
        insert_before_approvals(conn, "team-b", other)


def _upgrade(url: str, barrier: Any, results: Any) -> None:
    try:
        with open_store(url) as store:
            barrier.wait(timeout=60)
            store.list()  # a read upgrades the schema (as it did for version 1)
            results.put(store.identity)
    except BaseException as exc:
        results.put(f"{type(exc).__name__}: {exc}")


def test_an_upgraded_store_keeps_the_recorded_token_and_resumes_with_it(empty_database: str) -> None:
    old_token = idempotency_token("default", EPISODE)  # how version 1 derived it (identity = namespace)
    _version_1_store(empty_database, old_token)
    with ProviderServer(polls_to_finish=1, honour_tokens=True, lookup=False) as server:
        provider = provider_for(server)
        first_job = provider.submit(REQUEST, old_token)  # the dead submitter's call reached the provider

        with open_store(empty_database) as store:
            assert check_store(store)[0].message.startswith(
                f"schema version 1; this code uses version {pg_schema.LATEST_VERSION}"
            )
        # Four processes upgrade at once: the migration runs once and they all see one identity.
        got = spawn_together(_upgrade, [(empty_database,)] * 4, timeout=60)
        assert len(set(got)) == 1 and IDENTITY_RE.fullmatch(got[0]), got
        with psycopg.connect(empty_database) as conn:
            versions = conn.execute("SELECT version FROM idempotent_jobs.schema_version ORDER BY 1").fetchall()
            assert versions == [(v,) for v in range(1, pg_schema.LATEST_VERSION + 1)]
            namespaces = conn.execute("SELECT namespace FROM idempotent_jobs.store_identity ORDER BY 1").fetchall()
            assert namespaces == [("default",), ("team-b",)]

        with open_store(empty_database) as store:
            ledger = SubmissionLedger(store)
            assert store.identity == got[0]
            assert ledger.token_for(EPISODE) != old_token  # new submissions derive from the identity...
            assert store.get(EPISODE).submission.token == old_token  # ...recorded ones keep theirs
            resumed = ledger.submit(EPISODE, provider, REQUEST)
            assert resumed.submission.state is SubmissionState.ACCEPTED
            assert resumed.submission.token == old_token
            assert resumed.submission.remote_ref == first_job
            assert check_store(store) == []
        assert jobs_for(server, old_token) == [first_job]
        assert server.submissions(old_token) == 2  # the retry resubmitted with the same token
        assert server.accepted() == 1
