"""The multi-host store: episodes as rows in PostgreSQL, one advisory lock per namespace.

See docs/design.md, "The PostgreSQL store" (the lock, READ COMMITTED, the tombstones, the bounds).
What this module adds: allocation is one call of ``allocate_episode`` (`_allocate`), one round
trip and its own transaction; the function looks the key up before taking the lock, so a retry
that finds its own episode stops there. It refuses to run outside READ COMMITTED, so the store
then sends ``BEGIN ISOLATION LEVEL READ COMMITTED; ...; COMMIT`` in one message. The call has a
pool of its own (`_connection.create_allocation_engine`: autocommit, no pre-ping, which would
double its round trips); a call whose connection breaks is not retried here, since it may have
committed: the caller's retry with the same key finds out (``reused=True``). With the caller's
engine, allocation uses that engine's pool as it is. Updates (the ledger, approvals) keep a locked
transaction of a few statements (`_session`), running the caller's Python rule between read and
write. This is the one boundary where database errors become this package's.
"""

from __future__ import annotations

import builtins
import secrets
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import PoolProxiedConnection

from ...allocation import checked_owner, refuse_another_dag
from ...episode import Episode
from ...errors import (
    IdempotentJobsError,
    InvalidConfiguration,
    StoreCorrupted,
    StoreMissing,
    StoreOutdated,
    StoreUnavailable,
)
from ...identity import EpisodeId, WeekId, validate_allocation_key, validate_fingerprint
from ...owner import Owner
from ...record_rules import CheckReport, DamagedRecord, EpisodeRule, WeekRead
from ..base import EpisodeStore, WeekLike
from ..url_parts import POSTGRES_SCHEMES
from . import _allocate, _schema
from ._connection import ANSWER_GRACE, NoAnswer, Timeouts, create_allocation_engine, create_engine
from ._context import StoreContext
from ._options import WHAT, check_namespace, check_seconds, parse_store_url
from ._session import PostgresSession

__all__ = ["PostgresEpisodeStore"]

#: lock_not_available: lock_timeout expired.
_LOCK_TIMEOUT: Final = "55P03"
#: query_canceled: statement_timeout expired (or a cancel request).
_STATEMENT_TIMEOUT: Final = "57014"
DEFAULT_LOCK_TIMEOUT: Final = 30.0
DEFAULT_STATEMENT_TIMEOUT: Final = 30.0
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
_IDLE: Final = psycopg.pq.TransactionStatus.IDLE
#: An update's transaction and the namespace's lock, in one message (parameters: lock_timeout in ms, lock key).
_BEGIN_LOCKED: Final = (
    "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT set_config('lock_timeout', %s, true), pg_advisory_xact_lock(%s)"
)


