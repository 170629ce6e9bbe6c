"""The page on a PostgreSQL store whose schema is not this release's: every user is told why, in one line.

An older schema is "a writer of this release migrates it"; a newer one "upgrade the package". Neither
names a record, so a viewer is told as much as an admin (a damaged record is named to store-wide
users only). Nothing is migrated either way.
"""

from __future__ import annotations

import psycopg
import pytest

from airflow_idempotent_jobs.plugins.page_auth import Access
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from tests.pg import catalog, install_schema
from tests.ui.page_client import page_client

pytestmark = [pytest.mark.airflow, pytest.mark.postgres]

ACCESS = {
    "admin": Access(frozenset({"a"}), frozenset({"a"}), store_wide=True),
    "viewer": Access(frozenset({"a"}), frozenset(), store_wide=False),
}


def _answers(monkeypatch: pytest.MonkeyPatch, url: str) -> list[tuple[str, int, str]]:
    """Each user's answer to ``GET /api/weeks``: status and detail."""
    with page_client(monkeypatch, url, ACCESS) as get:
        answers = {name: get(name, "weeks") for name in ACCESS}
    return [(name, status, body["detail"]) for name, (status, body) in answers.items()]


def test_a_newer_schema_tells_every_user_to_upgrade(monkeypatch: pytest.MonkeyPatch, pg_database: str) -> None:
    newer = pg_schema.LATEST_VERSION + 1
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("INSERT INTO idempotent_jobs.schema_version (version, name) VALUES (%s, 'later')", (newer,))
    before = catalog(pg_database)
    for name, status, detail in _answers(monkeypatch, pg_database):
        assert status == 503, (name, detail)
        assert detail.startswith("episode store unavailable: "), (name, detail)
        assert f"schema version {newer} is newer than this code's" in detail and "upgrade" in detail, (name, detail)
    assert catalog(pg_database) == before


def test_an_older_schema_tells_every_user_a_writer_migrates_it(
    monkeypatch: pytest.MonkeyPatch, empty_database: str
) -> None:
    older = pg_schema.LATEST_VERSION - 1
    install_schema(empty_database, older, [("2026-W32", 0, "old")])
    before = catalog(empty_database)
    for name, status, detail in _answers(monkeypatch, empty_database):
        assert status == 503, (name, detail)
        assert f"is at version {older}, this code reads {pg_schema.LATEST_VERSION}" in detail, (name, detail)
        assert "a writer of this release migrates it" in detail, (name, detail)
    assert catalog(empty_database) == before
