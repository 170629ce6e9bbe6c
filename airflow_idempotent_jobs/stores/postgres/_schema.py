"""The PostgreSQL store's schema: its numbered migrations, and its tables as SQLAlchemy Core objects.

The migrations (``sql/NNNN_name.sql``, loaded from this package with `importlib.resources`) are the
source of truth for the database; the `Tables` below describe what the code expects to find (the
``episodes`` table from `_rows`, which owns its columns). A test applies every migration and
compares the result with `Tables`, so the two cannot drift apart. Statements are `_statements`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import re
from dataclasses import dataclass
from typing import Final

from sqlalchemy import TIMESTAMP, Column, Connection, Integer, MetaData, Table, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import DBAPIError

from ...errors import InvalidConfiguration, StoreTooNew
from ._rows import episodes_table, submission_state_type

__all__ = [
    "DEFAULT_SCHEMA",
    "LATEST_VERSION",
    "MIGRATIONS",
    "Migration",
    "Tables",
    "advisory_key",
    "check_schema",
    "current_version",
    "migrate",
    "newer_schema",
    "quote_schema",
    "tables",
]

DEFAULT_SCHEMA: Final = "idempotent_jobs"
_SCHEMA_RE: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")
#: Schemas that belong to PostgreSQL (``pg_*`` too) or to everyone (``public``, where another
#: application's ``schema_version`` table would be taken for the store's).
_FOREIGN_SCHEMAS: Final = frozenset({"public", "information_schema"})
_MIGRATION_RE: Final = re.compile(r"([0-9]{4})_([a-z0-9_]+)\.sql")


@dataclass(frozen=True)
class Migration:
    """One numbered step of the schema; applied in order, once, inside one transaction."""

    version: int
    name: str
    sql: str


def _load_migrations() -> tuple[Migration, ...]:
    folder = importlib.resources.files(__package__).joinpath("sql")
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION_RE.fullmatch(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..N without gaps, found {[m.version for m in found]}")
    return tuple(found)


#: Every migration shipped with this package, oldest first.
MIGRATIONS: Final = _load_migrations()
#: The schema version this code reads and writes.
LATEST_VERSION: Final = MIGRATIONS[-1].version


def check_schema(schema: object) -> str:
    """A schema the store may create and own: a plain lowercase name, not PostgreSQL's nor ``public``."""
    if not isinstance(schema, str) or not _SCHEMA_RE.fullmatch(schema):
        shown = repr(schema)[:60]
        raise InvalidConfiguration(
            "PostgreSQL store", "schema", f"{shown}: use lowercase letters, digits and _ (at most 63)"
        )
    if schema in _FOREIGN_SCHEMAS or schema.startswith("pg_"):
        raise InvalidConfiguration(
            "PostgreSQL store", "schema", f"{schema!r} is not the store's to write into: give it a schema of its own"
        )
    return schema


def quote_schema(schema: str) -> str:
    """The schema name, checked and quoted for use in SQL text (it cannot be a bound parameter)."""
    return f'"{check_schema(schema)}"'


