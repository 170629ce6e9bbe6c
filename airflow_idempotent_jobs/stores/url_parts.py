"""A store URL split into its parts, the password first, so no message ever has to repeat the URL.

People paste passwords into URLs without percent-encoding them, and parsers disagree about where
such a password ends: SQLAlchemy stops at the first ``@`` (the rest becomes the host), urllib at
the first ``/``, ``?`` or ``#`` (the rest becomes the path, the query or the fragment), and every
message built from one of those parts then prints a piece of the password. The rule here:

- The user information ends at the **last** ``@``. Whatever the writer meant, their password ends
  at one of the ``@``, so everything shown (the host and what follows it) comes after it.
- What follows must be ``host[:port][/database][?options][#fragment]`` with a plain host name or
  a bracketed IPv6 address and a port of digits; the user name holds no reserved character.
- If the text would also read as a URL at an earlier ``@`` (or with no user information at all),
  it is **ambiguous**: an ``@`` may belong to the password or to the database name or an
  option's value. It is refused: a guess could send the password to another host.
- Percent escapes in the user name and password must be complete and UTF-8; the password holds
  no NUL. libpq refuses the same.

A refused URL is `InvalidConfiguration` naming it by its scheme only (``URL (postgresql://...)``)
and the rule broken, never its text. Messages built from an accepted URL use `UrlParts.shown`
(the password as ``***``). No SQLAlchemy here: the Airflow layer uses this too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from ..errors import InvalidConfiguration

__all__ = ["HIDDEN", "POSTGRES_SCHEMES", "UrlParts", "has_url_scheme", "split_url"]

#: URL schemes that `open_store` hands to the PostgreSQL store, which accepts exactly these.
POSTGRES_SCHEMES: Final = frozenset({"postgresql", "postgres", "postgresql+psycopg"})

#: What stands for a password (or a secret option's value) in everything shown.
HIDDEN: Final = "***"
_SCHEME: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
#: RFC 3986 user characters (unreserved, sub-delims, percent escapes), without ``:``.
_USER: Final = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=%-]*")
#: A bracketed IPv6 address or a host name (a comma-separated list of names is libpq's own), then
#: an optional port of digits.
_HOST_PORT: Final = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~,-]*)(?::([0-9]{1,5}))?")
_BAD_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
#: An option whose value is a secret (``password``, ``sslpassword``, any spelling holding it).
_SECRET_OPTION: Final = re.compile(r"(^|&)([^=&]*password[^=&]*=)([^&]*)", re.IGNORECASE)
_ENCODE: Final = "percent-encode ? @ # / : % in the user name and password as %3F %40 %23 %2F %3A %25"


@dataclass(frozen=True)
class UrlParts:
    """One reading of ``scheme://[user[:password]@]host[:port][/path][?query][#fragment]``."""

    #: Lower-cased.
    scheme: str
    #: As written (checked to hold no reserved character); None without user information.
    user_text: str | None
    #: Decoded; None when the URL gives none (``user@host``).
    password: str | None
    #: As written, brackets included for IPv6; empty for none.
    host_text: str
    port: int | None
    #: As written: empty or starting with ``/``.
    path: str
    #: As written, without the ``?``; None when absent.
    query: str | None
    #: Without the ``#``; None when absent.
    fragment: str | None

    @property
    def user(self) -> str | None:
        """The user name, decoded; None when not given or empty."""
        if self.user_text is None:
            return None
        return unquote(self.user_text) or None

    @property
    def hostname(self) -> str | None:
        """The host for a driver (an IPv6 address without brackets); None for none."""
        return self.host_text.strip("[]") or None

    @property
    def hostport(self) -> str:
        return self.host_text + ("" if self.port is None else f":{self.port}")

    def secrets(self) -> list[str]:
        """Every secret the URL carries: the password, the values of options named like ``password``."""
        found = [] if self.password is None else [self.password]
        found += [unquote(m.group(3)) for m in _SECRET_OPTION.finditer(self.query or "") if m.group(3)]
        return [secret for secret in found if secret]

    def shown(self) -> str:
        """The URL rebuilt from its parts with every secret as ``***``: safe for any message."""
        auth = ""
        if self.user_text is not None:
            auth = self.user_text + ("" if self.password is None else f":{HIDDEN}") + "@"
        query = ""
        if self.query is not None:
            query = "?" + _SECRET_OPTION.sub(_hidden_value, self.query)
        fragment = "" if self.fragment is None else f"#{self.fragment}"
        return f"{self.scheme}://{auth}{self.hostport}{self.path}{query}{fragment}"


