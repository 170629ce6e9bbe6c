"""The multi-host store: episodes as rows in PostgreSQL (docs/design.md, "The PostgreSQL store").

Its modules, lowest first: `_options` (the URL, checked before anything connects), `_connection`
(bounded connections), `_schema` (tables and migrations, ``sql/``), `_session` (the locked
transaction of updates), `_allocate` (allocation, one call of the server's function), `_check`
(read-only verification) and `_store`, the `PostgresEpisodeStore` that puts them together.
"""

from __future__ import annotations

from ._session import PostgresSession
from ._store import PostgresEpisodeStore

__all__ = ["PostgresEpisodeStore", "PostgresSession"]
