"""``POST /api/episodes/{id}/settle`` in this process: the request's proofs, its body, and what it records.

The auth manager's answers are fixed (`Access` for reading, ``may_settle`` for editing); the real
auth manager's are checked by e2e/test_ui_api.py against a running api-server. A user is named by
the ``x-user`` header and authenticated by a Bearer token of their own.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import Request

from airflow_idempotent_jobs.episode import EpisodeStatus, SubmissionState
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.operations import Owner
from airflow_idempotent_jobs.plugins import page_app as page
from airflow_idempotent_jobs.plugins import page_settle
from airflow_idempotent_jobs.plugins.page_auth import Access, api_user
from airflow_idempotent_jobs.stores import EpisodeStore, open_store

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

EDITOR, VIEWER, OTHER = "carol", "alice", "bob"
ACCESS = {
    EDITOR: Access(frozenset({"alpha"}), frozenset(), False),
    VIEWER: Access(frozenset({"alpha"}), frozenset(), False),
    OTHER: Access(frozenset({"beta"}), frozenset(), False),
}
HOST = "testserver"


@dataclasses.dataclass(frozen=True)
class User:
    name: str

    def get_name(self) -> str:
        return self.name


def _lost(store: EpisodeStore, run: str) -> tuple[str, str]:
    """An alpha episode whose paid answer was lost: (id, updated_at)."""
    episode = store.allocate(
        WeekId.parse("2026-W32"), f"airflow:alpha:allocate:{run}", owner=Owner("alpha", "allocate", run, None)
    )
    for state, extra in (
        (
            SubmissionState.SUBMITTING,
            {"claimed_by": "gone:1:x", "claimed_at": "2026-01-01T00:00:00+00:00", "token": "t-" + run},
        ),
        (SubmissionState.UNKNOWN, {"error": "answer lost"}),
    ):

        def change(now: Any, state: Any = state, extra: Any = extra) -> Any:
            moved = now.submission.moved_to(state, episode_id=episode.episode_id, note="test", **extra)
            return dataclasses.replace(now, status=EpisodeStatus.RUNNING, submission=moved)

        store.update(episode.episode_id, change)
    shown = store.get(episode.episode_id)
    assert shown.updated_at is not None
    return shown.episode_id, shown.updated_at


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    monkeypatch.setenv("AIRFLOW__IDEMPOTENT_JOBS__STORE", str(tmp_path / "store"))
    monkeypatch.setenv("AIRFLOW__IDEMPOTENT_JOBS__TIMEZONE", "UTC")
    monkeypatch.delenv("AIRFLOW__IDEMPOTENT_JOBS__STORE_CONN_ID", raising=False)
    monkeypatch.setattr(page, "access_for", lambda user: ACCESS[user.name])
    monkeypatch.setattr(page_settle, "may_settle", lambda user, episode, access: user.name == EDITOR)
    with open_store(tmp_path / "store") as store:
        store.allocate(WeekId.parse("2026-W31"), "warm-up")  # the store exists before the page reads it
    app = page.create_app()

    def user(request: Request) -> User:
        return User(request.headers["x-user"])

    app.dependency_overrides[api_user] = user
    with TestClient(app) as test_client:
        yield test_client, tmp_path / "store"


def _post(
    client: TestClient, user: str, eid: str, body: Any, *, csrf: str | None = "session", origin: str | None = "own"
) -> tuple[int, Any]:
    headers = {"x-user": user, "Authorization": f"Bearer token-of-{user}"}
    if csrf == "session":
        csrf = client.get("/api/session", headers=headers).json()["csrf_token"]
    if csrf is not None:
        headers["X-CSRF-Token"] = csrf
    if origin is not None:
        headers["Origin"] = f"http://{HOST}" if origin == "own" else origin
    answer = client.post(f"/api/episodes/{eid}/settle", json=body, headers=headers)
    return answer.status_code, answer.json()


def test_the_editor_settles_and_the_record_says_who_how_and_why(client: tuple[TestClient, Path]) -> None:
    app, path = client
    with open_store(path) as store:
        eid, seen = _lost(store, "manual__1")
    body = {"answer": "ours", "remote_ref": "job-7", "comment": "in the console", "seen_updated_at": seen}
    status, view = _post(app, EDITOR, eid, body)
    assert status == 200, view
    with open_store(path) as store:
        sub = store.get(eid).submission
    assert (sub.state, sub.remote_ref, sub.settled_by) == (SubmissionState.ACCEPTED, "job-7", EDITOR)
    assert {k: sub.history[-1][k] for k in ("by", "via", "comment")} == {
        "by": EDITOR,
        "via": "ui",
        "comment": "in the console",
    }
    assert view["episode"]["submission"]["state"] == "accepted"
    assert _post(app, EDITOR, eid, body)[0] == 409  # settled already


@pytest.mark.parametrize(
    ("user", "csrf", "origin", "status"),
    [
        (VIEWER, "session", "own", 403),  # may read alpha, may not edit it
        (OTHER, "session", "own", 404),  # may not even see it
        (EDITOR, None, "own", 403),  # no token: a form or an <img> from anywhere
        (EDITOR, "0" * 64, "own", 403),  # a guessed token
        (EDITOR, "session", "https://evil.example", 403),  # another site's script
        (EDITOR, "session", "null", 403),  # a sandboxed frame
    ],
)
def test_refusals_change_nothing(
    client: tuple[TestClient, Path], user: str, csrf: str | None, origin: str, status: int
) -> None:
    app, path = client
    with open_store(path) as store:
        eid, seen = _lost(store, "manual__2")
        before = store.get(eid)
    body = {"answer": "not_submitted", "comment": "never sent", "seen_updated_at": seen}
    assert _post(app, user, eid, body, csrf=csrf, origin=origin)[0] == status
    with open_store(path) as store:
        assert store.get(eid) == before


def test_a_cookie_session_must_say_where_it_comes_from(client: tuple[TestClient, Path]) -> None:
    app, path = client
    with open_store(path) as store:
        eid, seen = _lost(store, "manual__3")
    app.cookies.set("_token", "cookie-token-of-carol")
    headers = {"x-user": EDITOR}
    csrf = app.get("/api/session", headers=headers).json()["csrf_token"]
    body = {"answer": "not_submitted", "comment": "never sent", "seen_updated_at": seen}
    answer = app.post(f"/api/episodes/{eid}/settle", json=body, headers={**headers, "X-CSRF-Token": csrf})
    assert answer.status_code == 403 and "without Origin" in answer.json()["detail"]
    answer = app.post(
        f"/api/episodes/{eid}/settle", json=body, headers={**headers, "X-CSRF-Token": csrf, "Origin": f"http://{HOST}"}
    )
    assert answer.status_code == 200, answer.json()


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ([], "a JSON object"),
        ({"answer": "maybe", "comment": "x"}, "answer must be one of"),
        ({"answer": "not_submitted"}, "comment is required"),
        ({"answer": "not_submitted", "comment": "   "}, "comment is required"),
        ({"answer": "not_submitted", "comment": "x\u202ey"}, "printable"),
        ({"answer": "not_submitted", "comment": "x" * 2001}, "at most 2000"),
        ({"answer": "ours", "comment": "x"}, "remote_ref"),
        ({"answer": "ours", "comment": "x", "remote_ref": "a\x1bb"}, "remote_ref"),
        ({"answer": "not_submitted", "comment": "x", "remote_ref": "job"}, "goes with answer 'ours'"),
        ({"answer": "not_submitted", "comment": "x", "extra": 1}, "unknown field"),
    ],
)
def test_bad_bodies_are_400_naming_what(client: tuple[TestClient, Path], body: Any, fragment: str) -> None:
    app, path = client
    with open_store(path) as store:
        eid, _ = _lost(store, "manual__4")
    status, answer = _post(app, EDITOR, eid, body)
    assert status == 400 and fragment in answer["detail"], answer


def test_a_changed_episode_is_refused_with_the_reason(client: tuple[TestClient, Path]) -> None:
    app, path = client
    with open_store(path) as store:
        eid, _ = _lost(store, "manual__5")
    body = {"answer": "not_submitted", "comment": "x", "seen_updated_at": "2026-01-01T00:00:00+00:00"}
    status, answer = _post(app, EDITOR, eid, body)
    assert status == 409 and "changed since it was shown" in answer["detail"], answer


@pytest.mark.parametrize("name", ["carol\x1b[2Jx", "carol\troot", "c" * 513, "   "])
def test_an_airflow_user_name_the_cli_would_refuse_as_by_settles_nothing(
    client: tuple[TestClient, Path], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The recorded name is held to the CLI's --by rule: a name no listing could show is not stored."""
    app, path = client
    monkeypatch.setattr(page, "access_for", lambda user: ACCESS[EDITOR])
    monkeypatch.setattr(page_settle, "may_settle", lambda user, episode, access: True)
    with open_store(path) as store:
        eid, seen = _lost(store, "manual__by")
        before = store.get(eid)
    headers = {"x-user": name, "Authorization": "Bearer token-of-someone", "Origin": f"http://{HOST}"}
    csrf = app.get("/api/session", headers=headers).json()["csrf_token"]
    body = {"answer": "not_submitted", "comment": "never sent", "seen_updated_at": seen}
    answer = app.post(f"/api/episodes/{eid}/settle", json=body, headers={**headers, "X-CSRF-Token": csrf})
    assert answer.status_code == 400 and "as the CLI's --by" in answer.json()["detail"]
    with open_store(path) as store:
        assert store.get(eid) == before


def test_an_empty_bearer_header_beside_the_cookie_is_a_cookie_session(client: tuple[TestClient, Path]) -> None:
    """The credential is the cookie's, so the request must say where it comes from, as any browser's."""
    app, path = client
    with open_store(path) as store:
        eid, seen = _lost(store, "manual__empty_bearer")
        before = store.get(eid)
    app.cookies.set("_token", "cookie-token-of-carol")
    headers = {"x-user": EDITOR, "Authorization": "Bearer "}
    csrf = app.get("/api/session", headers=headers).json()["csrf_token"]
    body = {"answer": "not_submitted", "comment": "never sent", "seen_updated_at": seen}
    answer = app.post(f"/api/episodes/{eid}/settle", json=body, headers={**headers, "X-CSRF-Token": csrf})
    assert answer.status_code == 403 and "without Origin" in answer.json()["detail"]
    with open_store(path) as store:
        assert store.get(eid) == before
