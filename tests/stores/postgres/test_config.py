"""PostgreSQL store configuration: what a URL may say, refused before anything connects or is created.

Every refused URL is tried against a database that has never seen the store: the command exits
2 with one line naming the option (never the password), and the database still holds no schema
of ours. The password in these URLs is real text in the URL (the test server trusts every local
connection, so it is never checked): it must never reach a message.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.errors import InvalidConfiguration, InvalidIdentifier
from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore
from tests.clirun import Result, run_cli, run_main
from tests.pg import PgServer, pg_url

pytestmark = pytest.mark.postgres

SECRET = "s3cr3t-pw"

#: (query, what the one error line must name)
REFUSED = [
    ("?sslmode=bogus", "sslmode"),
    ("?foo=bar", "foo"),
    ("?schema=pg_catalog", "schema"),
    ("?schema=pg_toast", "schema"),
    ("?schema=pg_temp_1", "schema"),
    ("?schema=information_schema", "schema"),
    ("?schema=public", "schema"),
    ('?schema=jobs"%3B%20DROP%20SCHEMA%20public%3B--', "schema"),
    ("?schema=a%27b", "schema"),
    ("?schema=Jobs", "schema"),
    ("?options=-c%20search_path%3Devil,pg_catalog", "options"),
    ("?options=-c%20statement_timeout%3D0", "options"),
    ("?host=evil.example.org", "host"),
    ("?hostaddr=192.0.2.1", "hostaddr"),
    ("?port=1", "port"),
    ("?dbname=postgres", "dbname"),
    ("?user=mallory", "user"),
    (f"?password={SECRET}x", "password"),
    ("?sslpassword=hunter2%0Ahunter2", "sslpassword"),
    ("?service=prod", "service"),
    ("?passfile=/etc/shadow", "passfile"),
    ("?replication=database", "replication"),
    ("?target_session_attrs=read-only", "target_session_attrs"),
    ("?keepalives_idle=soon", "keepalives_idle"),
    ("?sslmode=require&sslmode=disable", "sslmode"),
    ("?namespace=a&namespace=b", "namespace"),
    ("?namespace=has%20space", "namespace"),
    ("?lock_timeout=1e7", "lock timeout"),
    ("?lock_timeout=nan", "lock timeout"),
    ("?statement_timeout=0", "statement_timeout"),
    ("?statement_timeout=-1", "statement_timeout"),
    ("?statement_timeout=inf", "statement_timeout"),
    ("?statement_timeout=1e7", "statement_timeout"),
    ("?statement_timeout=soon", "statement_timeout"),
    ("?connect_timeout=0", "connect_timeout"),
    ("?application_name=a%0Ab", "application_name"),
    ("#fragment", "URL"),
]


@pytest.fixture
def never_used(pg_server: PgServer) -> Iterator[str]:
    """A database the store has never seen, its URL carrying a password."""
    name = pg_server.create(empty=True)
    try:
        yield pg_url(name).replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@", 1)
    finally:
        pg_server.drop(name)


def _our_traces(url: str) -> list[str]:
    """Schemas other than PostgreSQL's own and ``public``, and every relation in ``public``."""
    with psycopg.connect(url, autocommit=True) as conn:
        schemas = [
            name
            for (name,) in conn.execute("SELECT nspname FROM pg_namespace ORDER BY 1")
            if not name.startswith("pg_") and name not in ("public", "information_schema")
        ]
        public = [
            f"public.{name}"
            for (name,) in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' ORDER BY 1"
            )
        ]
    return schemas + public


def _refused_line(done: Result, mention: str) -> str:
    assert (done.code, done.stdout) == (2, ""), (done.code, done.stdout, done.stderr)
    line = done.error_line()
    assert mention in line, line
    for secret in (SECRET, "hunter2"):
        assert secret not in line, line
    return line


@pytest.mark.parametrize(("query", "mention"), REFUSED, ids=[q for q, _ in REFUSED])
def test_a_url_option_the_store_does_not_take_is_bad_input_and_creates_nothing(
    never_used: str, query: str, mention: str
) -> None:
    url = never_used + query
    with pytest.raises((InvalidConfiguration, InvalidIdentifier)) as caught:
        PostgresEpisodeStore(url).allocate("2026-W32", "k")
    assert mention in str(caught.value)
    assert SECRET not in str(caught.value) and "hunter2" not in str(caught.value)
    for args in (("list",), ("allocate", "--week", "2026-W32", "--key", "k"), ("check",), ("show", "2026-W32-0")):
        _refused_line(run_main("--store", url, *args), mention)
    assert _our_traces(never_used) == []


def test_the_command_refuses_in_its_own_process_too(never_used: str) -> None:
    for query, mention in (("?sslmode=bogus", "sslmode"), ("?foo=bar", "foo"), ("?schema=pg_catalog", "schema")):
        _refused_line(run_cli("--store", never_used + query, "list"), mention)
        env = {"IDEMPOTENT_JOBS_STORE": never_used + query}
        _refused_line(run_cli("allocate", "--week", "2026-W32", "--key", "k", env=env), mention)
    assert _our_traces(never_used) == []


