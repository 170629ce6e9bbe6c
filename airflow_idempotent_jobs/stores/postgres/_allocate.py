"""One allocation, one round trip: the call of ``<schema>.allocate_episode`` (migration 0006) and its answers.

The rule runs in the server, so the namespace's advisory lock is held for the server's own work
only, never across a network round trip. The call is one statement in autocommit: its own
transaction, committed by the server before it answers. The function must run under READ
COMMITTED (its reads after the lock must see every commit made while it waited) and says so
(IJ009) when a connection's ``default_transaction_isolation`` is stricter; from then on the store
sends ``BEGIN ISOLATION LEVEL READ COMMITTED; SELECT ...; COMMIT`` as one message instead (still
one round trip, measured slower: ``benchmarks/postgres.py``). The function's SQLSTATEs become the
very errors `allocation.decide` gives, worded by the same functions.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from typing import Any, Final, NoReturn

import psycopg
from psycopg.rows import dict_row

from ... import safe_json
from ...allocation import another_fingerprint, another_week, new_episode, several_holders
from ...episode import Episode, utc_now
from ...errors import AllocationConflict, IdempotentJobsError, StoreCorrupted
from ...identity import WeekId
from ...owner import Owner
from ._context import StoreContext
from ._schema import quote_schema
from ._session import IDENTITY_RE

__all__ = ["ANSWERS", "Allocated", "NeedsReadCommitted", "call", "call_sql", "row_deleted"]

#: SQLSTATEs raised by ``allocate_episode`` (migrations 0004-0006): several holders, another week,
#: another fingerprint, a week no sequence can follow, a call outside READ COMMITTED, and a key
#: whose episode row was deleted (its tombstone).
SEVERAL_HOLDERS: Final = "IJ005"
ANOTHER_WEEK: Final = "IJ006"
ANOTHER_FINGERPRINT: Final = "IJ007"
SEQUENCE_EXHAUSTED: Final = "IJ008"
NOT_READ_COMMITTED: Final = "IJ009"
ROW_DELETED: Final = "IJ010"
#: Every SQLSTATE of the function that has an answer of its own here (IJ009 cannot happen: the
#: call runs in its own READ COMMITTED transaction; should it, it is a plain database error).
ANSWERS: Final = frozenset({SEVERAL_HOLDERS, ANOTHER_WEEK, ANOTHER_FINGERPRINT, SEQUENCE_EXHAUSTED, ROW_DELETED})
_UNIQUE_VIOLATION: Final = "23505"
#: The metadata of a new row allocated without an owner.
_NO_METADATA: Final = json.dumps(new_episode(WeekId(2026, 1), 0, "k", None).to_record()["metadata"])
#: The last values of a unique violation's detail: ``Key (...)=(<namespace>, <episode id>) already exists.``
_EPISODE_KEY = re.compile(r", ([^,()]+)\) already exists\.?$")
_WEEK_SEQUENCE_KEY = re.compile(r", ([^,()]+), ([0-9]+)\) already exists\.?$")


class NeedsReadCommitted(Exception):
    """The connection's default isolation is stricter than READ COMMITTED (IJ009): nothing was done.

    The caller sends this call and every later one in a READ COMMITTED transaction of its own.
    """


@dataclasses.dataclass(frozen=True)
class Allocated:
    """What the server answered: the episode (``reused`` set on a retry) and the namespace's identity."""

    episode: Episode
    #: The identity recorded for the namespace, when the call asked for it (else None).
    identity: str | None


@functools.lru_cache(maxsize=16)
def call_sql(schema: str, lock_key: int, lock_ms: int) -> str:
    """The call for one store, prepared once per connection: the store's constants are written into it.

    The lock key and timeout are our own integers, the fresh submission our own JSON; what varies
    per call (namespace, week, key, fingerprint, time, the new row's metadata: its recorded owner,
    new identity) is bound, positionally.
    """
    submission, schema_version = _fresh_columns()
    s = quote_schema(schema)
    return (
        f"SELECT * FROM {s}.allocate_episode(%s::text, {lock_key:d}::bigint, '{lock_ms:d}'::text, %s::text,"
        f" %s::text, %s::text, %s::text, {_literal(submission)}::jsonb, %s::jsonb,"
        f" {schema_version:d}::integer, %s::text)"
    )


def call(
    context: StoreContext,
    conn: psycopg.Connection[Any],
    week: WeekId,
    key: str,
    fingerprint: str | None,
    new_identity: str | None,
    owner: Owner | None = None,
    *,
    explicit: bool = False,
) -> Allocated:
    """Allocate in one round trip on ``conn`` (autocommit, idle); a refusal is this package's error.

    ``new_identity``: the identity to record if the namespace has none yet (None: the caller knows it).
    ``owner``: recorded in the new row's metadata, by the function's own insert.
    ``explicit``: send it inside ``BEGIN ISOLATION LEVEL READ COMMITTED``; without it, a
    connection whose default isolation is stricter is `NeedsReadCommitted` (the refused call
    stopped at its first line: nothing was done).
    Errors that are not the rule's (lock or statement timeout, a lost connection) are raised as
    they came, for the store's one translation boundary.
    """
    now = utc_now()  # the new row's created_at and updated_at, if the server writes one
    sql = call_sql(context.schema, context.lock_key, context.timeouts.lock_ms)
    # The new row's metadata, as `new_episode` makes it: nothing, or the owner.
    metadata = _NO_METADATA if owner is None else json.dumps(dict(new_episode(week, 0, key, None, owner).metadata))
    params = (context.namespace, str(week), key, fingerprint, now, metadata, new_identity)
    try:
        row = _send(conn, sql, params, explicit=explicit)
    except psycopg.Error as exc:
        if exc.sqlstate == NOT_READ_COMMITTED and not explicit:
            raise NeedsReadCommitted from exc
        _refuse(context, week, key, fingerprint, exc)
    assert row is not None
    outcome, identity, sequence = row["outcome"], row["identity"], row["sequence"]
    if identity is not None and not (isinstance(identity, str) and IDENTITY_RE.fullmatch(identity)):
        raise StoreCorrupted(context.where(table="store_identity"), "identity is not 32 hex digits")
    if outcome == "reused":  # a row written by anyone: read as every read is
        held = context.episode(row)  # the function answers the row's columns by their names
        return Allocated(dataclasses.replace(held, reused=True), identity)
    if outcome != "new" or not isinstance(sequence, int):
        raise StoreCorrupted(context.where(str(week)), f"allocate_episode answered {outcome!r}, {sequence!r}")
    # The row the server just inserted from our own values: only its sequence is news.
    episode = dataclasses.replace(new_episode(week, sequence, key, fingerprint, owner), created_at=now, updated_at=now)
    return Allocated(episode, identity)


