"""Store URLs that may carry a password: find it, hide it, and keep it out of what Airflow shows.

No Airflow import: the operators and the store hook use these at run time.
"""

from __future__ import annotations

import re
from typing import Any, Final
from urllib.parse import unquote, urlsplit

__all__ = ["SealedStoreUrl", "mask_secrets", "redact_store_url", "redact_text", "seal_store_url", "url_passwords"]

REDACTED: Final = "***"
#: ``scheme://user:`` up to the LAST ``@``: whichever ``@`` a URL parser takes as the end of the
#: password (SQLAlchemy: the first; urllib: the last), all of it is hidden. Over-hiding a host
#: that follows a stray ``@`` only costs readability. Searched, not anchored: a template laid out
#: over several lines renders the URL after blanks and a line break.
_USERINFO = re.compile(r"([A-Za-z][\w+.-]*://[^:/@?#\s]*):(.*)@", re.DOTALL)
#: The same inside free text (a template): up to the last ``@`` before a blank or a quote.
_EMBEDDED_USERINFO = re.compile(r"([A-Za-z][\w+.-]*://[^\s:/@'\"]*):[^\s'\"]*@")
#: Query parameters that carry a secret in a libpq URL (``password``, ``sslpassword``, ...).
_QUERY_SECRET = re.compile(r"([?&][^=&\s]*password[^=&\s]*=)([^&#\s]*)", re.IGNORECASE)


def _has_scheme(url: str) -> bool:
    return "://" in url and bool(urlsplit(url.strip()).scheme)


def url_passwords(url: str) -> list[str]:
    """Every password the URL carries (user info, ``?password=``), decoded; empty for a plain path."""
    if not _has_scheme(url):
        return []
    found: list[str] = []
    userinfo = _USERINFO.search(url)
    if userinfo:
        found += dict.fromkeys([userinfo.group(2), userinfo.group(2).split("@", 1)[0]])
    found += [match.group(2) for match in _QUERY_SECRET.finditer(url)]
    return [unquote(secret) for secret in found if secret]


def redact_store_url(url: str) -> str:
    """``url`` with every password replaced by ``***`` (user, host, database and options kept)."""
    if not _has_scheme(url):
        return url
    return _redact_query(_USERINFO.sub(lambda m: f"{m.group(1)}:{REDACTED}@", url, count=1))


def redact_text(text: str) -> str:
    """Any ``scheme://user:password@`` and ``password=`` inside free text (a template, say) hidden."""
    return _redact_query(_EMBEDDED_USERINFO.sub(lambda m: f"{m.group(1)}:{REDACTED}@", text))


def _redact_query(text: str) -> str:
    return _QUERY_SECRET.sub(lambda m: m.group(1) + (REDACTED if m.group(2) else ""), text)


class SealedStoreUrl(str):
    """A store URL whose text is the redacted form, with the real URL kept aside in ``secret``.

    Airflow stores and shows a task's rendered template fields as text: what it sees of a sealed
    URL is ``postgresql://user:***@host/db``, whatever the masker's length rules. Only
    `open_task_store` reads ``secret``.
    """

    secret: str

    def __new__(cls, url: str) -> SealedStoreUrl:
        sealed = super().__new__(cls, redact_store_url(url))
        sealed.secret = url
        return sealed

    def __reduce__(self) -> tuple[Any, ...]:
        # A pickled copy is the redacted text only: it can never leak, and can never connect.
        return (str, (str.__str__(self),))

    def __copy__(self) -> SealedStoreUrl:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> SealedStoreUrl:
        return self


def seal_store_url(value: Any) -> Any:
    """A URL with a password becomes a `SealedStoreUrl` (its password handed to Airflow's masker too)."""
    if not isinstance(value, str) or isinstance(value, SealedStoreUrl):
        return value
    if redact_store_url(value) == value:
        return value
    mask_secrets(url_passwords(value))
    return SealedStoreUrl(value)


def mask_secrets(secrets: list[str]) -> None:
    """Register secrets with Airflow's log masker (it skips short ones: sealing does not rely on it)."""
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # pragma: no cover - outside Airflow, or an older one
        return
    for secret in secrets:
        mask_secret(secret)
