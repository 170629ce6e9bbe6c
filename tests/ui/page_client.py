"""The page's app in this process, on one store, with Airflow's auth manager replaced by fixed `Access` values."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from fastapi import Request

from airflow_idempotent_jobs.plugins import page_app as page
from airflow_idempotent_jobs.plugins.page_auth import Access, api_user

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")  # at import, not ours
    from fastapi.testclient import TestClient

#: ``get(user, path)``: the status and JSON body of ``GET /api/<path>`` as that user.
Get = Callable[[str, str], tuple[int, Any]]


@contextlib.contextmanager
def page_client(monkeypatch: pytest.MonkeyPatch, store_url: str, access: Mapping[str, Access]) -> Iterator[Get]:
    """The app reading ``store_url`` (``[idempotent_jobs] store``, week zone UTC); users named by a header."""
    monkeypatch.setenv("AIRFLOW__IDEMPOTENT_JOBS__STORE", store_url)
    monkeypatch.setenv("AIRFLOW__IDEMPOTENT_JOBS__TIMEZONE", "UTC")
    monkeypatch.delenv("AIRFLOW__IDEMPOTENT_JOBS__STORE_CONN_ID", raising=False)
    monkeypatch.setattr(page, "access_for", lambda user: access[user])
    app = page.create_app()

    def user(request: Request) -> str:
        return request.headers["x-user"]

    app.dependency_overrides[api_user] = user
    with TestClient(app) as client:

        def get(user_name: str, path: str) -> tuple[int, Any]:
            answer = client.get("/api/" + path, headers={"x-user": user_name})
            return answer.status_code, answer.json()

        yield get
