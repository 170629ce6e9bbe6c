"""Paid-layer fixtures: the file store (backend conformance is the store suite's job) and the server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import EpisodeStore, open_store
from airflow_idempotent_jobs.testing.server import ProviderServer


@pytest.fixture
def file_store(tmp_path: Path) -> Iterator[EpisodeStore]:
    with open_store(tmp_path / "store") as store:
        yield store


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(polls_to_finish=1) as running:
        yield running
