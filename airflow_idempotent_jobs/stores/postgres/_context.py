"""What the store's helpers may know of it: a small frozen value, so none of them calls back into the store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from ...episode import Episode
from ._connection import Timeouts
from ._rows import episode_from_row
from ._statements import Statements, statements

__all__ = ["StoreContext"]


@dataclass(frozen=True)
class StoreContext:
    """One store's place and bounds, fixed when it opens (`_store.PostgresEpisodeStore` builds it)."""

    #: The store's engine (the caller's, or one the store made from its URL).
    engine: Engine
    #: The schema, checked by `_schema.check_schema`.
    schema: str
    namespace: str
    #: The database as messages name it: its URL without password nor query.
    location: str
    #: The namespace's advisory lock (`_schema.advisory_key`): allocations and updates take it.
    lock_key: int
    timeouts: Timeouts

    @property
    def sql(self) -> Statements:
        return statements(self.schema)

    def where(self, row: str | None = None, table: str = "episodes") -> str:
        """A place in this store for messages: the database, schema, table, namespace and row."""
        key = f"/{row}" if row else ""
        return f"{self.location} {self.schema}.{table}[{self.namespace}{key}]"

    def episode(self, row: Mapping[Any, Any]) -> Episode:
        """One row of ``episodes`` as an `Episode` (`_rows.episode_from_row`); `StoreCorrupted` names the row."""
        return episode_from_row(row, self.where(str(row["episode_id"])))
