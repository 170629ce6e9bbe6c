"""Store backends and `open_store`, which picks one from a URL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._open import open_store
from .base import EpisodeStore
from .file import FileEpisodeStore
from .url_parts import POSTGRES_SCHEMES as POSTGRES_SCHEMES  # where the Airflow layer reads it

if TYPE_CHECKING:
    from .postgres import PostgresEpisodeStore

__all__ = ["EpisodeStore", "FileEpisodeStore", "PostgresEpisodeStore", "open_store"]


def __getattr__(name: str) -> Any:
    # The PostgreSQL store needs SQLAlchemy: import it only when asked for.
    if name == "PostgresEpisodeStore":
        from .postgres import PostgresEpisodeStore

        return PostgresEpisodeStore
    raise AttributeError(name)