def _hidden_value(option: re.Match[str]) -> str:
    return option.group(1) + option.group(2) + (HIDDEN if option.group(3) else "")


def has_url_scheme(text: str) -> bool:
    """``scheme://`` at the start of ``text`` (blanks before it allowed)."""
    return _SCHEME.match(text.strip()) is not None


def split_url(text: str, what: str = "store") -> UrlParts:
    """``text`` (``scheme://...``) read by the rule above; `InvalidConfiguration` naming only its scheme."""
    match = _SCHEME.match(text)
    if match is None:
        raise InvalidConfiguration(what, "URL", "must start with scheme:// (postgresql://, file://)")
    scheme, rest = match.group(1).lower(), text[match.end() :]

    def refuse(reason: str) -> InvalidConfiguration:
        return InvalidConfiguration(what, f"URL ({scheme}://...)", reason)

    ats = [i for i, char in enumerate(rest) if char == "@"]
    cut = ats[-1] if ats else -1
    located = _located(rest[cut + 1 :])
    if located is None:
        raise refuse(f"cannot be read as {scheme}://user:password@host:port/database; {_ENCODE}")
    others = [-1, *ats[:-1]] if ats else []  # no user information at all, or up to an earlier '@'
    if any(_located(rest[i + 1 :], strict=True) is not None for i in others):
        raise refuse(
            "reads two ways: an '@' ends the password (or the user name) or belongs to the database name or "
            f"an option; write every '@' but the one before the host as %40, and {_ENCODE}"
        )
    user_text, password = None, None
    if cut >= 0:
        user_text, colon, raw_password = rest[:cut].partition(":")
        if not _USER.fullmatch(user_text):
            raise refuse(f"the user name holds a reserved character; {_ENCODE}")
        _decoded(user_text, refuse)
        password = _decoded(raw_password, refuse) if colon else None
        if password is not None and "\x00" in password:
            raise refuse("the password holds a NUL character (%00), which no PostgreSQL password can hold")
    host_text, port, path, query, fragment = located
    return UrlParts(scheme, user_text, password, host_text, port, path, query, fragment)


_Located = tuple[str, int | None, str, str | None, str | None]


def _located(text: str, *, strict: bool = False) -> _Located | None:
    """``host[:port][/path][?query][#fragment]`` split, or None when the host part is no host.

    ``strict`` (another reading, for the ambiguity check) takes one with a fragment for none: no
    store URL has a fragment, so that reading could not be meant.
    """
    end = min((i for i in (text.find("/"), text.find("?"), text.find("#")) if i >= 0), default=len(text))
    found = _HOST_PORT.fullmatch(text[:end])
    if found is None or (found.group(2) is not None and not 0 < int(found.group(2)) < 65536):
        return None
    rest, fragment = text[end:], None
    if "#" in rest:
        rest, _, fragment = rest.partition("#")
        if strict:
            return None
    path, mark, query = rest.partition("?")
    port = None if found.group(2) is None else int(found.group(2))
    return found.group(1), port, path, query if mark else None, fragment


def _decoded(text: str, refuse: Callable[[str], InvalidConfiguration]) -> str:
    """Percent escapes decoded; a broken or non-UTF-8 escape raises what ``refuse`` returns."""
    if _BAD_PERCENT.search(text):
        raise refuse("the user name or password holds a '%' that starts no escape: percent-encode it as %25")
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise refuse("the percent escapes of the user name or password are not UTF-8") from None
