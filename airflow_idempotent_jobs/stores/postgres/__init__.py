"""The multi-host store: episodes as rows in PostgreSQL (docs/design.md, "The PostgreSQL store").

Its modules, lowest first; each imports only those below it: `_options` (the URL, checked before
anything connects), `_connection` (bounded connections), `_rows` (the ``episodes`` columns and the
row <-> record mapping), `_schema` (tables and migrations, ``sql/``), `_statements` (every
statement), `_context` (`StoreContext`, what the helpers know of the store), `_check` (read-only
verification), `_session` (the locked transaction of updates), `_allocate` (allocation, one call of
the server's function) and `_store`, the `PostgresEpisodeStore` that puts them together.
"""

from __future__ import annotations

from ._session import PostgresSession
from ._store import PostgresEpisodeStore

__all__ = ["PostgresEpisodeStore", "PostgresSession"]
