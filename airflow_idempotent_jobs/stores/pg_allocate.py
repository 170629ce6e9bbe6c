"""One allocation, one round trip: the call of ``<schema>.allocate_episode`` (migration 0004) and its answers.

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
import re
from typing import TYPE_CHECKING, Any, Final, NoReturn

import psycopg
from psycopg.rows import dict_row

from .. import safe_json
from ..allocation import another_fingerprint, another_week, new_episode, several_holders
from ..episode import Episode
from ..errors import AllocationConflict, IdempotentJobsError, StoreCorrupted
from ..identity import EpisodeId, WeekId
from . import pg_schema
from .pg_session import IDENTITY_RE, row_values

if TYPE_CHECKING:
    from .postgres import PostgresEpisodeStore

__all__ = ["ANSWERS", "Allocated", "call", "call_sql"]

#: SQLSTATEs raised by ``allocate_episode`` (migration 0004): several holders, another week,
#: another fingerprint, a week no sequence can follow, and a call outside READ COMMITTED.
SEVERAL_HOLDERS: Final = "IJ005"
ANOTHER_WEEK: Final = "IJ006"
ANOTHER_FINGERPRINT: Final = "IJ007"
SEQUENCE_EXHAUSTED: Final = "IJ008"
NOT_READ_COMMITTED: Final = "IJ009"
#: Every SQLSTATE of the function that has an answer of its own here (IJ009 cannot happen: the
#: call runs in its own READ COMMITTED transaction; should it, it is a plain database error).
ANSWERS: Final = frozenset({SEVERAL_HOLDERS, ANOTHER_WEEK, ANOTHER_FINGERPRINT, SEQUENCE_EXHAUSTED})
_UNIQUE_VIOLATION: Final = "23505"
#: The last values of a unique violation's detail: ``Key (...)=(<namespace>, <episode id>) already exists.``
_EPISODE_KEY = re.compile(r", ([^,()]+)\) already exists\.?$")
_WEEK_SEQUENCE_KEY = re.compile(r", ([^,()]+), ([0-9]+)\) already exists\.?$")


@dataclasses.dataclass(frozen=True)
class Allocated:
    """What the server answered: the episode (``reused`` set on a retry) and the namespace's identity."""

    episode: Episode
    #: The identity recorded for the namespace, when the call asked for it (else None).
    identity: str | None


@functools.lru_cache(maxsize=16)
def call_sql(schema: str) -> str:
    """The call, for one schema (the schema is a checked, quoted name; everything else is bound)."""
    s = pg_schema.quote_schema(schema)
    return (
        f"SELECT * FROM {s}.allocate_episode(%(namespace)s::text, %(lock_key)s::bigint, %(lock_ms)s::text,"
        " %(week_id)s::text, %(key)s::text, %(fingerprint)s::text, %(now)s::text, %(submission)s::jsonb,"
        " %(metadata)s::jsonb, %(schema_version)s::integer, %(new_identity)s::text)"
    )


def call(
    store: PostgresEpisodeStore,
    conn: psycopg.Connection[Any],
    week: WeekId,
    key: str,
    fingerprint: str | None,
    new_identity: str | None,
) -> Allocated:
    """Allocate in one round trip on ``conn`` (autocommit, idle); a refusal is this package's error.

    ``new_identity``: the identity to record if the namespace has none yet (None: the caller knows it).
    Errors that are not the rule's (lock or statement timeout, a lost connection) are raised as
    they came, for the store's one translation boundary.
    """
    fresh = new_episode(week, 0, key, fingerprint)  # the record, but for its sequence: the server picks it
    submission, metadata, schema_version = _fresh_columns()
    params = {
        "namespace": store.namespace,
        "lock_key": store.lock_key,
        "lock_ms": str(store.timeouts.lock_ms),
        "week_id": str(week),
        "key": key,
        "fingerprint": fingerprint,
        "now": fresh.created_at,
        "submission": submission,
        "metadata": metadata,
        "schema_version": schema_version,
        "new_identity": new_identity,
    }
    try:
        row = _send(conn, call_sql(store.schema), params, explicit=store.explicit_transaction)
    except psycopg.Error as exc:
        if exc.sqlstate != NOT_READ_COMMITTED:
            _refuse(store, week, key, fingerprint, exc)
        # This connection's default isolation is stricter: from now on this store says READ COMMITTED
        # itself (the refused call stopped at its first line: nothing was done).
        store.explicit_transaction = True
        try:
            row = _send(conn, call_sql(store.schema), params, explicit=True)
        except psycopg.Error as again:
            _refuse(store, week, key, fingerprint, again)
    assert row is not None
    identity = row["identity"]
    if identity is not None and not (isinstance(identity, str) and IDENTITY_RE.fullmatch(identity)):
        raise StoreCorrupted(store.where(table="store_identity"), "identity is not 32 hex digits")
    if row["outcome"] == "reused":  # a row written by anyone: read as every read is
        return Allocated(dataclasses.replace(store.episode_from_row(row), reused=True), identity)
    # The row the server just inserted from our own values: only its sequence is news.
    episode = dataclasses.replace(fresh, episode_id=str(EpisodeId(week, row["sequence"])), sequence=row["sequence"])
    if row["episode_id"] != episode.episode_id:
        raise StoreCorrupted(store.where(str(row["episode_id"])), "allocate_episode answered another episode")
    return Allocated(episode, identity)


