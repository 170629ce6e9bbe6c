"""The ``episodes`` row: its one column list, and the mapping between a row and an `Episode`.

The table is defined here (`episodes_table`, which `_schema.tables` puts in the schema it
describes); `COLUMNS` is read from that definition, and every statement (`_statements`) and the
allocation function's answer (`_allocate`) is read and written through it. The JSON columns
travel as text and are parsed here by `safe_json`: PostgreSQL's jsonb holds what Python must not
(``1e999`` is a 1 000-digit numeric, nesting thousands deep), and the driver's ``json.loads``
would fail on it with a traceback, or not at all, before anyone knew which row it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from psycopg.types.json import Jsonb
from sqlalchemy import Column, Integer, MetaData, Table, Text
from sqlalchemy.dialects.postgresql import ENUM, JSONB

from ... import safe_json
from ...episode import Episode, SubmissionState
from ...errors import StoreCorrupted

__all__ = [
    "COLUMNS",
    "JSON_COLUMNS",
    "approval_value",
    "effects_value",
    "episode_from_row",
    "episodes_table",
    "row_values",
    "submission_state_type",
]


def submission_state_type(schema: str | None) -> ENUM:
    """The schema's ``submission_state`` enum, as the migrations create it (never created by SQLAlchemy)."""
    return ENUM(*(s.value for s in SubmissionState), name="submission_state", schema=schema, create_type=False)


def episodes_table(metadata: MetaData, state: ENUM) -> Table:
    """``episodes`` as the migrations create it: the one place its columns are written."""
    return Table(
        "episodes",
        metadata,
        Column("namespace", Text, primary_key=True),
        Column("episode_id", Text, primary_key=True),
        Column("week_id", Text, nullable=False),
        Column("sequence", Integer, nullable=False),
        Column("allocation_key", Text, nullable=False),
        Column("fingerprint", Text),
        Column("status", Text, nullable=False),
        Column("created_at", Text, nullable=False),
        Column("updated_at", Text),
        Column("submission_state", state, nullable=False),
        Column("submission", JSONB, nullable=False),
        Column("metadata", JSONB, nullable=False),
        Column("schema_version", Integer, nullable=False),
        Column("approval", JSONB),
        Column("effects", JSONB),
    )


#: Every column of ``episodes``, in table order.
COLUMNS: Final = tuple(c.name for c in episodes_table(MetaData(), submission_state_type(None)).columns)
#: The JSON columns of ``episodes``: read as text and parsed by `safe_json`, never by the driver.
#: ``approval`` (version 3) is NULL for an episode nobody was asked about, ``effects`` (version 6)
#: for an episode none of whose effects began.
JSON_COLUMNS: Final = ("submission", "metadata", "approval", "effects")
#: The JSON columns that are NULL while the record has no such key.
_OPTIONAL: Final = ("approval", "effects")
#: Columns that hold a field of ``to_record()`` as it is (in table order, split around the timestamps).
_PLAIN: Final = ("episode_id", "week_id", "sequence", "allocation_key", "fingerprint", "status")
_PLAIN_TAIL: Final = ("created_at", "updated_at", "schema_version")


def episode_from_row(data: Mapping[Any, Any], where: str) -> Episode:
    """Validate one row of ``episodes`` (its JSON columns as text); anything off is `StoreCorrupted` at ``where``."""
    parsed: dict[str, Any] = {}
    for name in JSON_COLUMNS:
        if data[name] is None and name in _OPTIONAL:  # the record has no such key
            continue
        try:
            parsed[name] = safe_json.loads(data[name])
        except safe_json.UnsafeJson as exc:
            raise StoreCorrupted(where, f"{name}: {exc}") from None
    submission, metadata = parsed["submission"], parsed["metadata"]
    if not isinstance(submission, dict):
        raise StoreCorrupted(where, "submission is not a JSON object")
    if not isinstance(metadata, dict):
        raise StoreCorrupted(where, "metadata is not a JSON object")
    if submission.get("state") != data["submission_state"]:
        raise StoreCorrupted(where, "submission_state column disagrees with the submission record")
    record = {"schema_version": data["schema_version"], **{k: data[k] for k in _PLAIN}}
    record.update(created_at=data["created_at"], updated_at=data["updated_at"])
    record.update(submission=submission, metadata=metadata)
    record.update({name: parsed[name] for name in _OPTIONAL if name in parsed})
    return Episode.from_record(record, where)


def row_values(namespace: str, episode: Episode) -> dict[str, Any]:
    """The parameters of one ``episodes`` row, one per `COLUMNS`: the fields of ``to_record()``, JSON as JSONB.

    ``approval`` and ``effects`` are NULL when the record has none, so such a record reads back without the key.
    """
    record = episode.to_record()
    return {
        "namespace": namespace,
        **{k: record[k] for k in _PLAIN},
        **{k: record[k] for k in _PLAIN_TAIL},
        "submission": Jsonb(record["submission"]),
        "metadata": Jsonb(record["metadata"]),
        "submission_state": episode.submission.state.value,
        "approval": approval_value(record),
        "effects": effects_value(record),
    }


def approval_value(record: Mapping[str, Any]) -> Jsonb | None:
    """A record's approval as the column holds it: NULL when the record has none."""
    return Jsonb(record["approval"]) if "approval" in record else None


def effects_value(record: Mapping[str, Any]) -> Jsonb | None:
    """A record's effects as the column holds them: NULL when the record has none."""
    return Jsonb(record["effects"]) if "effects" in record else None
