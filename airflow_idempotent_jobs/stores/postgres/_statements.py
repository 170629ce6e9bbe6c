"""Every statement the store sends besides migrations and the allocation call, in one style.

Plain SQL text with psycopg's named parameters (``%(name)s``): run as they are on the driver
connection inside the locked transaction (no per-statement compilation; psycopg prepares them
server-side after a few uses), and through ``exec_driver_sql`` where SQLAlchemy holds the
transaction (unlocked reads, the check's snapshot). Only the schema's name, checked and quoted
(`_schema.quote_schema`), is written into the text; every value is bound. Columns come from
`_rows.COLUMNS`, the JSON ones read as text for `_rows.episode_from_row`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

from ._rows import COLUMNS, JSON_COLUMNS
from ._schema import quote_schema

__all__ = ["Statements", "statements"]

#: The columns a replace never writes: the row's identity (a trigger keeps it, IJ002) and its creation time.
_FIXED: Final = ("namespace", "episode_id", "week_id", "sequence", "allocation_key", "fingerprint", "created_at")
#: What a replace writes: every other column.
_REPLACED: Final = tuple(c for c in COLUMNS if c not in _FIXED)


@dataclass(frozen=True)
class Statements:
    """The statements of one schema (BEGIN and the lock are sent by the store)."""

    #: Rows of the namespace: all, or by key, id or week (append ``ORDER BY`` as needed).
    episodes: str
    holders: str
    load: str
    week: str
    replace: str
    identity: str
    new_identity: str
    #: The check's reads: the weeks' marks and the tombstones.
    marks: str
    tombstones: str


@functools.lru_cache(maxsize=16)
def statements(schema: str) -> Statements:
    s = quote_schema(schema)
    read = ", ".join(f"{c}::text AS {c}" if c in JSON_COLUMNS else c for c in COLUMNS)
    select = f"SELECT {read} FROM {s}.episodes WHERE namespace = %(namespace)s"
    assigned = ", ".join(
        f"{c} = %({c})s::{s}.submission_state" if c == "submission_state" else f"{c} = %({c})s" for c in _REPLACED
    )
    return Statements(
        episodes=select,
        holders=f"{select} AND allocation_key = %(key)s",
        load=f"{select} AND episode_id = %(episode_id)s",
        week=f"{select} AND week_id = %(week_id)s",
        # A conditional update: it applies only to the row as the caller last read it.
        replace=(
            f"UPDATE {s}.episodes SET {assigned}"
            " WHERE namespace = %(namespace)s AND episode_id = %(episode_id)s"
            f" AND submission_state = %(before_state)s::{s}.submission_state"
            " AND submission = %(before_submission)s AND status = %(before_status)s"
            " AND approval IS NOT DISTINCT FROM %(before_approval)s::jsonb"
            " AND effects IS NOT DISTINCT FROM %(before_effects)s::jsonb"
            " RETURNING episode_id"
        ),
        identity=f"SELECT identity FROM {s}.store_identity WHERE namespace = %(namespace)s",
        new_identity=f"INSERT INTO {s}.store_identity (namespace, identity) VALUES (%(namespace)s, %(identity)s)",
        marks=f"SELECT week_id, highest_sequence FROM {s}.weeks WHERE namespace = %(namespace)s",
        tombstones=(
            "SELECT episode_id, week_id, sequence, allocation_key, deleted_at, deleted_by"
            f" FROM {s}.episode_tombstones WHERE namespace = %(namespace)s"
        ),
    )
