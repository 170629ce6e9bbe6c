"""The embedded default store: episodes as files under one directory, guarded by one ``flock``.

How it is laid out and why its writes are durable: docs/design.md, "The file store".
"""

from __future__ import annotations

from ._key_index import key_digest
from ._store import FileEpisodeStore
from ._tree import STATE_FILE
from ._week_history import HISTORY_FILE

__all__ = ["HISTORY_FILE", "STATE_FILE", "FileEpisodeStore", "key_digest"]
