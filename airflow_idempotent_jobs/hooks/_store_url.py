"""Store URLs that may carry a password: find it, hide it, and keep it out of what Airflow shows.

The password is found by the stores' own reading of the URL (`stores.url_parts`), never by a
pattern: what is shown is rebuilt from the parts, so no shape of password can slip into it.
No Airflow import: the operators and the store hook use these at run time.
"""

from __future__ import annotations

import re
from typing import Any, Final

from ..errors import InvalidConfiguration
from ..stores.url_parts import HIDDEN, UrlParts, has_url_scheme, split_url

__all__ = ["SealedStoreUrl", "mask_secrets", "redact_store_url", "redact_text", "seal_store_url", "url_passwords"]

REDACTED: Final = HIDDEN
#: Inside free text (a template): ``scheme://user:`` up to the last ``@`` before a blank or a quote.
_EMBEDDED_USERINFO = re.compile(r"([A-Za-z][\w+.-]*://[^\s:/@'\"]*):[^\s'\"]*@")
#: Query parameters that carry a secret in a libpq URL (``password``, ``sslpassword``, ...).
_QUERY_SECRET = re.compile(r"([?&][^=&\s]*password[^=&\s]*=)([^&#\s]*)", re.IGNORECASE)


def _parts(url: str) -> UrlParts | None:
    """``url`` split by the stores' one rule; None for a path; raises for a URL that cannot be read.

    A ``file:`` URL without a host part is a path too (``file:///data/a@b`` holds no user).
    """
    text = url.strip()
    if not has_url_scheme(text):
        return None
    scheme, _, rest = text.partition("://")
    if scheme.lower() == "file" and re.match(r"(localhost)?(/|$)", rest, re.IGNORECASE):
        return None
    return split_url(text)


def url_passwords(url: str) -> list[str]:
    """Every secret the URL carries (the password, ``?password=``...), decoded; empty for a plain path.

    A URL the stores refuse unread is a secret as a whole: nothing in it can be told apart.
    """
    try:
        parts = _parts(url)
    except InvalidConfiguration:
        return [url.strip()]
    return [] if parts is None else parts.secrets()


def redact_store_url(url: str) -> str:
    """``url`` rebuilt from its parts with every secret as ``***``; unchanged when it holds none.

    A URL the stores cannot read shows its scheme only: any other part could be a piece of the
    password.
    """
    try:
        parts = _parts(url)
    except InvalidConfiguration:
        scheme = url.strip().partition("://")[0].lower()
        return f"{scheme}://(cannot be read: not shown)"
    if parts is None or (parts.password is None and not parts.secrets()):
        return url
    return parts.shown()


def redact_text(text: str) -> str:
    """Any ``scheme://user:password@`` and ``password=`` inside free text (a template, say) hidden."""
    text = _EMBEDDED_USERINFO.sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)
    return _QUERY_SECRET.sub(lambda m: m.group(1) + (REDACTED if m.group(2) else ""), text)


class SealedStoreUrl(str):
    """A store URL whose text is the redacted form, with the real URL kept aside in ``secret``.

    Airflow stores and shows a task's rendered template fields as text: what it sees of a sealed
    URL is ``postgresql://user:***@host/db``, whatever the masker's length rules. Only
    `EpisodeStoreHook.store` reads ``secret``.
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
