"""Store backends and `open_store`, which picks one from a URL."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlparse

from ..errors import InvalidIdentifier
from .base import EpisodeStore
from .file import FileEpisodeStore

if TYPE_CHECKING:
    from .postgres import PostgresEpisodeStore  # type: ignore[import-not-found,unused-ignore]

__all__ = ["EpisodeStore", "FileEpisodeStore", "PostgresEpisodeStore", "open_store"]

#: URL schemes that `open_store` hands to the PostgreSQL store, which accepts exactly these.
POSTGRES_SCHEMES: Final = frozenset({"postgresql", "postgres", "postgresql+psycopg"})


def open_store(url: str | os.PathLike[str], **options: Any) -> EpisodeStore:
    """A plain path or ``file:///abs/path`` gives the file store; ``postgresql://...`` the PostgreSQL one."""
    text = os.fspath(url)
    if not isinstance(text, str) or not text.strip():
        raise InvalidIdentifier("store URL", url, "must be a path, file:// URL or postgresql:// URL")
    scheme = urlparse(text).scheme.lower() if "://" in text else ""
    if scheme in POSTGRES_SCHEMES:
        from .postgres import PostgresEpisodeStore  # type: ignore[import-not-found,unused-ignore]

        store: EpisodeStore = PostgresEpisodeStore(text, **options)
        return store
    if scheme == "file":
        parsed = urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise InvalidIdentifier("store URL", text, "file:// URLs must name a local absolute path")
        return FileEpisodeStore(unquote(parsed.path), **options)
    if scheme:
        raise InvalidIdentifier("store URL", text, f"unknown scheme {scheme!r} (use a path, file:// or postgresql://)")
    return FileEpisodeStore(text, **options)


def __getattr__(name: str) -> Any:
    # The PostgreSQL store needs SQLAlchemy: import it only when asked for.
    if name == "PostgresEpisodeStore":
        from .postgres import PostgresEpisodeStore

        return PostgresEpisodeStore
    raise AttributeError(name)
