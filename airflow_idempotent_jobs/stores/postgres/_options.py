"""What a ``postgresql://`` URL may tell the PostgreSQL store, checked before anything connects.

The query of a store URL is read by three parties: the store (``namespace``, ``schema`` and its
timeouts), libpq (connection options) and nobody (a typo). A typo must not fall through to the
driver, which would refuse it only at connect time, as a "database error" (exit 5) that a retry
repeats for ever; nor may the URL reach past what the store controls. So every option is
either the store's own, or on a short list passed through to libpq with its values checked here,
or refused with `InvalidConfiguration` naming it (never its value when it may be a secret).

Refused on purpose:

- ``options``: it would run ``-c`` settings in the store's sessions, e.g. a ``search_path`` that
  puts a schema before ``pg_catalog`` (whose functions would then shadow the advisory lock) or
  ``statement_timeout=0``. The store sets its own session options.
- ``host``/``hostaddr``/``port``/``dbname``/``user``/``password`` in the query: libpq lets them
  override the URL's own parts, so ``postgresql://u:pw@prod/jobs?host=elsewhere`` would send the
  password to another server while every message names ``prod``. Only a Unix-socket directory is
  accepted as ``?host=/path``, when the URL itself names no host.
- ``service``/``passfile``/``replication`` and anything else not listed: settings from files the
  URL does not show, or a session the store cannot use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl, unquote

import psycopg
from sqlalchemy.engine.url import URL

from ...episode import is_negative_zero
from ...errors import IdempotentJobsError, InvalidConfiguration, InvalidIdentifier
from ..url_parts import split_url

__all__ = [
    "LIBPQ_OPTIONS",
    "MAX_TIMEOUT",
    "STORE_OPTIONS",
    "WHAT",
    "StoreUrl",
    "check_namespace",
    "check_seconds",
    "parse_store_url",
]

#: What `InvalidConfiguration` names for every problem found here.
WHAT: Final = "PostgreSQL store"
#: The store's own options, in the URL query or as constructor arguments.
STORE_OPTIONS: Final = ("namespace", "schema", "lock_timeout", "statement_timeout", "connect_timeout")
#: The longest timeout accepted, in seconds: PostgreSQL takes an int of milliseconds (at most
#: 2 147 483 647 ms, 24.8 days), and the store sends lock_timeout + statement_timeout as one.
MAX_TIMEOUT: Final = 1_000_000.0

_NAMESPACE_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f]")
_INT_RE: Final = re.compile(r"[0-9]{1,9}")
_AUTH_METHODS: Final = frozenset({"password", "md5", "gss", "sspi", "scram-sha-256", "oauth", "none"})

Check = Callable[[str], str | None]


def _one_of(*values: str) -> Check:
    def check(value: str) -> str | None:
        return None if value in values else f"must be one of {', '.join(values)}"

    return check


def _integer(value: str) -> str | None:
    return None if _INT_RE.fullmatch(value) else "must be a whole number (0 to 999999999)"


def _text(value: str) -> str | None:
    return None


def _auth_methods(value: str) -> str | None:
    methods = [m.removeprefix("!") for m in value.split(",")]
    if all(m in _AUTH_METHODS for m in methods):
        return None
    return f"must list methods among {', '.join(sorted(_AUTH_METHODS))} (each may start with !)"


#: libpq options passed through to the driver, and how their values are checked. Whatever is
#: not here (and not a `STORE_OPTIONS` name) is refused.
LIBPQ_OPTIONS: Final[Mapping[str, Check]] = {
    "sslmode": _one_of("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "sslrootcert": _text,
    "sslcert": _text,
    "sslkey": _text,
    "sslpassword": _text,
    "sslcrl": _text,
    "sslcrldir": _text,
    "sslsni": _one_of("0", "1"),
    "sslnegotiation": _one_of("postgres", "direct"),
    "ssl_min_protocol_version": _one_of("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "ssl_max_protocol_version": _one_of("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "channel_binding": _one_of("disable", "prefer", "require"),
    "gssencmode": _one_of("disable", "prefer", "require"),
    "require_auth": _auth_methods,
    "krbsrvname": _text,
    "application_name": _text,
    # The store writes: a read-only or standby session could only fail later.
    "target_session_attrs": _one_of("any", "read-write", "primary"),
    "load_balance_hosts": _one_of("disable", "random"),
    "keepalives": _one_of("0", "1"),
    "keepalives_idle": _integer,
    "keepalives_interval": _integer,
    "keepalives_count": _integer,
    "tcp_user_timeout": _integer,
}
#: Options whose value may be a secret: never repeated in a message.
_SECRET: Final = frozenset({"sslpassword", "password"})
_IN_THE_URL: Final = frozenset({"host", "hostaddr", "port", "dbname", "user", "password"})


@dataclass(frozen=True)
class StoreUrl:
    """A checked store URL: the driver's URL (libpq options only) and the store's own options."""

    #: ``postgresql+psycopg://...`` carrying only the `LIBPQ_OPTIONS` found (it may hold a password).
    url: URL
    namespace: str | None = None
    schema: str | None = None
    lock_timeout: float | None = None
    statement_timeout: float | None = None
    connect_timeout: float | None = None


def check_seconds(field: str, value: object, *, zero_ok: bool) -> float:
    """A timeout in seconds: a finite number, at most `MAX_TIMEOUT`, > 0 (or >= 0 with ``zero_ok``)."""

    def refuse(reason: str) -> IdempotentJobsError:
        if field == "lock_timeout":  # the one timeout both stores take: the same error as the file store's
            return InvalidIdentifier("lock timeout", value, reason)
        return InvalidConfiguration(WHAT, field, reason)

    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise refuse("is not a number of seconds") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise refuse(f"must be a number of seconds, not {type(value).__name__}")
    seconds = float(value)
    if is_negative_zero(seconds):  # passes ">= 0", but its minus sign says the setting is not what was meant
        raise refuse("is a negative zero: give the seconds without a minus sign")
    low_ok = seconds >= 0 if zero_ok else seconds > 0
    if not math.isfinite(seconds) or not low_ok or seconds > MAX_TIMEOUT:
        low = ">= 0" if zero_ok else "> 0"
        raise refuse(f"must be a finite number of seconds {low} and <= {MAX_TIMEOUT:.0f}")
    return seconds


def check_namespace(value: object) -> str:
    if not isinstance(value, str) or not _NAMESPACE_RE.fullmatch(value):
        shown = repr(value)[:60]
        raise InvalidConfiguration(WHAT, "namespace", f"{shown}: use 1..128 letters, digits and _ . : -")
    return value


def parse_store_url(text: str, schemes: frozenset[str]) -> StoreUrl:
    """Check every part of ``text`` the store or libpq would act on; `InvalidConfiguration` otherwise."""
    parts = split_url(text, WHAT)  # the password first, by the one rule: never by SQLAlchemy's or urllib's
    if parts.scheme not in schemes:
        raise InvalidConfiguration(WHAT, "URL", f"scheme {parts.scheme!r}: use postgresql:// (psycopg 3)")
    if parts.fragment is not None:
        raise InvalidConfiguration(WHAT, "URL", "has a #fragment, which means nothing to the store")
    url = URL.create(
        "postgresql",
        username=parts.user,
        password=parts.password,
        host=parts.hostname,
        port=parts.port,
        database=unquote(parts.path[1:]) if parts.path else None,
    )
    store: dict[str, str] = {}
    libpq: dict[str, str] = {}
    for name, value in parse_qsl(parts.query or "", keep_blank_values=True):
        shown = "(hidden)" if name in _SECRET else repr(value[:60])
        if name in store or name in libpq:
            raise InvalidConfiguration(WHAT, name, "given more than once")
        if not value:
            raise InvalidConfiguration(WHAT, name, "must not be empty (leave it out for the default)")
        if _CONTROL_RE.search(name) or _CONTROL_RE.search(value):
            raise InvalidConfiguration(WHAT, name.encode("unicode_escape").decode()[:40], "holds a control character")
        if name in STORE_OPTIONS:
            store[name] = value
        elif name in LIBPQ_OPTIONS:
            problem = LIBPQ_OPTIONS[name](value)
            if problem is not None:
                raise InvalidConfiguration(WHAT, name, f"{shown}: {problem}")
            libpq[name] = value
        elif name == "host" and not url.host and value.startswith("/"):
            libpq[name] = value  # a Unix-socket directory, the one host the URL itself cannot spell
        elif name in _IN_THE_URL:
            raise InvalidConfiguration(
                WHAT, name, "belongs in the URL itself (postgresql://user:password@host:port/dbname), not its query"
            )
        elif name == "options":
            raise InvalidConfiguration(
                WHAT, name, "refused: the store sets its own session options (search_path, timeouts)"
            )
        else:
            accepted = ", ".join((*STORE_OPTIONS, *LIBPQ_OPTIONS))
            raise InvalidConfiguration(WHAT, name[:40], f"not an option the store accepts (accepted: {accepted})")
    for name, value in libpq.items():
        try:  # the linked libpq may be older than the option
            psycopg.conninfo.make_conninfo("", **{name: value})
        except psycopg.Error as exc:
            raise InvalidConfiguration(WHAT, name, f"refused by this libpq: {exc}") from None
    return StoreUrl(
        url=url.set(drivername="postgresql+psycopg", query=libpq),
        namespace=check_namespace(store["namespace"]) if "namespace" in store else None,
        schema=store.get("schema"),
        lock_timeout=check_seconds("lock_timeout", store["lock_timeout"], zero_ok=True)
        if "lock_timeout" in store
        else None,
        statement_timeout=check_seconds("statement_timeout", store["statement_timeout"], zero_ok=False)
        if "statement_timeout" in store
        else None,
        connect_timeout=check_seconds("connect_timeout", store["connect_timeout"], zero_ok=False)
        if "connect_timeout" in store
        else None,
    )
