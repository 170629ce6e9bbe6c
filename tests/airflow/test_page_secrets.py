"""The page's API with a hostile ``[idempotent_jobs] store``: its 503 shows no part of the password
to a store-wide user or a viewer of some DAGs.

In process: the plugin's real FastAPI app under a real HTTP client (Starlette's TestClient), the
deployment's setting read through Airflow's configuration. The auth manager's two answers (who
is logged in, what they may see) are the only stand-ins: the e2e suite runs them for real.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")  # at import, not ours
    from fastapi.testclient import TestClient

from airflow_idempotent_jobs.plugins import page_app as page
from airflow_idempotent_jobs.plugins.page_auth import Access, api_user
from tests.hostile_store_urls import HOSTILE, Hostile, leaked

pytestmark = pytest.mark.airflow

PATHS = ("/api/weeks", "/api/weeks/2026-W32", "/api/episodes/2026-W32-0")
STORE_WIDE = Access(readable_dags=frozenset(), known_dags=frozenset(), store_wide=True)
VIEWER = Access(readable_dags=frozenset({"alpha"}), known_dags=frozenset(), store_wide=False)


@pytest.fixture(params=[STORE_WIDE, VIEWER], ids=["store-wide", "viewer"])
def client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    access: Access = request.param
    monkeypatch.setattr(page, "access_for", lambda user: access)
    app = page.create_app()
    app.dependency_overrides[api_user] = lambda: object()
    with TestClient(app) as test_client:
        yield test_client


@pytest.mark.parametrize("hostile", HOSTILE, ids=[h.name for h in HOSTILE])
def test_the_pages_503_never_shows_the_password(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, hostile: Hostile
) -> None:
    monkeypatch.setenv("AIRFLOW__IDEMPOTENT_JOBS__STORE", hostile.at("127.0.0.1:1/ij"))
    caplog.set_level(logging.DEBUG)
    answers: list[Any] = []
    for path in PATHS:
        answer = client.get(path)
        assert answer.status_code == 503, (path, answer.text)
        detail = answer.json()["detail"]
        assert "\n" not in detail and "Traceback" not in detail
        if hostile.password is None:
            assert detail.startswith("episode store misconfigured: "), detail
            assert "[idempotent_jobs] store" in detail, detail
        else:
            assert detail.startswith("episode store unavailable: "), detail
            assert "ij:***@127.0.0.1:1/ij is unavailable" in detail, detail
        answers.append(answer.text)
    assert leaked(hostile.secrets, *answers, caplog.text) == []
