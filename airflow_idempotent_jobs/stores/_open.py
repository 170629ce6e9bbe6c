"""`open_store`: a path or URL to the store it names, refused before anything is opened when it names none."""

from __future__ import annotations

import os
import re
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from ..errors import InvalidConfiguration
from ..identity import has_hidden_characters
from .base import EpisodeStore
from .file import FileEpisodeStore
from .url_parts import POSTGRES_SCHEMES, split_url

__all__ = ["open_store"]

_WHAT: Final = "store"
_SCHEME: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
#: A ``%`` that does not start an escape of two hex digits.
_BAD_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
#: Said instead of a value that looks like a URL: it may hold a password.
_NOT_SHOWN: Final = "not repeated: a URL may hold a password"


def open_store(url: str | os.PathLike[str], **options: Any) -> EpisodeStore:
    """A path or ``file:///abs/path`` gives the file store; ``postgresql://...`` the PostgreSQL one.

    Anything else is `InvalidConfiguration`, raised before any file or connection is opened: a
    ``file:`` URL without an absolute local path (``file://``, ``file:relative``) would otherwise
    put a store in whatever the current directory happens to be. Messages never repeat a URL
    that may hold a password.
    """
    text = os.fspath(url) if isinstance(url, (str, os.PathLike)) else url
    if not isinstance(text, str) or not text.strip():
        raise InvalidConfiguration(_WHAT, "URL", "must be a path, a file:// URL or a postgresql:// URL")
    match = _SCHEME.match(text)
    if match is None and "://" in text and _SCHEME.match(text.lstrip()):
        # A URL rendered by a template laid out over several lines: not a path, and not repeated.
        raise InvalidConfiguration(_WHAT, "URL", f"starts with blanks or a line break: remove them ({_NOT_SHOWN})")
    scheme = match.group(1).lower() if match else ""
    if scheme in POSTGRES_SCHEMES:
        return _open_postgres(text, **options)
    if scheme == "file":
        return FileEpisodeStore(_file_url_path(text), **options)
    if scheme and text[len(scheme) + 1 :].startswith("//"):
        raise InvalidConfiguration(
            _WHAT, "URL", f"unknown scheme {scheme!r} (use a path, file:///absolute/path or postgresql://)"
        )
    return FileEpisodeStore(_checked_path(text, text), **options)


def _open_postgres(text: str, **options: Any) -> EpisodeStore:
    if not text[text.index(":") :].startswith("://"):
        raise InvalidConfiguration(_WHAT, "URL", "a postgresql URL starts postgresql://")
    split_url(text, _WHAT)  # refused here, naming the scheme only, before SQLAlchemy is imported
    from .postgres import PostgresEpisodeStore

    store: EpisodeStore = PostgresEpisodeStore(text, **options)
    return store


def _file_url_path(text: str) -> str:
    """The absolute local path a ``file:`` URL names (RFC 8089: ``file:///p``, ``file://localhost/p``, ``file:/p``).

    A URL holding an ``@`` may hold a password (``file://user:pw@host/p``, split anywhere by an
    unencoded ``/``): messages then name neither the URL nor its host.
    """
    shown = f"the URL ({_NOT_SHOWN})" if "@" in text else repr(text)
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # an unclosed IPv6 bracket in the host
        raise InvalidConfiguration(_WHAT, "file URL", f"{shown}: {exc}") from None
    if parts.netloc.lower() not in ("", "localhost"):
        host = "a host" if "@" in text else f"host {parts.netloc!r}"
        raise InvalidConfiguration(_WHAT, "file URL", f"{shown} names {host}: use a local file:///path")
    if "?" in text:
        raise InvalidConfiguration(_WHAT, "file URL", f"{shown} has a query: a file URL names a directory only")
    if "#" in text:
        raise InvalidConfiguration(_WHAT, "file URL", f"{shown} has a fragment: a file URL names a directory only")
    if not parts.path:
        raise InvalidConfiguration(_WHAT, "file URL", f"{shown} names no directory: use file:///absolute/path")
    if not parts.path.startswith("/"):
        raise InvalidConfiguration(_WHAT, "file URL", f"{shown} is relative: use file:///absolute/path or a path")
    if _BAD_PERCENT.search(parts.path):
        raise InvalidConfiguration(_WHAT, "file URL", f"{shown}: '%' must start a percent escape like %20")
    try:
        path = unquote(parts.path, errors="strict")
    except UnicodeDecodeError:
        raise InvalidConfiguration(_WHAT, "file URL", f"{shown}: its percent escapes are not UTF-8") from None
    return _checked_path(path, text)


def _checked_path(path: str, given: str) -> str:
    shown = f"the value ({_NOT_SHOWN})" if "://" in given else repr(given)
    if "\x00" in path:
        raise InvalidConfiguration(_WHAT, "path", f"{shown} contains a NUL character")
    if has_hidden_characters(path):
        raise InvalidConfiguration(_WHAT, "path", f"{shown} contains control or invisible format characters")
    if path != path.strip():
        raise InvalidConfiguration(_WHAT, "path", f"{shown} starts or ends with whitespace")
    return path
