"""PostgreSQL store faults: server down, lock timeout, illegal or concurrent ledger moves, check findings."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from airflow_idempotent_jobs import (
    IllegalTransition,
    StoreUnavailable,
    SubmissionState,
    open_store,
)
from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.store_check import check_store
from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from tests.backends import PostgresBackend

pytestmark = pytest.mark.postgres


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"postgresql://postgres:secret@127.0.0.1:{port}/test"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "airflow_idempotent_jobs", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_a_server_that_is_down_is_store_unavailable() -> None:
    url = _closed_port_url()
    with open_store(url) as store:
        assert "secret" not in store.location
        for call in (lambda: store.allocate("2026-W32", "k"), lambda: store.get("2026-W32-0"), store.list):
            with pytest.raises(StoreUnavailable, match="unavailable") as caught:
                call()
            assert "secret" not in str(caught.value)


def test_the_cli_says_so_in_one_line_with_exit_5() -> None:
    url = _closed_port_url()
    for args in (("allocate", "--key", "k", "--week", "2026-W32"), ("list",), ("check",)):
        done = _cli("--store", url, *args)
        assert done.returncode == 5, done
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("idempotent-jobs: error: "), done.stderr
        assert "unavailable" in lines[0] and "secret" not in lines[0]


def test_urls_and_options(pg_database: str) -> None:
    with pytest.raises(InvalidConfiguration):
        PostgresEpisodeStore("mysql://x@127.0.0.1/db")
    with pytest.raises(InvalidConfiguration):
        PostgresEpisodeStore(pg_database, namespace="bad namespace")
    with pytest.raises(InvalidConfiguration):
        PostgresEpisodeStore(pg_database, schema="Bad-Schema")
    # An engine of the caller's (an Airflow hook's, say) is used as is and left open.
    engine = sa.create_engine(pg_database.replace("postgresql://", "postgresql+psycopg://", 1))
    with PostgresEpisodeStore(engine, namespace="team-a") as from_engine:
        assert from_engine.allocate("2026-W32", "k").episode_id == "2026-W32-0"
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM idempotent_jobs.episodes")).scalar_one() == 1
    engine.dispose()
    with pytest.raises(InvalidConfiguration, match="psycopg 3"):
        PostgresEpisodeStore(sa.create_engine(pg_database.replace("postgresql://", "postgresql+psycopg2://", 1)))
    other = pg_database.replace("postgresql://", "postgres://", 1) + "?namespace=team-b"
    with open_store(pg_database) as first, open_store(other) as second:
        assert (first.namespace, second.namespace) == ("default", "team-b")
        # Namespaces share the tables, never sequences or keys.
        assert first.allocate("2026-W32", "same-key").episode_id == "2026-W32-0"
        assert second.allocate("2026-W32", "same-key").episode_id == "2026-W32-0"
        assert [e.allocation_key for e in second.list()] == ["same-key"]


def test_lock_timeout_is_store_unavailable_and_writes_nothing(pg_database: str) -> None:
    backend = PostgresBackend(pg_database)
    with open_store(pg_database, lock_timeout=0.2) as store, open_store(pg_database + "?namespace=b") as other:
        store.ensure_schema()  # type: ignore[attr-defined]
        before = backend.snapshot()
        key = pg_schema.advisory_key("namespace", "idempotent_jobs", "default")
        with psycopg.connect(pg_database, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (key,))
            with pytest.raises(StoreUnavailable, match="could not lock"):
                store.allocate("2026-W32", "k")
            done = _cli("--store", pg_database, "--lock-timeout", "0.2", "allocate", "--week", "2026-W32", "--key", "k")
            assert (done.returncode, done.stdout) == (5, ""), done
            assert len(done.stderr.splitlines()) == 1 and "could not lock" in done.stderr
            assert backend.snapshot() == before
            # Another namespace is not held up by this one.
            assert other.allocate("2026-W32", "k").episode_id == "2026-W32-0"
        assert store.allocate("2026-W32", "k").episode_id == "2026-W32-0"


def _move(state: SubmissionState) -> Any:
    def change(episode: Any) -> Any:
        return dataclasses.replace(
            episode, submission=episode.submission.moved_to(state, episode_id=episode.episode_id)
        )

    return change


def test_illegal_ledger_moves_fail_in_the_database(pg_database: str) -> None:
    with open_store(pg_database) as store:
        episode = store.allocate("2026-W32", "k")
    with psycopg.connect(pg_database, autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(
                "UPDATE idempotent_jobs.episodes SET submission_state = 'succeeded', "
                "submission = jsonb_set(submission, '{state}', '\"succeeded\"') WHERE episode_id = %s",
                (episode.episode_id,),
            )
        assert caught.value.sqlstate == "IJ001"
        with pytest.raises(psycopg.Error) as caught:
            conn.execute("UPDATE idempotent_jobs.episodes SET allocation_key = 'stolen'")
        assert caught.value.sqlstate == "IJ002"


def test_a_transition_from_a_stale_state_fails(pg_database: str) -> None:
    """The conditional UPDATE: a writer acting on a state that moved meanwhile changes nothing."""
    with open_store(pg_database) as store:
        stale = store.allocate("2026-W32", "k")
        store.update(stale.episode_id, _move(SubmissionState.SUBMITTING))
        moved = store.update(stale.episode_id, _move(SubmissionState.UNKNOWN))
        backend = PostgresBackend(pg_database)
        before = backend.snapshot()
        # Bypass the policy: replace as if the row were still in ``none``.
        wanted = _move(SubmissionState.SUBMITTING)(stale)
        with store._session() as session, pytest.raises(IllegalTransition, match="from unknown to submitting"):
            session.replace(stale, wanted)
        assert backend.snapshot() == before
        assert store.get(stale.episode_id) == moved


def test_check_reports_damaged_rows_and_marks(pg_database: str) -> None:
    backend = PostgresBackend(pg_database)
    with open_store(pg_database) as store:
        ids = [store.allocate("2026-W32", f"k{i}").episode_id for i in range(3)]
        assert check_store(store) == []
        backend.corrupt(ids[0], "unknown-version")
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute("UPDATE idempotent_jobs.weeks SET highest_sequence = 1")
        problems = check_store(store)
        assert [(p.where.rsplit("/", 1)[-1], p.message.split()[0]) for p in problems] == [
            ("2026-W32-0]", "unknown"),
            ("2026-W32-2]", "week"),
        ]
        assert [p.message for p in check_store(store, [ids[1], "2026-W32-9"])] == ["episode not found"]
    done = _cli("--store", pg_database, "check")
    assert done.returncode == 1, done
    assert "unknown schema_version 99" in done.stdout


def test_an_empty_namespace_or_schema_is_bad_input_not_the_default(pg_database: str) -> None:
    """``?namespace=`` must not quietly mean "default": that namespace may be another pipeline's."""
    with open_store(pg_database) as store:
        store.allocate("2026-W32", "theirs")
    for query in ("?namespace=", "?schema=", "?namespace=&schema=x"):
        with pytest.raises(InvalidConfiguration, match="must not be empty"):
            open_store(pg_database + query)
        done = _cli("--store", pg_database + query, "allocate", "--week", "2026-W32", "--key", "mine")
        assert (done.returncode, done.stdout, done.stderr.count("\n")) == (2, "", 1), done.stderr
    with pytest.raises(InvalidConfiguration):
        PostgresEpisodeStore(pg_database, namespace="")
    with pytest.raises(InvalidConfiguration):
        PostgresEpisodeStore(pg_database, schema="")
    with open_store(pg_database) as store:
        assert [e.allocation_key for e in store.list()] == ["theirs"]
