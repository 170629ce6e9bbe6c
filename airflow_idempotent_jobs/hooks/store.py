"""A hook that turns a task's store arguments, or an Airflow Connection, into an episode store.

Task code in Airflow 3 may not touch Airflow's own metadata database, so the store is reached
through a Connection of its own: either this provider's ``idempotent_jobs_store`` type (host or
extra carries a file path, ``file://`` URL, or ``postgresql://`` URL without credentials, which come
from the login and password fields), or a plain ``postgres`` Connection. The operators' ``hook``
resolves their store here: ``store=``, ``store_conn_id=``, the deployment's ``[idempotent_jobs]``
section, else the file store under ``$AIRFLOW_HOME`` (`EpisodeStoreHook.store`).
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from airflow.sdk import BaseHook

from ._store_url import url_passwords

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from ..stores import EpisodeStore

__all__ = ["DEFAULT_STORE_DIRNAME", "EpisodeStoreHook", "default_store_path", "store_url_from_connection"]

#: The embedded default store lives here, under ``$AIRFLOW_HOME``.
DEFAULT_STORE_DIRNAME = "idempotent_jobs"

#: Connection types that name a PostgreSQL server rather than a store URL.
POSTGRES_CONN_TYPES = frozenset({"postgres", "postgresql"})
#: libpq options worth carrying over from a ``postgres`` Connection's extra into the URL.
#: ``options`` is forwarded too, so that the store refuses it in one line rather than silently
#: dropping it: it could reset ``search_path`` or turn the store's timeouts off.
_LIBPQ_OPTIONS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name", "options")
#: The store's own URL options a ``postgres`` Connection may carry in its extra.
_STORE_OPTIONS = ("namespace", "schema", "lock_timeout", "statement_timeout")


def default_store_path() -> Path:
    """``$AIRFLOW_HOME/idempotent_jobs``; Airflow's own default home is ``~/airflow``."""
    home = os.environ.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow")
    return Path(home) / DEFAULT_STORE_DIRNAME


def store_url_from_connection(conn: Connection) -> str:
    """The store URL a Connection describes (it may hold a password: never log it).

    A password belongs in the Connection's password field, which Airflow encrypts and masks; one
    found in the host or the extra (which the UI shows) is refused, naming the field, not the value.
    """
    from ..errors import InvalidConfiguration

    what = f"connection {conn.conn_id!r}"
    extra = conn.extra_dejson
    for name in extra:
        if "password" in str(name).lower():
            raise InvalidConfiguration(what, f"extra {name!r}", "holds a password: put it in the password field")
    conn_type = (conn.conn_type or "").lower()
    if conn_type in POSTGRES_CONN_TYPES:
        if conn.host and ("@" in conn.host or "://" in conn.host):
            reason = "must be a host name (login and password have fields of their own)"
            raise InvalidConfiguration(what, "host", reason)
        return _postgres_url(conn)
    for field, value in [*((f"extra {k!r}", extra.get(k)) for k in ("url", "path")), ("host", conn.host)]:
        if isinstance(value, str) and value.strip():
            return _store_url(conn, what, field, value.strip())
    raise InvalidConfiguration(
        what,
        "host",
        "names no store: set its host (or extra 'path'/'url') to a directory, file:// URL or postgresql:// URL",
    )


def _store_url(conn: Connection, what: str, field: str, url: str) -> str:
    """An ``idempotent_jobs_store`` value: a path or file:// URL as it is; a PostgreSQL URL gets the
    credentials (and port and database, when it has none) from the Connection's own fields."""
    from ..errors import InvalidConfiguration
    from ..stores import POSTGRES_SCHEMES
    from ..stores.url_parts import has_url_scheme, split_url

    parts = None
    if has_url_scheme(url) and url.partition("://")[0].lower() in POSTGRES_SCHEMES:
        try:  # read by the stores' own rule: a URL they cannot read is refused here, unrepeated
            parts = split_url(url, what)
        except InvalidConfiguration as exc:
            raise InvalidConfiguration(what, field, exc.reason) from None
    if (parts.password is not None or parts.secrets()) if parts is not None else url_passwords(url):
        raise InvalidConfiguration(what, field, "carries a password: put it in the connection's password field")
    if parts is None:
        if conn.password:
            raise InvalidConfiguration(what, "password", "a file store takes no password")
        return url
    for name, ours, theirs in (
        ("login", conn.login, parts.user),
        ("port", conn.port, parts.port),
        ("schema", conn.schema, parts.path.lstrip("/") or None),
    ):
        if ours and theirs and str(ours) != str(theirs):
            raise InvalidConfiguration(what, name, f"differs from the one in the {field} URL")
    login = conn.login or parts.user
    auth = ""
    if login:
        auth = quote(login, safe="") + (":" + quote(conn.password, safe="") if conn.password else "") + "@"
    elif conn.password:
        raise InvalidConfiguration(what, "password", "needs a login")
    hostport = parts.hostport
    if conn.port and parts.port is None:
        hostport += f":{conn.port}"
    path = parts.path if parts.path.strip("/") else "/" + quote(conn.schema or "", safe="")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{auth}{hostport}{path}{query}"


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
    options = {k: str(extra[k]) for k in (*_LIBPQ_OPTIONS, *_STORE_OPTIONS) if extra.get(k) not in (None, "")}
    query = f"?{urlencode(options)}" if options else ""
    return f"postgresql://{auth}{host}{port}/{database}{query}"


