"""The PostgreSQL store's schema: migrations, their agreement with the code, and the enums kept in sync."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql.base import PGInspector

from airflow_idempotent_jobs import EpisodeStatus, StoreCorrupted, SubmissionState
from airflow_idempotent_jobs.episode import TRANSITIONS
from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from tests.backends import PostgresBackend
from tests.pg import spawn_together

pytestmark = pytest.mark.postgres


def _versions(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        return [(int(v), str(n)) for v, n in conn.execute("SELECT version, name FROM idempotent_jobs.schema_version")]


def test_migrations_from_scratch_then_rerun_change_nothing(empty_database: str) -> None:
    assert [m.version for m in pg_schema.MIGRATIONS] == list(range(1, pg_schema.LATEST_VERSION + 1))
    with PostgresEpisodeStore(empty_database) as store:
        store.allocate("2026-W32", "first")
    assert _versions(empty_database) == [(m.version, m.name) for m in pg_schema.MIGRATIONS]
    backend = PostgresBackend(empty_database)
    before = backend.snapshot()
    # A new store object checks again; a forced run of the migrator finds nothing to do.
    store = PostgresEpisodeStore(empty_database)
    try:
        store.ensure_schema()
        with store.engine.begin() as conn:
            found = pg_schema.migrate(conn, store.schema, where=store.where(), lock_timeout_ms=5000)
        assert found == pg_schema.LATEST_VERSION
    finally:
        store.close()
    assert backend.snapshot() == before


def _first_use(url: str, key: str, barrier: Any, results: Any) -> None:
    try:
        with PostgresEpisodeStore(url) as store:
            barrier.wait(timeout=60)
            results.put(store.allocate("2026-W32", key).episode_id)
    except BaseException as exc:
        results.put(f"{type(exc).__name__}: {exc}")


def test_concurrent_first_uses_create_the_schema_once(empty_database: str) -> None:
    got = sorted(spawn_together(_first_use, [(empty_database, f"k{i}") for i in range(4)], timeout=60))
    assert got == [f"2026-W32-{i}" for i in range(4)]
    assert _versions(empty_database) == [(m.version, m.name) for m in pg_schema.MIGRATIONS]


def _type_name(column: Any, dialect: sa.Dialect) -> str:
    kind = column.type if isinstance(column, sa.Column) else column["type"]
    return str(kind.compile(dialect=dialect)).lower()


def test_migrations_give_the_schema_the_code_expects(pg_database: str) -> None:
    expected = pg_schema.tables(pg_schema.DEFAULT_SCHEMA)
    engine = sa.create_engine(pg_database.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        inspector = sa.inspect(engine)
        assert isinstance(inspector, PGInspector)
        schema = expected.schema
        assert set(inspector.get_table_names(schema=schema)) == {t.name for t in expected.metadata.sorted_tables}
        for table in expected.metadata.sorted_tables:
            found = inspector.get_columns(table.name, schema=schema)
            assert [c["name"] for c in found] == [c.name for c in table.columns], table.name
            for column, reflected in zip(table.columns, found, strict=True):
                assert _type_name(reflected, engine.dialect) == _type_name(column, engine.dialect), column
                assert reflected["nullable"] == column.nullable, column
            primary = inspector.get_pk_constraint(table.name, schema=schema)["constrained_columns"]
            assert primary == [c.name for c in table.primary_key.columns], table.name
        uniques = {tuple(u["column_names"]) for u in inspector.get_unique_constraints("episodes", schema=schema)}
        assert uniques == {("namespace", "week_id", "sequence"), ("namespace", "allocation_key")}
        enums = {e["name"]: e["labels"] for e in inspector.get_enums(schema=schema)}
        state = expected.episodes.c.submission_state.type
        assert isinstance(state, sa.Enum)
        assert enums == {"submission_state": list(state.enums)}
    finally:
        engine.dispose()


def test_python_enums_and_sql_enums_agree(pg_database: str) -> None:
    with psycopg.connect(pg_database) as conn:
        row = conn.execute("SELECT enum_range(NULL::idempotent_jobs.submission_state)::text[]").fetchone()
        assert row is not None
        assert row[0] == [s.value for s in SubmissionState]
        moves = set(conn.execute("SELECT from_state::text, to_state::text FROM idempotent_jobs.submission_transitions"))
        assert moves == {(a.value, b.value) for a, targets in TRANSITIONS.items() for b in targets}
        check = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'episodes_status_check'"
        ).fetchone()
        assert check is not None
        assert set(re.findall(r"'([a-z_]+)'::text", check[0])) == {s.value for s in EpisodeStatus}


def test_a_schema_newer_than_the_code_is_refused_and_left_alone(pg_database: str) -> None:
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("INSERT INTO idempotent_jobs.schema_version (version, name) VALUES (999, 'from_the_future')")
    backend = PostgresBackend(pg_database)
    before = backend.snapshot()
    with PostgresEpisodeStore(pg_database) as store, pytest.raises(StoreCorrupted, match="newer than this code"):
        store.allocate("2026-W32", "k")
    assert backend.snapshot() == before


def test_importing_the_package_does_not_import_sqlalchemy() -> None:
    code = (
        "import sys, airflow_idempotent_jobs as p\n"
        "p.open_store('/nonexistent/store')\n"
        "print(sorted(m for m in ('sqlalchemy', 'psycopg', 'airflow') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_a_version_3_store_upgrades_to_4_in_place_and_its_data_allocates(empty_database: str) -> None:
    """Migration 0004 adds only the function: every row stays, and the old rows meet the new rule."""
    from airflow_idempotent_jobs import AllocationConflict
    from airflow_idempotent_jobs.allocation import new_episode
    from airflow_idempotent_jobs.identity import WeekId
    from tests.pg import insert_episode

    engine = sa.create_engine(empty_database.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as conn:
            pg_schema.migrate(conn, "idempotent_jobs", where="v3", lock_timeout_ms=5000, target=3)
    finally:
        engine.dispose()
    with psycopg.connect(empty_database, autocommit=True) as conn:  # written as a version 3 writer wrote
        conn.execute("INSERT INTO idempotent_jobs.store_identity (namespace, identity) VALUES ('default', md5('v3'))")
        for week, sequence, key in (("2026-W31", 0, "old-a"), ("2026-W32", 0, "old-b"), ("2026-W32", 1, "old-c")):
            insert_episode(conn, "default", new_episode(WeekId.parse(week), sequence, key, "fp"), version=3)
        conn.execute("UPDATE idempotent_jobs.weeks SET highest_sequence = 4 WHERE week_id = '2026-W32'")
    backend = PostgresBackend(empty_database)
    before = backend.snapshot()
    with PostgresEpisodeStore(empty_database) as store:
        retry = store.allocate("2026-W32", "old-c", "fp")  # the first write migrates
        assert (retry.episode_id, retry.reused) == ("2026-W32-1", True)
        after = backend.snapshot()
        assert [k for k in after if k not in before] == ["schema_version/4", "schema_version/5", "schema_version/6"]
        assert {k: v for k, v in after.items() if k in before} == before  # every row of every table as it was
        assert _versions(empty_database)[3] == (4, "allocate_function")
        with pytest.raises(AllocationConflict, match="already allocated in 2026-W31"):
            store.allocate("2026-W32", "old-a", "fp")
        with pytest.raises(AllocationConflict, match="differs from the stored 'fp'"):
            store.allocate("2026-W32", "old-b", "other")
        assert store.allocate("2026-W32", "new").episode_id == "2026-W32-5"  # past the mark of version 3
        assert store.identity == hashlib.md5(b"v3").hexdigest()


def _catalog(conn: psycopg.Connection[Any], schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """What the migrations made of ``schema`` beyond its tables: triggers (and whether they always fire),
    functions, indexes and constraints, with the schema's name taken out."""

    def rows(sql: str) -> list[tuple[Any, ...]]:
        found = conn.execute(sql, {"schema": schema}).fetchall()
        return sorted(tuple(str(v).replace(f'"{schema}"', "<s>").replace(schema, "<s>") for v in r) for r in found)

    where = "n.nspname = %(schema)s"
    return {
        "triggers": rows(
            "SELECT c.relname, t.tgname, t.tgenabled, pg_get_triggerdef(t.oid) FROM pg_trigger t"
            f" JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {where}"
            " AND NOT t.tgisinternal"
        ),
        "functions": rows(
            "SELECT p.proname, pg_get_function_arguments(p.oid), p.prosrc FROM pg_proc p"
            f" JOIN pg_namespace n ON n.oid = p.pronamespace WHERE {where}"
        ),
        "indexes": rows("SELECT indexname, indexdef FROM pg_indexes n WHERE n.schemaname = %(schema)s"),
        "constraints": rows(
            "SELECT c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c"
            f" JOIN pg_namespace n ON n.oid = c.connamespace WHERE {where}"
        ),
    }


