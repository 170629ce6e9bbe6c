"""A hook that turns an Airflow Connection into an episode store.

Task code in Airflow 3 may not touch Airflow's own metadata database, so the store is reached
through a Connection of its own: either this provider's ``idempotent_jobs_store`` type (host or
extra carries a file path, ``file://`` or ``postgresql://`` URL), or a plain ``postgres`` Connection.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from airflow.sdk import BaseHook

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from ..stores import EpisodeStore

__all__ = ["EpisodeStoreHook", "store_url_from_connection"]

#: Connection types that name a PostgreSQL server rather than a store URL.
POSTGRES_CONN_TYPES = frozenset({"postgres", "postgresql"})
#: libpq options worth carrying over from a ``postgres`` Connection's extra into the URL.
_LIBPQ_OPTIONS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name", "options")


def store_url_from_connection(conn: Connection) -> str:
    """The store URL a Connection describes (it may hold a password: never log it)."""
    conn_type = (conn.conn_type or "").lower()
    if conn_type in POSTGRES_CONN_TYPES:
        return _postgres_url(conn)
    extra = conn.extra_dejson
    for field in ("url", "path"):
        value = extra.get(field)
        if isinstance(value, str) and value.strip():
            return value.strip()
    if conn.host and conn.host.strip():
        return conn.host.strip()
    raise ValueError(
        f"connection {conn.conn_id!r} names no store: set its host (or extra 'path'/'url') "
        "to a directory, file:// URL or postgresql:// URL"
    )


def _postgres_url(conn: Connection) -> str:
    auth = ""
    if conn.login:
        auth = quote(conn.login, safe="")
        if conn.password:
            auth += ":" + quote(conn.password, safe="")
        auth += "@"
    host = conn.host or "localhost"
    port = f":{conn.port}" if conn.port else ""
    database = quote(conn.schema or "", safe="")
    extra = conn.extra_dejson
    options = {k: str(extra[k]) for k in _LIBPQ_OPTIONS if extra.get(k) not in (None, "")}
    query = f"?{urlencode(options)}" if options else ""
    return f"postgresql://{auth}{host}{port}/{database}{query}"


class EpisodeStoreHook(BaseHook):
    """Opens the episode store named by a Connection; the store is built on first use."""

    conn_name_attr = "store_conn_id"
    default_conn_name = "idempotent_jobs_store_default"
    conn_type = "idempotent_jobs_store"
    hook_name = "Idempotent Jobs Store"

    def __init__(self, store_conn_id: str = default_conn_name, *, lock_timeout: float | None = None) -> None:
        super().__init__()
        self.store_conn_id = store_conn_id
        self.lock_timeout = lock_timeout

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        from ._ui import STORE_FIELDS, field_behaviour

        return field_behaviour(STORE_FIELDS)

    def get_store_url(self) -> str:
        """The store's URL; may carry a password, so it is never logged."""
        return store_url_from_connection(self.get_connection(self.store_conn_id))

    @cached_property
    def store(self) -> EpisodeStore:
        from ..stores import open_store

        options: dict[str, Any] = {}
        if self.lock_timeout is not None:
            options["lock_timeout"] = self.lock_timeout
        opened = open_store(self.get_store_url(), **options)
        self.log.info("Episode store from connection %r: %s", self.store_conn_id, opened.location)
        return opened

    def get_conn(self) -> EpisodeStore:
        return self.store

    def test_connection(self) -> tuple[bool, str]:
        """Open the store and read from it (a lookup of a key nobody holds): nothing is written."""
        try:
            store = self.store
            store.find("airflow:test-connection")
        except Exception as exc:  # report any failure to the UI rather than raise
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"episode store reachable at {store.location}"

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.close()
            del self.__dict__["store"]