def advisory_key(*parts: str) -> int:
    """A signed 64-bit key for ``pg_advisory_xact_lock``, the same in every process and host."""
    digest = hashlib.sha256("\0".join(("airflow-idempotent-jobs", *parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@dataclass(frozen=True)
class Tables:
    """The store's tables in one schema."""

    schema: str
    metadata: MetaData
    schema_version: Table
    weeks: Table
    episodes: Table
    submission_transitions: Table
    store_identity: Table
    #: One row per episode row deleted (version 5): its key fails closed until the tombstone goes.
    episode_tombstones: Table


@functools.lru_cache(maxsize=16)
def tables(schema: str) -> Tables:
    """The tables the code expects in ``schema`` (what the migrations must have created)."""
    quote_schema(schema)
    metadata = MetaData(schema=schema)
    state = submission_state_type(schema)
    return Tables(
        schema=schema,
        metadata=metadata,
        schema_version=Table(
            "schema_version",
            metadata,
            Column("version", Integer, primary_key=True, autoincrement=False),
            Column("name", Text, nullable=False),
            Column("applied_at", TIMESTAMP(timezone=True), nullable=False),
        ),
        weeks=Table(
            "weeks",
            metadata,
            Column("namespace", Text, primary_key=True),
            Column("week_id", Text, primary_key=True),
            Column("highest_sequence", Integer, nullable=False),
        ),
        episodes=episodes_table(metadata, state),
        submission_transitions=Table(
            "submission_transitions",
            metadata,
            Column("from_state", state, primary_key=True),
            Column("to_state", state, primary_key=True),
        ),
        store_identity=Table(
            "store_identity",
            metadata,
            Column("namespace", Text, primary_key=True),
            Column("identity", Text, nullable=False),
            Column("created_at", TIMESTAMP(timezone=True), nullable=False),
        ),
        episode_tombstones=Table(
            "episode_tombstones",
            metadata,
            Column("namespace", Text, primary_key=True),
            Column("episode_id", Text, primary_key=True),
            Column("week_id", Text, nullable=False),
            Column("sequence", Integer, nullable=False),
            Column("allocation_key", Text, nullable=False),
            Column("record", JSONB, nullable=False),
            Column("deleted_at", TIMESTAMP(timezone=True), nullable=False),
            Column("deleted_by", Text, nullable=False),
        ),
    )


# The version table is created before any migration runs, so that "which migrations ran" can
# always be asked; it is the one table no migration creates.
_VERSION_TABLE_SQL: Final = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.schema_version (
    version    integer     NOT NULL,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT schema_version_pkey PRIMARY KEY (version)
);
"""


def current_version(conn: Connection, schema: str) -> int | None:
    """The highest migration applied in ``schema``; None when the store was never created there.

    A ``schema_version`` table that is not the store's (other columns, or migrations of other
    names: another application's) is `InvalidConfiguration`: its numbers mean nothing here.
    """
    quoted = quote_schema(schema)
    # A query on the catalog, not to_regclass(): to_regclass() may answer from this backend's catalog
    # cache, stale until the next relation lock, so it can miss a schema another client just created.
    columns = conn.exec_driver_sql(
        "SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_catalog.pg_attribute a"
        " JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %(schema)s AND c.relname = 'schema_version' AND a.attnum > 0 AND NOT a.attisdropped",
        {"schema": schema},
    ).scalar_one()
    if columns is None:
        return None
    ours = columns == ["version", "name", "applied_at"]
    applied = conn.exec_driver_sql(f"SELECT version, name FROM {quoted}.schema_version").all() if ours else None
    known = {m.version: m.name for m in MIGRATIONS}
    if applied is None or any(version in known and known[version] != name for version, name in applied):
        raise InvalidConfiguration(
            "PostgreSQL store",
            "schema",
            f"{schema!r} holds a schema_version table that is not the store's: give the store a schema of its own",
        )
    return max((int(version) for version, _ in applied), default=None)


def newer_schema(where: str, found: int) -> StoreTooNew:
    """What every process of this release says of a schema a later release wrote: no code here can
    read or migrate it, so the only way on is a newer package (on every host that uses the store)."""
    from ..._version import __version__

    return StoreTooNew(where, found, LATEST_VERSION, __version__)


def migrate(conn: Connection, schema: str, *, where: str, lock_timeout_ms: int, target: int = LATEST_VERSION) -> int:
    """Bring ``schema`` to `LATEST_VERSION` in the caller's transaction; returns the version found first.

    Serialized across clients by an advisory lock, so concurrent first uses create it once.
    Refuses (`StoreTooNew`, a `StoreCorrupted`) a schema newer than this code. ``target``: stop at that version
    (the upgrade tests build an older store with it).
    """
    quoted = quote_schema(schema)
    conn.exec_driver_sql(
        "SELECT set_config('lock_timeout', %(ms)s, true), pg_advisory_xact_lock(%(key)s)",
        {"ms": str(lock_timeout_ms), "key": advisory_key("migrate", schema)},
    )
    found = current_version(conn, schema)
    if found is not None and found > LATEST_VERSION:
        raise newer_schema(where, found)
    if found is None:
        _refuse_a_schema_in_use(conn, schema)
    if found is not None and found >= target:
        return found
    _run_script(conn, _VERSION_TABLE_SQL.replace("{schema}", quoted))
    insert = f"INSERT INTO {quoted}.schema_version (version, name) VALUES (%(version)s, %(name)s)"
    for step in MIGRATIONS:
        if (found is None or step.version > found) and step.version <= target:
            _run_script(conn, step.sql.replace("{schema}", quoted))
            conn.exec_driver_sql(insert, {"version": step.version, "name": step.name})
    return found or 0


def _refuse_a_schema_in_use(conn: Connection, schema: str) -> None:
    """The store creates its tables only in an empty schema: one of another application is not its to share."""
    held = conn.exec_driver_sql(
        "SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %(schema)s",
        {"schema": schema},
    ).scalar_one()
    if held:
        raise InvalidConfiguration(
            "PostgreSQL store",
            "schema",
            f"{schema!r} already holds {held} tables, views or sequences that are not the store's: "
            "give the store a schema of its own",
        )


def _run_script(conn: Connection, script: str) -> None:
    """Run a multi-statement SQL script in the connection's transaction (no parameters, no ``%`` parsing)."""
    driver = conn.connection.driver_connection
    assert driver is not None
    try:
        driver.execute(script)
    except driver.Error as exc:  # the driver's own error: wrap it as SQLAlchemy would
        raise DBAPIError.instance(script[:200], None, exc, type(driver).Error) from exc