class EpisodeStoreHook(BaseHook):
    """Opens the episode store named by a store URL, a Connection or the deployment; built on first use.

    ``store_url`` wins, then ``store_conn_id``; with neither (``store_conn_id=None``), the
    deployment's ``[idempotent_jobs] store`` or ``store_conn_id``, else the file store under
    ``$AIRFLOW_HOME``, which only a single-host executor may use (each host would have its own).
    """

    conn_name_attr = "store_conn_id"
    default_conn_name = "idempotent_jobs_store_default"
    conn_type = "idempotent_jobs_store"
    hook_name = "Idempotent Jobs Store"

    def __init__(
        self,
        store_conn_id: str | None = default_conn_name,
        *,
        store_url: Any = None,
        lock_timeout: float | None = None,
    ) -> None:
        super().__init__()
        self.store_conn_id = store_conn_id
        #: A store URL or path as the task rendered it (a `SealedStoreUrl` when it holds a password).
        self.store_url = store_url
        self.lock_timeout = lock_timeout

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        from ._store_form import STORE_FORM
        from ._ui import field_behaviour

        return field_behaviour(STORE_FORM)

    def get_store_url(self) -> str:
        """The Connection's store URL; may carry a password, so it is never logged."""
        if self.store_conn_id is None:
            raise ValueError("this hook names no Connection (store_conn_id is None)")
        return store_url_from_connection(self.get_connection(self.store_conn_id))

    @cached_property
    def store(self) -> EpisodeStore:
        if self.store_url is not None:
            from ._store_url import SealedStoreUrl

            url = self.store_url
            return self._open_url(url.secret if isinstance(url, SealedStoreUrl) else str(url))
        if self.store_conn_id is not None:
            return self._open_connection()
        deployment = self._deployment_store()
        if deployment is not None:
            return deployment
        _refuse_per_host_store()
        from ..stores import open_store

        return open_store(default_store_path(), **self._options())

    def _options(self) -> dict[str, Any]:
        return {} if self.lock_timeout is None else {"lock_timeout": self.lock_timeout}

    def _open_connection(self) -> EpisodeStore:
        from ..stores import open_store

        opened = open_store(self.get_store_url(), **self._options())
        self.log.info("Episode store from connection %r: %s", self.store_conn_id, opened.location)
        return opened

    def _open_url(self, url: str, setting: str | None = None) -> EpisodeStore:
        """`open_store`; a URL it refuses is reported by the setting it came from (never with its password)."""
        from ..errors import InvalidConfiguration
        from ..stores import open_store

        try:
            return open_store(url, **self._options())
        except InvalidConfiguration as exc:
            if setting is None:
                raise
            raise InvalidConfiguration("deployment setting", setting, str(exc)) from None

    def _deployment_store(self) -> EpisodeStore | None:
        """The store ``[idempotent_jobs]`` names for the whole deployment, if any."""
        from ..config import SECTION, env_name, setting
        from ..errors import InvalidConfiguration
        from ._store_url import mask_secrets

        url, conn_id = setting("store"), setting("store_conn_id")
        if url and conn_id:
            raise InvalidConfiguration(
                "deployment settings",
                f"[{SECTION}] store and [{SECTION}] store_conn_id",
                "both are set; set one of them",
            )
        if url:
            mask_secrets(url_passwords(url))
            return self._open_url(url, setting=f"[{SECTION}] store ({env_name('store')})")
        if conn_id:
            return type(self)(conn_id, lock_timeout=self.lock_timeout).store
        return None

    def get_conn(self) -> EpisodeStore:
        return self.store

    def test_connection(self) -> tuple[bool, str]:
        """Read the store's version (`EpisodeStore.require_existing`), then look up a key nobody holds.

        Nothing is created, migrated or written. No store yet, or an older schema, is a working
        connection (the first allocation of this release creates or migrates it); a schema newer
        than this release is a failure.
        """
        from ..errors import StoreMissing, StoreOutdated

        try:
            store = self.store
            try:
                store.require_existing()
            except StoreMissing:
                return (
                    True,
                    f"reachable at {store.location}; no episode store there yet: the first allocation creates it",
                )
            except StoreOutdated as exc:
                return True, f"reachable at {store.location}; {exc}"
            store.find("airflow:test-connection")
        except Exception as exc:  # report any failure to the UI rather than raise
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"episode store reachable at {store.location}"

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.close()
            del self.__dict__["store"]


def _refuse_per_host_store() -> None:
    """No store named anywhere: refuse the per-host default unless every task runs on this host."""
    try:
        from airflow.sdk.exceptions import AirflowFailException
    except ImportError:  # Airflow < 3.2
        from airflow.exceptions import AirflowFailException  # type: ignore[attr-defined,no-redef,unused-ignore]

    from ._executors import configured_executors, distributed_executors

    spread = distributed_executors(configured_executors())
    if spread:
        raise AirflowFailException(
            f"no episode store configured, and the executor ({', '.join(spread)}) may run tasks on several "
            f"hosts, each with its own default store {default_store_path()}: a retry on another host would "
            "allocate (and pay) again. Name one store for all hosts: store= or store_conn_id= on the operator, "
            "or [idempotent_jobs] store or store_conn_id for the deployment "
            "(AIRFLOW__IDEMPOTENT_JOBS__STORE=postgresql://... or AIRFLOW__IDEMPOTENT_JOBS__STORE_CONN_ID=...)"
        )