class PostgresEpisodeStore(EpisodeStore):
    """Episodes as rows of ``<schema>.episodes``, shared by every host that reaches the database.

    Options (each also a URL query parameter; an argument given here wins over the URL):
    ``namespace`` (default ``default``), ``schema`` (default ``idempotent_jobs``), and bounds in
    seconds: ``lock_timeout`` (waiting for the namespace's lock or a row lock, default 30),
    ``statement_timeout`` (a statement's work beyond its lock wait, default 30) and
    ``connect_timeout`` (default 10). No call waits longer than lock_timeout + statement_timeout
    + 1 s for any one answer from the server, even from a server that stopped answering: then
    it raises `StoreUnavailable`. The statement and client bounds apply to engines the store
    creates from a URL; with an ``Engine`` of the caller's only ``lock_timeout`` applies (per
    transaction).
    """

    def __init__(
        self,
        url_or_engine: str | Engine,
        *,
        namespace: str | None = None,
        schema: str | None = None,
        lock_timeout: float | None = None,
        statement_timeout: float | None = None,
        connect_timeout: float | None = None,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(url_or_engine, Engine):
            if url_or_engine.dialect.driver != "psycopg":
                raise InvalidConfiguration(WHAT, "engine", "use the psycopg 3 driver (postgresql+psycopg://)")
            parsed = None
        elif isinstance(url_or_engine, str):
            parsed = parse_store_url(url_or_engine, POSTGRES_SCHEMES)
        else:
            raise InvalidConfiguration(
                WHAT, "URL", f"must be a postgresql:// URL or an Engine, not {type(url_or_engine).__name__}"
            )

        def pick(name: str, given: Any, default: Any) -> Any:
            found = getattr(parsed, name) if parsed is not None else None
            return given if given is not None else (found if found is not None else default)

        self._namespace = check_namespace(pick("namespace", namespace, "default"))
        self.schema = _schema.check_schema(pick("schema", schema, _schema.DEFAULT_SCHEMA))
        self.tables = _schema.tables(self.schema)
        self.lock_timeout = check_seconds(
            "lock_timeout", pick("lock_timeout", lock_timeout, DEFAULT_LOCK_TIMEOUT), zero_ok=True
        )
        self.statement_timeout = check_seconds(
            "statement_timeout", pick("statement_timeout", statement_timeout, DEFAULT_STATEMENT_TIMEOUT), zero_ok=False
        )
        self.connect_timeout = check_seconds(
            "connect_timeout", pick("connect_timeout", connect_timeout, DEFAULT_CONNECT_TIMEOUT), zero_ok=False
        )
        self.timeouts = Timeouts(self.lock_timeout, self.statement_timeout, self.connect_timeout)
        if isinstance(url_or_engine, Engine):
            engine, self._owns_engine = url_or_engine, False
        else:
            assert parsed is not None
            engine, self._owns_engine = create_engine(parsed.url, self.timeouts, dict(engine_options or {})), True
        self.engine = engine
        #: Allocation's own pool (no pre-ping round trip: `_connection.create_allocation_engine`);
        #: None with an engine of the caller's, whose pool allocation then shares.
        self._allocator: Engine | None = None
        if parsed is not None:
            self._allocator = create_allocation_engine(parsed.url, self.timeouts, dict(engine_options or {}))
        # Each writing statement must see commits made while it waited for the lock.
        self._writer = engine.execution_options(isolation_level="READ COMMITTED")
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.lock_key = _schema.advisory_key("namespace", self.schema, self._namespace)
        self._location = engine.url.set(drivername="postgresql", password=None, query={}).render_as_string()
        #: What the helpers (`_session`, `_allocate`, `_check`) know of this store.
        self._context = StoreContext(engine, self.schema, self._namespace, self._location, self.lock_key, self.timeouts)
        self._schema_ready = False
        #: Set when a connection's default isolation turned out stricter than READ COMMITTED (`_allocate`).
        self.explicit_transaction = False
        #: This namespace's identity once read or committed; the one a session of this thread commits under.
        self._identity: str | None = None
        self._local = threading.local()

    # -- port ----------------------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def location(self) -> str:
        return self._location

    def allocate(
        self, week: WeekLike, allocation_key: str, fingerprint: str | None = None, *, owner: Owner | None = None
    ) -> Episode:
        """The rule of `EpisodeStore.allocate`, run by the server in one round trip (``allocate_episode``).

        The owner travels as the new row's ``metadata`` (the function's ``p_metadata``), so it is
        inserted by the same statement. A reused holder of another DAG is refused here, after the
        call: a reuse writes nothing, so refusing after it changes nothing either.
        """
        week_id = WeekId.parse(week)
        key = validate_allocation_key(allocation_key)
        fp = validate_fingerprint(fingerprint)
        who = checked_owner(owner)
        self.ensure_schema()
        new_identity = None if self._identity is not None else secrets.token_hex(16)
        with self._translated():
            try:
                with self._allocation_connection() as conn:
                    call = (self._context, conn, week_id, key, fp, new_identity, who)
                    try:
                        done = _allocate.call(*call, explicit=self.explicit_transaction)
                    except _allocate.NeedsReadCommitted:
                        # From now on this store says READ COMMITTED itself, on this connection first.
                        self.explicit_transaction = True
                        done = _allocate.call(*call, explicit=True)
            except psycopg.Error as exc:  # translated once the connection is back in the pool, or discarded
                raise self._translate(exc) from exc
        if done.identity is not None:
            self._identity = done.identity
        if done.episode.reused:
            refuse_another_dag(key, who, done.episode)
        return done.episode

    @contextmanager
    def _allocation_connection(self) -> Iterator[psycopg.Connection[Any]]:
        """An idle autocommit connection for one call: from the allocation pool, else the caller's engine.

        A connection that broke during the call is discarded, never handed out again. There is no
        retry here: a call whose connection broke may have committed, and the caller's retry (the
        same key) is what finds out, as after any other lost answer.
        """
        if self._allocator is None:  # an engine of the caller's: its pool and its pre-ping
            with self._reader.connect() as connection, _discarded_if_broken(connection.connection) as conn:
                yield conn
            return
        pooled = self._allocator.raw_connection()
        try:
            with _discarded_if_broken(pooled) as conn:
                yield conn
        finally:
            pooled.close()

    @contextmanager
    def _session(self) -> Iterator[PostgresSession]:
        self.ensure_schema()
        # The transaction is delimited by hand on an autocommit connection, so that BEGIN and the
        # lock travel in one message (simple protocol: the client binds the lock's two arguments).
        # The store's own connections carry lock_timeout already; an Engine of the caller's does not.
        lock = (str(self.timeouts.lock_ms), self.lock_key)
        with self._translated(), self._reader.connect() as pooled:
            conn = pooled.connection.driver_connection
            assert isinstance(conn, psycopg.Connection) and conn.autocommit
            try:
                with psycopg.ClientCursor(conn) as client:  # bound by the client: one simple-protocol message
                    client.execute(_BEGIN_LOCKED, lock)
                session = PostgresSession(self._context, conn)
                identity = self._identity or self._identity_for(session)
                self._local.identity = identity
                try:
                    yield session
                    session.commit()
                    self._identity = identity
                except BaseException:
                    try:
                        conn.execute(b"ROLLBACK")
                    except psycopg.Error:
                        pooled.invalidate()  # the caller's error matters more than this one
                    raise
                finally:
                    self._local.identity = None
            except psycopg.Error as exc:
                if conn.broken or conn.closed:
                    pooled.invalidate(exc)
                raise self._translate(exc) from exc

    @property
    def identity(self) -> str:
        """This namespace's random identity (``store_identity``): idempotency tokens derive from it.

        Created with the namespace's first committed write, recorded in the schema, and never
        changed after (a trigger refuses it), so two stores never share a token, even when both
        use the namespace ``default``. Asking for it before any write creates it.
        """
        if self._identity is not None:
            return self._identity
        pending = getattr(self._local, "identity", None)
        if pending is not None:  # asked inside this thread's own session: it commits with that session
            return str(pending)
        with self._session():
            pass
        assert self._identity is not None
        return self._identity

    def _identity_for(self, session: PostgresSession) -> str:
        """The identity a session commits under: the recorded one, or a new one it records on commit."""
        found = session.identity()
        if found is not None:
            self._identity = found
            return found
        created = secrets.token_hex(16)
        session.create_identity(created)
        return created

    def _read(self, episode_id: EpisodeId) -> Episode | None:
        rows = self._select(self._context.sql.load, episode_id=str(episode_id))
        return self._context.episode(rows[0]) if rows else None

    def _read_holders(self, allocation_key: str) -> builtins.list[Episode]:
        return [self._context.episode(row) for row in self._select(self._context.sql.holders, key=allocation_key)]

    def _read_all(self, week: WeekId | None) -> builtins.list[Episode]:
        rows = (
            self._select(self._context.sql.episodes)
            if week is None
            else self._select(self._context.sql.week, week_id=str(week))
        )
        return [self._context.episode(row) for row in rows]

    def _read_week(self, week: WeekId) -> WeekRead:
        read = WeekRead([])
        for row in self._select(self._context.sql.week, week_id=str(week)):
            try:
                read.episodes.append(self._context.episode(row))
            except StoreCorrupted as exc:
                read.damaged.append(DamagedRecord(str(row["episode_id"]), exc.where, exc.reason))
        return read

    def close(self) -> None:
        if self._owns_engine:
            self.engine.dispose()
        if self._allocator is not None:
            self._allocator.dispose()

    def check(self, ids: Sequence[EpisodeId], rules: Sequence[EpisodeRule] = ()) -> CheckReport:
        """Read-only verification (``idempotent-jobs check``): a list of `check.Problem`."""
        from ._check import check_postgres_store

        with self._translated():
            return check_postgres_store(self._context, ids, rules)

    # -- schema --------------------------------------------------------------------------------
    def ensure_schema(self) -> None:
        """Create or upgrade this store's schema, once per store object (cheap when up to date)."""
        if self._schema_ready:
            return
        with self._translated(), self._writer.begin() as conn:
            found = _schema.current_version(conn, self.schema)
            if found != _schema.LATEST_VERSION:
                _schema.migrate(conn, self.schema, where=self.where(), lock_timeout_ms=self.timeouts.lock_ms)
        self._schema_ready = True

    def require_existing(self) -> None:
        """Read the schema's version only; once it is this code's, reads skip creating or upgrading it."""
        if self._schema_ready:
            return
        with self._translated(), self._reader.connect() as conn:
            found = _schema.current_version(conn, self.schema)
        if found is None:
            raise StoreMissing(
                f"no episode store in schema {self.schema} of {self._location}: nothing was ever written there "
                "(readers create none)"
            )
        if found > _schema.LATEST_VERSION:
            raise _schema.newer_schema(self.where(), found)
        if found != _schema.LATEST_VERSION:
            raise StoreOutdated(f"in schema {self.schema} of {self._location}", found, _schema.LATEST_VERSION)
        self._schema_ready = True

    # -- rows ----------------------------------------------------------------------------------
    def where(self, row: str | None = None, table: str = "episodes") -> str:
        """A place in this store for messages: the database, schema, table, namespace and row."""
        return self._context.where(row, table)

    def episode_from_row(self, data: Mapping[Any, Any]) -> Episode:
        """Validate one row of ``episodes`` (JSON columns as text); anything off is `StoreCorrupted` naming it."""
        return self._context.episode(data)

    def _select(self, sql: str, **params: Any) -> builtins.list[Mapping[Any, Any]]:
        """Rows of this namespace by one of `_statements`, read without the lock."""
        self.ensure_schema()
        with self._translated(), self._reader.connect() as conn:
            return [row._mapping for row in conn.exec_driver_sql(sql, {"namespace": self._namespace, **params})]

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
        if state == _LOCK_TIMEOUT:
            return StoreUnavailable(
                f"could not lock the PostgreSQL store {self._location} (namespace {self._namespace}) "
                f"within {self.lock_timeout:g}s: another client holds it"
            )
        if state == _STATEMENT_TIMEOUT:
            return StoreUnavailable(
                f"PostgreSQL store {self._location}: a statement ran longer than "
                f"{self.timeouts.statement_ms / 1000:g}s (lock_timeout + statement_timeout) and was cancelled"
            )
        if isinstance(orig, NoAnswer):
            return StoreUnavailable(
                f"PostgreSQL store {self._location} is unavailable: the server did not answer within "
                f"{self.timeouts.answer:g}s (lock_timeout + statement_timeout + {ANSWER_GRACE:g}s)"
            )
        if lost or isinstance(orig, (psycopg.OperationalError, psycopg.InterfaceError)):
            return StoreUnavailable(f"PostgreSQL store {self._location} is unavailable: {_one_line(orig)}")
        if state is not None and state.startswith("42"):
            return StoreCorrupted(self.where(), f"schema does not match this code: {_one_line(orig)}")
        return StoreUnavailable(f"PostgreSQL store {self._location}: database error {state}: {_one_line(orig)}")


@contextmanager
def _discarded_if_broken(pooled: PoolProxiedConnection) -> Iterator[psycopg.Connection[Any]]:
    """The pooled connection's psycopg connection, discarded unless it goes back idle and whole.

    The allocation pool does not roll back on return (`_connection.create_allocation_engine`): a
    connection left broken, or inside a transaction (an interrupted explicit call), is invalidated
    here instead, so the next call never starts inside someone else's transaction.
    """
    conn = pooled.driver_connection
    assert isinstance(conn, psycopg.Connection) and conn.autocommit
    try:
        yield conn
    except BaseException as exc:
        if conn.broken or conn.closed or conn.info.transaction_status != _IDLE:
            pooled.invalidate(exc)
        raise
    if conn.info.transaction_status != _IDLE:
        pooled.invalidate()


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
