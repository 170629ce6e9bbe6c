"""The multi-host store: episodes as rows in PostgreSQL, one advisory lock per namespace.

For Celery or Kubernetes executors, whose workers allocate from several hosts at once (a file
lock protects one host only). Allocation is one READ COMMITTED transaction::

    BEGIN; SELECT set_config('lock_timeout', ..., true), pg_advisory_xact_lock(<namespace key>)
    -- from here on no other client of this namespace is between its read and its write
    SELECT ... WHERE allocation_key = %(key)s          (holders)
    SELECT greatest(weeks.highest_sequence, max(episodes.sequence))
    INSERT weeks (upsert of the high-water mark) + INSERT episodes   (one statement,
    COMMIT                                            pipelined with the commit point)

The advisory lock, not ``FOR UPDATE``, serializes it: a row lock cannot cover a week that has no
rows yet. READ COMMITTED matters: each statement after the lock sees every commit made before
the lock was granted (REPEATABLE READ would keep the snapshot taken before the wait). Unique
constraints on ``(namespace, week_id, sequence)`` and ``(namespace, allocation_key)`` are the
backstop. A connection lost before COMMIT leaves nothing: the transaction simply never happened.
"""

from __future__ import annotations

import builtins
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Engine, Row
from sqlalchemy.engine.url import URL, make_url

from ..check import CheckReport, EpisodeRule
from ..episode import Episode
from ..errors import (
    IdempotentJobsError,
    InvalidIdentifier,
    StoreCorrupted,
    StoreUnavailable,
)
from ..identity import EpisodeId, WeekId
from . import POSTGRES_SCHEMES, pg_schema
from .base import EpisodeStore
from .pg_session import PostgresSession

__all__ = ["PostgresEpisodeStore", "PostgresSession"]

_NAMESPACE_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
#: lock_not_available (lock_timeout), query_canceled (statement_timeout).
_TIMEOUTS: Final = frozenset({"55P03", "57014"})


def engine_url(text: str) -> tuple[URL, dict[str, str]]:
    """The psycopg 3 URL for ``text``, and the store options found in its query (``namespace``, ``schema``)."""
    try:
        url = make_url(text)
    except (sa.exc.ArgumentError, ValueError) as exc:
        raise InvalidIdentifier("store URL", _without_password(text), "not a valid postgresql:// URL") from exc
    if url.drivername not in POSTGRES_SCHEMES:
        raise InvalidIdentifier("store URL", url.render_as_string(), "use postgresql:// (driven by psycopg 3)")
    # make_url drops ``?namespace=`` silently: an empty value would then mean the default namespace,
    # another pipeline's jobs. Read the raw query for that case.
    for name, value in parse_qsl(urlsplit(text).query, keep_blank_values=True):
        if name in ("namespace", "schema") and not value:
            raise InvalidIdentifier(name, value, "must not be empty (leave it out for the default)")
    options = {k: str(url.query[k]) for k in ("namespace", "schema") if k in url.query}
    return url.set(drivername="postgresql+psycopg").difference_update_query(options), options


def _without_password(text: str) -> str:
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1@", text)