@pytest.mark.parametrize("timeout", ["1e7", "2147484", "nan", "inf", "-1"])
def test_a_lock_timeout_postgresql_cannot_take_is_bad_input(never_used: str, timeout: str) -> None:
    """PostgreSQL takes lock_timeout as an int of milliseconds: 1e7 s is bad input (exit 2), not a "database error"."""
    done = run_main("--store", never_used, "--lock-timeout", timeout, "allocate", "--week", "2026-W32", "--key", "k")
    _refused_line(done, "lock timeout")
    with pytest.raises(InvalidIdentifier, match="lock timeout"):
        PostgresEpisodeStore(never_used, lock_timeout=float(timeout))
    assert _our_traces(never_used) == []


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("statement_timeout", 1e7),
        ("statement_timeout", 0.0),
        ("connect_timeout", float("nan")),
        ("statement_timeout", True),
    ],
)
def test_constructor_timeouts_are_checked_like_the_url_ones(never_used: str, option: str, value: object) -> None:
    with pytest.raises(InvalidConfiguration, match=option):
        PostgresEpisodeStore(never_used, **{option: value})  # type: ignore[arg-type]
    assert _our_traces(never_used) == []


@pytest.mark.parametrize("name", ["pg_catalog", "public", "information_schema", "pg_toast", "Bad-Schema", ""])
def test_a_schema_argument_the_store_must_not_write_into_is_refused(never_used: str, name: str) -> None:
    with pytest.raises(InvalidConfiguration, match="schema"):
        PostgresEpisodeStore(never_used, schema=name)
    assert _our_traces(never_used) == []


def test_a_schema_that_holds_another_applications_tables_is_refused_and_left_alone(never_used: str) -> None:
    with psycopg.connect(never_used, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA billing")
        conn.execute("CREATE TABLE billing.schema_version (version integer)")
        conn.execute("INSERT INTO billing.schema_version VALUES (1)")
    url = never_used + "?schema=billing"
    line = _refused_line(run_main("--store", url, "allocate", "--week", "2026-W32", "--key", "k"), "schema")
    assert "billing" in line
    with psycopg.connect(never_used, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'billing'")]
        types = [
            r[0]
            for r in conn.execute(
                "SELECT typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
                " WHERE n.nspname = 'billing' AND t.typtype = 'e'"
            )
        ]
    assert (tables, types) == (["schema_version"], [])


def test_the_options_the_store_does_take_work(never_used: str) -> None:
    query = (
        "?namespace=team-a&schema=jobs_a&sslmode=disable&application_name=nightly&keepalives=1"
        "&keepalives_idle=30&tcp_user_timeout=5000&target_session_attrs=read-write"
        "&lock_timeout=2&statement_timeout=5&connect_timeout=3"
    )
    with open_store(never_used + query) as store:
        assert isinstance(store, PostgresEpisodeStore)
        assert (store.namespace, store.schema) == ("team-a", "jobs_a")
        assert (store.lock_timeout, store.statement_timeout, store.connect_timeout) == (2.0, 5.0, 3.0)
        assert store.allocate("2026-W32", "k").episode_id == "2026-W32-0"
        assert SECRET not in store.location
    done = run_cli("--store", never_used + query, "list", "--json")
    assert done.code == 0, done.stderr
    assert '"2026-W32-0"' in done.stdout
    # An explicit argument wins over the URL (the CLI's --lock-timeout over ?lock_timeout=).
    explicit = PostgresEpisodeStore(never_used + query, lock_timeout=7)
    assert explicit.lock_timeout == 7.0
    explicit.close()


def test_a_unix_socket_directory_is_the_one_host_the_query_may_name(never_used: str) -> None:
    dbname = never_used.rsplit("/", 1)[1]
    with open_store(f"postgresql://postgres@/{dbname}?host=/var/run/postgresql") as store:
        assert store.allocate("2026-W32", "k").episode_id == "2026-W32-0"
    with pytest.raises(InvalidConfiguration, match="host"):
        open_store(f"postgresql://postgres@127.0.0.1/{dbname}?host=/var/run/postgresql")


def test_the_sessions_carry_the_stores_settings_whatever_pgoptions_says(
    pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libpq also reads PGOPTIONS: the store's own startup options win, so it cannot turn the bounds off."""
    monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=0 -c statement_timeout=0 -c search_path=evil,pg_catalog")
    with PostgresEpisodeStore(pg_database, lock_timeout=1.5, statement_timeout=4) as store:
        store.allocate("2026-W32", "k")
        with store.engine.connect() as conn:  # type: ignore[attr-defined]
            shown = {
                name: conn.exec_driver_sql(f"SHOW {name}").scalar_one()
                for name in ("lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout", "search_path")
            }
    assert shown == {
        "lock_timeout": "1500ms",
        "statement_timeout": "5500ms",
        "idle_in_transaction_session_timeout": "5500ms",
        "search_path": "pg_catalog",
    }
