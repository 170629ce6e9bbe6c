"""What the page reads from ``[idempotent_jobs]``: the store, the weekly budget and currency, the current week.

The store is the one the operators use by default (`hooks.store.EpisodeStoreHook` with nothing
named on a task), so the page and the tasks can never look at different stores.
"""

from __future__ import annotations

import datetime as dt
import math
import shlex
import threading
from typing import TYPE_CHECKING, Any

from ..errors import InvalidPageSetting

if TYPE_CHECKING:
    from ..identity import WeekId
    from ..stores import EpisodeStore

__all__ = [
    "PageStore",
    "currency",
    "current_week",
    "name_the_store",
    "page_now",
    "store_option",
    "weekly_budget",
]

#: The command's name, as the read model writes it.
COMMAND = "idempotent-jobs"
#: The longest ``[idempotent_jobs] currency`` (a code or symbol: ``EUR``, ``US$``, ``credits``).
CURRENCY_MAX = 12


def _invalid(option: str, reason: str) -> InvalidPageSetting:
    """`InvalidPageSetting` for ``[idempotent_jobs] <option>``, named with its environment variable."""
    from ..config import SECTION, env_name

    return InvalidPageSetting("deployment setting", f"[{SECTION}] {option} ({env_name(option)})", reason)


def weekly_budget() -> float | None:
    """``[idempotent_jobs] weekly_budget``: a finite number >= 0 (not ``-0``), or None when unset."""
    from ..config import setting
    from ..episode import amount_problem

    text = setting("weekly_budget")
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    problem = amount_problem(value)
    if problem:
        raise _invalid("weekly_budget", f"{text[:40]!r} is not a number >= 0 ({problem})")
    return value


def currency() -> str | None:
    """``[idempotent_jobs] currency``: printable, no spaces, at most `CURRENCY_MAX` characters; None when unset."""
    from ..config import setting

    text = setting("currency")
    if text is None:
        return None
    if len(text) > CURRENCY_MAX or not text.isprintable() or any(ch.isspace() for ch in text):
        reason = f"{text[:40]!r} is not a currency code or symbol (printable, no spaces, at most {CURRENCY_MAX})"
        raise _invalid("currency", reason)
    return text


def store_option() -> str:
    """How a printed command names the page's store: its Connection id, else the deployment setting.

    Never a URL: ``[idempotent_jobs] store`` may hold a password, and the Connection keeps its own.
    """
    from ..config import setting

    conn_id = setting("store_conn_id")
    return f"--store-conn-id {shlex.quote(conn_id)}" if conn_id else "--airflow-store"


def name_the_store(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The read model's attention entries with the store named in each command (`store_option`), and
    for a submission the lookup command (the provider's job API's base URL left to fill in)."""
    option = store_option()
    named = []
    for entry in entries:
        command = entry.get("command")
        if isinstance(command, str) and command.startswith(COMMAND + " "):
            entry = {**entry, "command": f"{COMMAND} {option} {command[len(COMMAND) + 1 :]}"}
            if "token" in entry:
                entry["lookup_command"] = f"{entry['command']} --provider-url PROVIDER_URL"
        named.append(entry)
    return named


def page_now() -> dt.datetime:
    """Now, in ``[idempotent_jobs] timezone``, else ``[core] default_timezone``: its ISO week is "current"."""
    from ..config import SECTION, airflow_conf, env_name, setting
    from ..errors import InvalidConfiguration, InvalidIdentifier
    from ..identity import resolve_timezone

    configured = setting("timezone")
    field = f"[{SECTION}] timezone ({env_name('timezone')})"
    if configured is None:
        configured = (airflow_conf().get("core", "default_timezone", fallback="") or "UTC").strip()
        field = "[core] default_timezone"
    if configured.lower() == "system":  # Airflow's spelling of the host's zone
        return dt.datetime.now().astimezone()
    try:
        return dt.datetime.now(resolve_timezone(configured))
    except InvalidIdentifier as exc:
        raise InvalidConfiguration("deployment setting", field, f"{configured!r}: {exc.reason}") from None


def current_week(now: dt.datetime) -> WeekId:
    """The ISO week of ``now`` (aware) in its own zone."""
    from ..identity import WeekId

    return WeekId.from_datetime(now, now.tzinfo)


class PageStore:
    """The deployment's store, opened on first use and kept (its connection pool is reused); never created here.

    A failure to open is not kept: the next request tries again, so a store that comes back, or a
    fixed setting after a restart, needs nothing else.
    """

    def __init__(self) -> None:
        self._store: EpisodeStore | None = None
        self._secrets: list[str] = []
        self._lock = threading.Lock()

    def get(self) -> EpisodeStore:
        """The store, checked to exist on every call: the page never creates or upgrades one."""
        with self._lock:
            if self._store is None:
                from ..hooks.store import EpisodeStoreHook

                self._secrets = _configured_secrets()
                self._store = EpisodeStoreHook(None).store
            store = self._store
        store.require_existing()  # a missing store is 503, not a new empty one (cheap once it exists)
        return store

    def scrub(self, text: str) -> str:
        """``text`` on one line, with every password of the configured store replaced by ``***``."""
        line = " ".join(text.split())
        for secret in self._secrets or _configured_secrets():
            line = line.replace(secret, "***")
        return line


def _configured_secrets() -> list[str]:
    """The passwords the configured store URL or Connection carries (to keep them out of answers)."""
    from ..config import setting
    from ..hooks._store_url import url_passwords

    url, conn_id = setting("store"), setting("store_conn_id")
    found = url_passwords(url) if url else []
    if conn_id:
        try:
            from ..hooks.store import EpisodeStoreHook

            found += url_passwords(EpisodeStoreHook(conn_id).get_store_url())
        except Exception:  # the Connection itself is unreadable: nothing of it can leak either
            pass
    return [secret for secret in found if secret]