class PostgresEpisodeStore(EpisodeStore):
    """Episodes as rows of ``<schema>.episodes``, shared by every host that reaches the database."""

    def __init__(
        self,
        url_or_engine: str | Engine,
        *,
        namespace: str | None = None,
        schema: str | None = None,
        lock_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        options: dict[str, str] = {}
        if isinstance(url_or_engine, Engine):
            if url_or_engine.dialect.driver != "psycopg":
                where = url_or_engine.url.render_as_string()
                raise InvalidIdentifier("store engine", where, "use the psycopg 3 driver (postgresql+psycopg://)")
            engine, self._owns_engine = url_or_engine, False
        else:
            url, options = engine_url(url_or_engine)
            settings: dict[str, Any] = {
                "pool_pre_ping": True,
                "connect_args": {
                    "connect_timeout": max(1, round(connect_timeout)),
                    "application_name": "idempotent-jobs",
                },
            }
            settings.update(engine_options or {})
            engine, self._owns_engine = sa.create_engine(url, **settings), True
        self._namespace = namespace if namespace is not None else options.get("namespace", "default")
        if not _NAMESPACE_RE.fullmatch(self._namespace):
            raise InvalidIdentifier("namespace", self._namespace, "use 1..128 letters, digits and _ . : -")
        self.schema = schema if schema is not None else options.get("schema", pg_schema.DEFAULT_SCHEMA)
        self.tables = pg_schema.tables(self.schema)
        if not math.isfinite(lock_timeout) or lock_timeout < 0:
            # NaN or infinity would fail later, in the middle of a transaction, as a traceback.
            raise InvalidIdentifier("lock timeout", lock_timeout, "must be a finite number of seconds >= 0")
        self.lock_timeout = lock_timeout
        self.engine = engine
        # Each writing statement must see commits made while it waited for the lock.
        self._writer = engine.execution_options(isolation_level="READ COMMITTED")
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._lock_key = pg_schema.advisory_key("namespace", self.schema, self._namespace)
        self._location = engine.url.set(drivername="postgresql", password=None, query={}).render_as_string()
        self._schema_ready = False

    # -- port ----------------------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def location(self) -> str:
        return self._location

    @property
    def lock_timeout_ms(self) -> int:
        # lock_timeout = 0 means "wait forever" in PostgreSQL; keep 0 meaning "do not wait".
        return max(1, round(self.lock_timeout * 1000))

    @contextmanager
    def _session(self) -> Iterator[PostgresSession]:
        self.ensure_schema()
        # The transaction is delimited by hand on an autocommit connection, so that BEGIN and the
        # lock travel in one message (simple protocol: the lock's arguments are our own integers).
        begin = (
            "BEGIN ISOLATION LEVEL READ COMMITTED; "
            f"SELECT set_config('lock_timeout', '{self.lock_timeout_ms:d}', true), "
            f"pg_advisory_xact_lock({self._lock_key:d})"
        )
        with self._translated(), self._reader.connect() as pooled:
            conn = pooled.connection.driver_connection
            assert isinstance(conn, psycopg.Connection) and conn.autocommit
            try:
                conn.execute(begin.encode())
                session = PostgresSession(self, conn)
                try:
                    yield session
                    session.commit()
                except BaseException:
                    try:
                        conn.execute(b"ROLLBACK")
                    except psycopg.Error:
                        pooled.invalidate()  # the caller's error matters more than this one
                    raise
            except psycopg.Error as exc:
                if conn.broken or conn.closed:
                    pooled.invalidate(exc)
                raise self._translate(exc) from exc

    def _read(self, episode_id: EpisodeId) -> Episode | None:
        episodes = self.tables.episodes
        rows = self._select(episodes.c.episode_id == str(episode_id))
        return self.episode_from_row(rows[0]._mapping) if rows else None

    def _read_holders(self, allocation_key: str) -> builtins.list[Episode]:
        rows = self._select(self.tables.episodes.c.allocation_key == allocation_key)
        return [self.episode_from_row(row._mapping) for row in rows]

    def _read_all(self, week: WeekId | None) -> builtins.list[Episode]:
        where = sa.true() if week is None else self.tables.episodes.c.week_id == str(week)
        return [self.episode_from_row(row._mapping) for row in self._select(where)]

    def close(self) -> None:
        if self._owns_engine:
            self.engine.dispose()

    def check(self, ids: Sequence[EpisodeId], rules: Sequence[EpisodeRule] = ()) -> CheckReport:
        """Read-only verification (``idempotent-jobs check``): a list of `check.Problem`."""
        from .pg_check import check_postgres_store

        with self._translated():
            return check_postgres_store(self, ids, rules)

    # -- schema --------------------------------------------------------------------------------
    def ensure_schema(self) -> None:
        """Create or upgrade this store's schema, once per store object (cheap when up to date)."""
        if self._schema_ready:
            return
        with self._translated(), self._writer.begin() as conn:
            found = pg_schema.current_version(conn, self.schema)
            if found != pg_schema.LATEST_VERSION:
                pg_schema.migrate(conn, self.schema, where=self.where(), lock_timeout_ms=self.lock_timeout_ms)
        self._schema_ready = True

    # -- rows ----------------------------------------------------------------------------------
    def where(self, episode_id: str | None = None) -> str:
        """A place in this store for messages: the database, schema, namespace and row."""
        row = f"/{episode_id}" if episode_id else ""
        return f"{self._location} {self.schema}.episodes[{self._namespace}{row}]"

    def episode_from_row(self, data: Mapping[Any, Any]) -> Episode:
        """Validate one row of ``episodes``; anything off is `StoreCorrupted` naming the row."""
        where = self.where(str(data["episode_id"]))
        submission, metadata = data["submission"], data["metadata"]
        if not isinstance(submission, dict):
            raise StoreCorrupted(where, "submission is not a JSON object")
        if not isinstance(metadata, dict):
            raise StoreCorrupted(where, "metadata is not a JSON object")
        if submission.get("state") != data["submission_state"]:
            raise StoreCorrupted(where, "submission_state column disagrees with the submission record")
        record = {
            "schema_version": data["schema_version"],
            "episode_id": data["episode_id"],
            "week_id": data["week_id"],
            "sequence": data["sequence"],
            "allocation_key": data["allocation_key"],
            "fingerprint": data["fingerprint"],
            "status": data["status"],
            "created_at": data["created_at"],
            "updated_at": data["updated_at"],
            "submission": submission,
            "metadata": metadata,
        }
        return Episode.from_record(record, where)

    def _select(self, condition: sa.ColumnElement[bool]) -> builtins.list[Row[Any]]:
        self.ensure_schema()
        episodes = self.tables.episodes
        query = sa.select(episodes).where(episodes.c.namespace == self._namespace, condition)
        with self._translated(), self._reader.connect() as conn:
            return list(conn.execute(query))

    # -- errors --------------------------------------------------------------------------------
    @contextmanager
    def _translated(self) -> Iterator[None]:
        """The one boundary where database errors become this package's errors."""
        try:
            yield
        except IdempotentJobsError:
            raise
        except sa.exc.DBAPIError as exc:
            raise self._translate(exc.orig, lost=exc.connection_invalidated) from exc
        except sa.exc.SQLAlchemyError as exc:
            raise StoreUnavailable(f"PostgreSQL store {self._location}: {_one_line(exc)}") from exc

    def _translate(self, orig: BaseException | None, *, lost: bool = False) -> IdempotentJobsError:
        state = getattr(orig, "sqlstate", None)
        if state in _TIMEOUTS:
            return StoreUnavailable(
                f"could not lock the PostgreSQL store {self._location} (namespace {self._namespace}) "
                f"within {self.lock_timeout:g}s: another client holds it"
            )
        if lost or isinstance(orig, (psycopg.OperationalError, psycopg.InterfaceError)):
            return StoreUnavailable(f"PostgreSQL store {self._location} is unavailable: {_one_line(orig)}")
        if state is not None and state.startswith("42"):
            return StoreCorrupted(self.where(), f"schema does not match this code: {_one_line(orig)}")
        return StoreUnavailable(f"PostgreSQL store {self._location}: database error {state}: {_one_line(orig)}")


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
