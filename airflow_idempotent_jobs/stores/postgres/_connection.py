"""The store's own connections to PostgreSQL: bounded by the client, with the session settings fixed at connect.

PostgreSQL's ``statement_timeout`` and ``lock_timeout`` run inside the backend. A backend that is
stopped (SIGSTOP, a frozen VM, a debugger) or a server that accepted the TCP connection and never
answers cannot fire them nor answer a cancel request, and the kernel still acknowledges every
packet, so TCP keepalives and ``tcp_user_timeout`` see a healthy peer. Only the client can bound
that wait: `BoundedConnection` gives every wait for the server a deadline (psycopg runs every
round trip of a connection, pre-ping, pipeline and COMMIT included, through ``Connection.wait``).
On expiry it closes the connection, which is mid-protocol and cannot be reused; SQLAlchemy's pool
sees a closed connection and discards it, and the store reports `StoreUnavailable`.

The server-side settings travel in the startup packet (libpq ``options``): set once per
connection, no round trip on any later transaction.

`create_allocation_engine` gives allocation a pool of its own without SQLAlchemy's pre-ping (a
round trip per checkout, as long as the server's whole share of an allocation that finds its key).
Its checkout asks the kernel instead (`spoke_while_idle`): an idle connection has nothing to say,
so one whose socket is readable was closed by the server (``pg_terminate_backend``, a restart: a
FATAL message, then end of stream) or by the network, and is replaced by a new one before use.
That is what the ping finds, without the round trip; a connection that dies between the check
and the call fails that call, as one dying between ping and call does.
"""

from __future__ import annotations

import math
import select
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.engine.url import URL

from ... import safe_json

__all__ = [
    "ANSWER_GRACE",
    "APPLICATION_NAME",
    "BoundedConnection",
    "NoAnswer",
    "Timeouts",
    "create_allocation_engine",
    "create_engine",
    "spoke_while_idle",
]

#: What ``pg_stat_activity.application_name`` shows for the store's sessions (unless the URL says otherwise).
APPLICATION_NAME: Final = "idempotent-jobs"
#: Seconds the client waits beyond the server's own timeouts, so that a live server's error arrives first.
ANSWER_GRACE: Final = 1.0
#: What psycopg's ``Connection.wait`` raises when its ``timeout`` expires (psycopg >= 3.2; private name).
_WAIT_TIMEOUT: Final[type[BaseException]] = psycopg.errors._WaitTimeout
RV = TypeVar("RV")


class NoAnswer(psycopg.OperationalError):
    """The server did not answer within the store's bound; the connection was closed."""


class BoundedConnection(psycopg.Connection[Any]):
    """A psycopg connection whose every wait for the server ends after ``answer_timeout`` seconds."""

    #: Seconds any one answer may take; None: psycopg's own behaviour (wait for ever).
    answer_timeout: float | None = None

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        bound = self.answer_timeout
        if bound is None or timeout is not None:  # psycopg's own timed waits (cancel, notifies) keep theirs
            return super().wait(gen, interval, timeout)
        try:
            return super().wait(gen, interval, bound)
        except _WAIT_TIMEOUT:
            self.close()
            raise NoAnswer(f"the server did not answer within {bound:g}s") from None


@dataclass(frozen=True)
class Timeouts:
    """The store's bounds, in seconds (checked by `_options.check_seconds`)."""

    #: Longest wait for a lock: the namespace's advisory lock, a row lock, a table lock.
    lock: float
    #: Longest a statement may run beyond its lock wait.
    statement: float
    #: Longest a new connection may take (libpq rounds it up to whole seconds, at least 2).
    connect: float

    @property
    def lock_ms(self) -> int:
        # PostgreSQL reads lock_timeout = 0 as "wait for ever"; keep 0 meaning "do not wait".
        return max(1, round(self.lock * 1000))

    @property
    def statement_ms(self) -> int:
        """The server's ``statement_timeout``: a statement may wait for its lock, then work."""
        return self.lock_ms + max(1, round(self.statement * 1000))

    @property
    def answer(self) -> float:
        """The client's bound on any one answer from the server."""
        return self.statement_ms / 1000 + ANSWER_GRACE

    def session_options(self) -> str:
        """libpq ``options`` for the store's sessions.

        ``search_path``: only ``pg_catalog``, so no schema can shadow the functions the store calls
        unqualified (``pg_advisory_xact_lock``, ``set_config``); the store qualifies all its own names.
        ``idle_in_transaction_session_timeout``: a client of ours that stops while it holds the
        namespace's lock (a frozen worker) loses its session instead of blocking everyone else.
        """
        return (
            f"-c search_path=pg_catalog -c lock_timeout={self.lock_ms} -c statement_timeout={self.statement_ms}"
            f" -c idle_in_transaction_session_timeout={self.statement_ms}"
        )


def create_engine(url: URL, timeouts: Timeouts, engine_options: dict[str, Any] | None = None) -> Engine:
    """An engine whose connections are `BoundedConnection`, parse JSON with `safe_json`, and carry the settings."""
    connect_args: dict[str, Any] = {
        "connect_timeout": max(2, math.ceil(timeouts.connect)),
        "options": timeouts.session_options(),
    }
    if "application_name" not in url.query:
        connect_args["application_name"] = APPLICATION_NAME
    settings: dict[str, Any] = {
        "pool_pre_ping": True,
        "json_deserializer": safe_json.loads,
        "connect_args": connect_args,
    }
    settings.update(engine_options or {})
    engine = sa.create_engine(url, **settings)

    @sa.event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, record: Any, cargs: Any, cparams: Any) -> BoundedConnection:
        conn = BoundedConnection.connect(*cargs, **cparams)
        conn.answer_timeout = timeouts.answer
        return conn

    return engine


def create_allocation_engine(url: URL, timeouts: Timeouts, engine_options: dict[str, Any] | None = None) -> Engine:
    """`create_engine`'s connections in autocommit, checked out without a round trip (`spoke_while_idle`).

    No rollback on return either (in autocommit it has nothing to do): the store discards any
    connection that does not come back idle (`_store._discarded_if_broken`).
    """
    options = {
        **(engine_options or {}),
        "pool_pre_ping": False,
        "isolation_level": "AUTOCOMMIT",
        "pool_reset_on_return": None,
    }
    engine = create_engine(url, timeouts, options)

    @sa.event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if spoke_while_idle(dbapi_connection):
            # The pool closes it and hands out a new connection in its place (SQLAlchemy's own retry).
            raise sa.exc.DisconnectionError("the server closed this idle connection")

    return engine


def spoke_while_idle(conn: psycopg.Connection[Any]) -> bool:
    """True if an idle connection is closed, broken, or has anything to read (the server's goodbye, or EOF)."""
    if conn.closed or conn.broken:
        return True
    fd = conn.fileno()
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])
