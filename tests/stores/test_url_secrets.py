"""No part of a store URL's password in any message, whatever the URL's shape.

A password holding an unencoded ``?``, ``@``, ``#`` or ``/`` could be split by one parser or
another into the query, the host or the database, and printed from there. The command is run as
a real process with ``--store`` and with ``IDEMPOTENT_JOBS_STORE``; a URL the store can read ends
in "unavailable" (nothing listens on port 1: exit 5), any other is refused unread (exit 2).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.errors import IdempotentJobsError, InvalidConfiguration, StoreUnavailable
from airflow_idempotent_jobs.stores.url_parts import split_url
from tests.clirun import run_cli
from tests.hostile_store_urls import HOSTILE, Hostile, leaked

#: Where every hostile URL points: a port where nothing listens, so reading the URL is all that succeeds.
NOWHERE = "127.0.0.1:1/ij"


@pytest.mark.parametrize("hostile", HOSTILE, ids=[h.name for h in HOSTILE])
def test_the_command_never_shows_any_part_of_the_password(tmp_path: Path, hostile: Hostile) -> None:
    url = hostile.at(NOWHERE)
    runs = {
        "--store": run_cli("--store", url, "list", cwd=tmp_path),
        "IDEMPOTENT_JOBS_STORE": run_cli(
            "allocate", "--week", "2026-W32", "--key", "k", env={"IDEMPOTENT_JOBS_STORE": url}, cwd=tmp_path
        ),
    }
    for how, done in runs.items():
        assert leaked(hostile.secrets, done.stdout, done.stderr) == [], (how, done.stderr)
        line = done.error_line()
        if hostile.password is None:
            assert done.code == 2, (how, line)
            assert "://...)" in line or "file URL: the URL (not repeated" in line, (how, line)
        else:
            assert done.code == 5, (how, line)
            assert "ij:***@127.0.0.1:1/ij is unavailable" in line, (how, line)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("hostile", HOSTILE, ids=[h.name for h in HOSTILE])
def test_the_library_reads_the_password_whole_and_logs_none_of_it(
    caplog: pytest.LogCaptureFixture, hostile: Hostile
) -> None:
    """Debug logging on (SQLAlchemy's, psycopg's, ours): neither the error nor any log line shows it."""
    caplog.set_level(logging.DEBUG)
    url = hostile.at(NOWHERE)
    with pytest.raises(IdempotentJobsError) as caught:
        store = open_store(url)
        try:
            assert store.engine.url.password == hostile.password  # type: ignore[attr-defined]
            assert (store.engine.url.host, store.engine.url.port) == ("127.0.0.1", 1)  # type: ignore[attr-defined]
            store.list()
        finally:
            store.close()
    expected = InvalidConfiguration if hostile.password is None else StoreUnavailable
    assert type(caught.value) is expected, caught.value
    assert leaked(hostile.secrets, str(caught.value), repr(caught.value), caplog.text) == []


@pytest.mark.parametrize("password", ["postgresql", "127.0.0.1", "ij", "store"])
def test_a_password_that_is_also_another_part_of_the_url_leaves_that_part_shown(password: str) -> None:
    """The password is taken out by position, not by searching for its text."""
    with pytest.raises(StoreUnavailable) as caught, open_store(f"postgresql://ij:{password}@{NOWHERE}") as store:
        store.list()
    assert str(caught.value).startswith("PostgreSQL store postgresql://ij:***@127.0.0.1:1/ij is unavailable")


@pytest.mark.postgres
def test_a_password_with_every_reserved_mark_connects_as_written(pg_database: str) -> None:
    """The test server trusts local connections: the URL's user, host and database must be read right."""
    from urllib.parse import urlsplit

    parts = urlsplit(pg_database)
    url = f"postgresql://{parts.username}:?Kq9z@Vb7m#Nc2r/Ld5s:Mx4w@{parts.hostname}:{parts.port}{parts.path}"
    done = run_cli("--store", url, "allocate", "--week", "2026-W32", "--key", "k")
    assert (done.code, done.stdout) == (0, "2026-W32-0\n"), done.stderr
    with open_store(url) as store:
        assert store.engine.url.password == "?Kq9z@Vb7m#Nc2r/Ld5s:Mx4w"  # type: ignore[attr-defined]
        assert [e.episode_id for e in store.list()] == ["2026-W32-0"]


@pytest.mark.parametrize(
    "args",
    [
        ("{url}", "list"),  # --store forgotten: the URL taken for the command
        ("--sotre", "{url}", "list"),  # a misspelt option
        ("list", "--sotre={url}"),
        ("show", "{url}"),  # the URL where an episode id goes
        ("list", "--week", "{url}"),
    ],
    ids=["as-command", "misspelt-option", "misspelt-option-equals", "as-episode-id", "as-week"],
)
def test_a_url_given_in_the_wrong_place_is_not_repeated_either(tmp_path: Path, args: tuple[str, ...]) -> None:
    hostile = HOSTILE[1]
    url = hostile.at(NOWHERE)
    done = run_cli(*(arg.replace("{url}", url) for arg in args), env={"IDEMPOTENT_JOBS_STORE": str(tmp_path)})
    assert done.code == 2, done.stderr
    assert "(a URL: not repeated)" in done.error_line(), done.stderr
    assert leaked(hostile.secrets, done.stdout, done.stderr) == []


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("postgresql://svc:pw@db:5432/jobs?namespace=a", ("svc", "pw", "db", 5432, "/jobs", "namespace=a")),
        ("postgresql://svc:p%40ss@db/jobs", ("svc", "p@ss", "db", None, "/jobs", None)),
        ("postgresql://sv%20c@db/jobs", ("sv c", None, "db", None, "/jobs", None)),
        ("postgresql://[::1]:5432/x", (None, None, "::1", 5432, "/x", None)),
        ("postgresql:///db?host=/run/pg", (None, None, None, None, "/db", "host=/run/pg")),
        ("postgresql://h1,h2/db", (None, None, "h1,h2", None, "/db", None)),
        ("postgresql://u:a/b@c@h/d", ("u", "a/b@c", "h", None, "/d", None)),  # the last "@" ends it
    ],
)
def test_a_url_is_read_with_its_password_ending_at_the_last_at(url: str, parts: tuple[Any, ...]) -> None:
    found = split_url(url)
    assert (found.user, found.password, found.hostname, found.port, found.path, found.query) == parts


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("postgresql://svc@db/jobs?application_name=a@b", "reads two ways"),  # '@' in an option: encode it
        ("postgresql://db/jobs?application_name=a@b", "reads two ways"),
        ("postgresql://svc:pw@db/d@b", "reads two ways"),  # '@' in the database name
        ("postgresql://ij@corp:pw@db/jobs", "user name holds a reserved character"),
        ("postgresql://db:0/jobs", "cannot be read"),
        ("postgresql://db:65536/jobs", "cannot be read"),
        ("postgresql://db:port/jobs", "cannot be read"),
        ("postgresql://[zz]/jobs", "cannot be read"),
    ],
)
def test_a_url_that_reads_two_ways_or_none_is_refused_naming_its_scheme_only(url: str, reason: str) -> None:
    with pytest.raises(InvalidConfiguration) as caught:
        split_url(url)
    assert reason in caught.value.reason and caught.value.field == "URL (postgresql://...)"