@functools.lru_cache(maxsize=1)
def _fresh_columns() -> tuple[str, int]:
    """The submission (JSON text) and schema_version of every new episode's row."""
    record = new_episode(WeekId(2026, 1), 0, "k", None).to_record()
    return json.dumps(record["submission"]), int(record["schema_version"])


def _literal(text: str) -> str:
    """``text`` as a dollar-quoted SQL literal (our own JSON: no quoting rule of the server applies inside)."""
    if "$ij$" in text:
        raise ValueError("the fresh record's JSON cannot be quoted")
    return f"$ij${text}$ij$"


def _send(conn: psycopg.Connection[Any], sql: str, params: tuple[Any, ...], *, explicit: bool) -> dict[str, Any] | None:
    """One round trip: the call alone in autocommit, or inside ``BEGIN ISOLATION LEVEL READ COMMITTED``.

    Alone, psycopg prepares it on the connection after a few uses (its ``prepare_threshold``; the
    one extra round trip of preparing is paid once per connection, then the server skips parsing
    and planning). Not on the first use: the first call on a new connection stays one round trip.

    The explicit form travels in one simple-protocol message (parameters bound by the client,
    as psycopg's ``ClientCursor`` quotes them); an error in it leaves the transaction aborted,
    so it is rolled back before the connection goes back to the pool.
    """
    if not explicit:
        with conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(sql, params).fetchone()
    with psycopg.ClientCursor(conn, row_factory=dict_row) as client:
        try:
            client.execute(f"BEGIN ISOLATION LEVEL READ COMMITTED; {sql}; COMMIT", params)
        except psycopg.Error:
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                conn.execute(b"ROLLBACK")
            raise
        client.nextset()  # past BEGIN's answer, to the call's row
        return client.fetchone()


def _refuse(context: StoreContext, week: WeekId, key: str, fingerprint: str | None, exc: psycopg.Error) -> NoReturn:
    answer = _answer(context, week, key, fingerprint, exc)
    if answer is None:
        raise exc  # not the rule's: the store's boundary translates it
    raise answer from exc


def _answer(
    context: StoreContext, week: WeekId, key: str, fingerprint: str | None, exc: psycopg.Error
) -> IdempotentJobsError | None:
    """The refusal as `allocation` words it, from the function's SQLSTATE and DETAIL; None if not the rule's."""
    state = exc.sqlstate
    if state == _UNIQUE_VIOLATION:
        return _unique_violation(context, week, key, exc)
    if state not in ANSWERS:
        return None
    detail = exc.diag.message_detail
    try:
        facts = safe_json.loads(detail or "")
    except safe_json.UnsafeJson:
        facts = None
    if not isinstance(facts, dict):
        return StoreCorrupted(context.where(), f"allocate_episode answered {state} with {detail!r}")
    if state == SEVERAL_HOLDERS:
        return several_holders(key, [str(i) for i in facts["ids"]])
    if state == ANOTHER_WEEK:
        return another_week(key, week, str(facts["episode_id"]), str(facts["week_id"]))
    if state == ANOTHER_FINGERPRINT:
        stored = facts["fingerprint"]
        return another_fingerprint(key, fingerprint, str(facts["episode_id"]), None if stored is None else str(stored))
    if state == ROW_DELETED:
        return row_deleted(context, key, facts)
    where = context.where(str(week), table="weeks")
    return StoreCorrupted(where, f"highest_sequence {facts['highest']} is out of range")


def row_deleted(context: StoreContext, key: str, facts: dict[str, Any]) -> StoreCorrupted:
    """The key's episode row was deleted: a new episode would be a second job for the same invocation."""
    episode_id = str(facts.get("episode_id"))
    return StoreCorrupted(
        context.where(episode_id),
        f"the row of key {key!r} was deleted by {facts.get('deleted_by')} at {facts.get('deleted_at')}: a new "
        f"episode would be a second job, so its retry is refused; restore the row from {context.schema}."
        "episode_tombstones, or delete its tombstone to let the key have a new episode",
    )


def _unique_violation(context: StoreContext, week: WeekId, key: str, exc: psycopg.Error) -> IdempotentJobsError:
    """Under the advisory lock only a writer that bypassed it can get here: fail closed."""
    constraint = exc.diag.constraint_name
    if constraint == "episodes_allocation_key_key":
        return AllocationConflict(key, "committed concurrently outside the lock")
    detail = exc.diag.message_detail or ""
    row = str(week)
    if found := _WEEK_SEQUENCE_KEY.search(detail):
        row = f"{found.group(1)}-{found.group(2)}"
    elif found := _EPISODE_KEY.search(detail):
        row = found.group(1)
    return StoreCorrupted(context.where(row), f"insert refused by {constraint}")