@functools.lru_cache(maxsize=1)
def _fresh_columns() -> tuple[Any, Any, int]:
    """The submission, metadata and schema_version of every new episode's row, as `row_values` writes them."""
    values = row_values("", new_episode(WeekId(2026, 1), 0, "k", None))
    return values["submission"], values["metadata"], values["schema_version"]


def _send(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any], *, explicit: bool) -> dict[str, Any] | None:
    """One round trip: the call alone in autocommit, or inside ``BEGIN ISOLATION LEVEL READ COMMITTED``.

    The explicit form travels in one simple-protocol message (parameters bound by the client,
    as psycopg's ``ClientCursor`` quotes them); an error in it leaves the transaction aborted,
    so it is rolled back before the connection goes back to the pool.
    """
    if not explicit:
        with conn.cursor(row_factory=dict_row) as cur:
            cur.execute(sql, params)
            return cur.fetchone()
    with psycopg.ClientCursor(conn, row_factory=dict_row) as client:
        try:
            client.execute(f"BEGIN ISOLATION LEVEL READ COMMITTED; {sql}; COMMIT", params)
        except psycopg.Error:
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                conn.execute(b"ROLLBACK")
            raise
        client.nextset()  # past BEGIN's answer, to the call's row
        return client.fetchone()


def _refuse(
    store: PostgresEpisodeStore, week: WeekId, key: str, fingerprint: str | None, exc: psycopg.Error
) -> NoReturn:
    answer = _answer(store, week, key, fingerprint, exc)
    if answer is None:
        raise exc  # not the rule's: the store's boundary translates it
    raise answer from exc


def _answer(
    store: PostgresEpisodeStore, week: WeekId, key: str, fingerprint: str | None, exc: psycopg.Error
) -> IdempotentJobsError | None:
    """The refusal as `allocation` words it, from the function's SQLSTATE and DETAIL; None if not the rule's."""
    state = exc.sqlstate
    if state == _UNIQUE_VIOLATION:
        return _unique_violation(store, week, key, exc)
    if state not in ANSWERS:
        return None
    detail = exc.diag.message_detail
    try:
        facts = safe_json.loads(detail or "")
    except safe_json.UnsafeJson:
        facts = None
    if not isinstance(facts, dict):
        return StoreCorrupted(store.where(), f"allocate_episode answered {state} with {detail!r}")
    if state == SEVERAL_HOLDERS:
        return several_holders(key, [str(i) for i in facts["ids"]])
    if state == ANOTHER_WEEK:
        return another_week(key, week, str(facts["episode_id"]), str(facts["week_id"]))
    if state == ANOTHER_FINGERPRINT:
        stored = facts["fingerprint"]
        return another_fingerprint(key, fingerprint, str(facts["episode_id"]), None if stored is None else str(stored))
    where = store.where(str(week), table="weeks")
    return StoreCorrupted(where, f"highest_sequence {facts['highest']} is out of range")


def _unique_violation(store: PostgresEpisodeStore, week: WeekId, key: str, exc: psycopg.Error) -> IdempotentJobsError:
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
    return StoreCorrupted(store.where(row), f"insert refused by {constraint}")