def test_a_version_4_store_upgrades_to_5_in_place_like_a_new_store(empty_database: str) -> None:
    """Migration 0005 (tombstones, TRUNCATE refused, guards that always fire) keeps every row and makes,
    from version 4 as from version 1, the schema a new store gets; a row deleted before it has no
    tombstone, and check still names it."""
    engine = sa.create_engine(empty_database.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        for schema, target in (("from_v4", 4), ("from_v1", 1)):
            with engine.begin() as conn:
                pg_schema.migrate(conn, schema, where=schema, lock_timeout_ms=5000, target=target)
    finally:
        engine.dispose()
    with psycopg.connect(empty_database, autocommit=True) as conn:  # allocated as a version 4 writer did
        for key in ("a", "b", "c"):
            conn.execute(
                "SELECT outcome FROM from_v4.allocate_episode('default', 1, '5000', '2026-W32', %s, NULL,"
                " '2026-08-03T00:00:00.000000+00:00', '{\"state\": \"none\"}', '{}', 1, md5('v4'))",
                (key,),
            )
        conn.execute("DELETE FROM from_v4.episodes WHERE episode_id = '2026-W32-1'")  # before the upgrade
    backend = PostgresBackend(empty_database, schema="from_v4")
    before = backend.snapshot()
    with PostgresEpisodeStore(empty_database, schema="from_v4") as store:
        assert store.allocate("2026-W32", "c").reused  # the first write migrates
        assert [k for k in backend.snapshot() if k not in before] == ["schema_version/5", "schema_version/6"]
        assert {k: v for k, v in backend.snapshot().items() if k in before} == before
        [problem] = store.check([]).problems
        assert problem.where.endswith("[default/2026-W32-1]") and "no row and no tombstone" in problem.message
        # Not a tombstone's refusal: nothing recorded which key the row had (documented).
        assert store.allocate("2026-W32", "d").episode_id == "2026-W32-3"
    for schema in ("from_v1", "fresh"):
        PostgresEpisodeStore(empty_database, schema=schema).ensure_schema()
    with psycopg.connect(empty_database) as conn:
        fresh = _catalog(conn, "fresh")
        assert [t[:3] for t in fresh["triggers"] if t[1] != "episodes_guard_approval"] == [
            ("episodes", "episodes_guard_effects", "A"),
            ("episodes", "episodes_guard_update", "A"),
            ("episodes", "episodes_refuse_truncate", "A"),
            ("episodes", "episodes_tombstone", "A"),
            ("store_identity", "store_identity_guard", "A"),
        ]
        assert _catalog(conn, "from_v4") == fresh
        assert _catalog(conn, "from_v1") == fresh
