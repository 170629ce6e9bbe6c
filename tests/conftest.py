"""Shared fixtures: ``backend`` runs a test once per store backend (the conformance suite)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import EpisodeStore
from tests.backends import Backend, FileBackend, PostgresBackend
from tests.pg import empty_database, pg_database, pg_server  # noqa: F401  (fixtures)

#: Backend names the conformance suite runs against; the PostgreSQL store adds "postgres".
BACKENDS = ["file", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "file":
        yield FileBackend(tmp_path / "store")
    elif request.param == "postgres":
        yield PostgresBackend(request.getfixturevalue("pg_database"))
    else:  # pragma: no cover - added by other backends
        raise AssertionError(request.param)


@pytest.fixture
def store(backend: Backend) -> Iterator[EpisodeStore]:
    with backend.open() as opened:
        yield opened
