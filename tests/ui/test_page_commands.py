"""The page's commands and units, in this process on a real store: what an on-call person copies from
the page works as it is in a shell with the deployment's settings, and never carries a password.

- Each attention command names the store as the deployment does (``--store-conn-id ID`` for
  ``[idempotent_jobs] store_conn_id``, ``--airflow-store`` for ``[idempotent_jobs] store``); a
  submission's entry also gives its token and the lookup command.
- The command copied from the page settles the episode when run by the installed CLI with the
  deployment's environment, on both stores.
- ``[idempotent_jobs] currency`` is in every answer; one that is not a unit is a 503 naming it.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
from pathlib import Path

import pytest

from airflow_idempotent_jobs.plugins import page_settle
from airflow_idempotent_jobs.plugins.page_auth import Access
from airflow_idempotent_jobs.plugins.page_settings import name_the_store, store_option
from e2e.ui_seed import ALPHA, lost_episode
from tests.backends import Backend
from tests.clirun import run_cli
from tests.ui.page_client import page_client

pytestmark = pytest.mark.airflow

NOW = dt.datetime.now(dt.timezone.utc)
ACCESS = {"alice": Access(frozenset({ALPHA}), frozenset({ALPHA}), store_wide=False)}


@pytest.fixture(autouse=True)
def viewers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Who may settle is the auth manager's answer (tests/ui/test_settle.py, e2e): here nobody may."""
    monkeypatch.setattr(page_settle, "may_settle", lambda user, episode, access: False)


def _lost(backend: Backend) -> str:
    with backend.open() as store:
        return lost_episode(store, "2026-W32", ALPHA).episode_id


def test_the_copied_command_settles_the_episode_in_a_shell_with_the_deployments_settings(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    eid = _lost(backend)
    with page_client(monkeypatch, backend.url, ACCESS) as get:
        status, view = get("alice", f"episodes/{eid}")
        assert status == 200, view
        (item,) = view["attention"]
        token = view["episode"]["submission"]["token"]
        assert item["command"] == f"idempotent-jobs --airflow-store reconcile {eid}"
        assert (item["token"], item["lookup_command"]) == (token, f"{item['command']} --provider-url PROVIDER_URL")
        status, week = get("alice", "weeks/2026-W32")
        assert [(i["command"], i["token"]) for i in week["attention"]] == [(item["command"], token)]
        assert "@" not in json.dumps(week["attention"]) and "password" not in json.dumps(view).lower()
    home = tmp_path / "airflow-home"
    home.mkdir()
    env = {"AIRFLOW_HOME": str(home), "AIRFLOW__IDEMPOTENT_JOBS__STORE": backend.url}
    words = shlex.split(item["command"])
    assert words[0] == "idempotent-jobs"
    done = run_cli(*words[1:], "--not-submitted", "--by", "oncall", env=env)
    assert done.code == 0, done.stderr
    with backend.open() as store:
        settled = store.get(eid).submission
    assert (settled.state.value, settled.settled_by) == ("none", "oncall")


def test_a_store_named_by_connection_is_named_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__IDEMPOTENT_JOBS__STORE", raising=False)
    monkeypatch.setenv("AIRFLOW__IDEMPOTENT_JOBS__STORE_CONN_ID", "ij_store")
    assert store_option() == "--store-conn-id ij_store"
    entries = [
        {"episode_id": "2026-W32-0", "reason": "r", "command": "idempotent-jobs reconcile 2026-W32-0", "token": "t"},
        {"episode_id": "2026-W32-1", "reason": "r", "command": "idempotent-jobs reconcile 2026-W32-1 --effect x"},
        {"episode_id": "2026-W32-2", "reason": "r", "command": "idempotent-jobs check 2026-W32-2"},
    ]
    assert [(e["command"], e.get("lookup_command")) for e in name_the_store(entries)] == [
        (
            "idempotent-jobs --store-conn-id ij_store reconcile 2026-W32-0",
            "idempotent-jobs --store-conn-id ij_store reconcile 2026-W32-0 --provider-url PROVIDER_URL",
        ),
        ("idempotent-jobs --store-conn-id ij_store reconcile 2026-W32-1 --effect x", None),
        ("idempotent-jobs --store-conn-id ij_store check 2026-W32-2", None),
    ]
    assert entries[0]["command"] == "idempotent-jobs reconcile 2026-W32-0"  # the read model's own, untouched


@pytest.mark.parametrize(("setting", "shown"), [(None, None), ("EUR", "EUR"), (" US$ ", "US$")])
def test_every_answer_carries_the_currency(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, setting: str | None, shown: str | None
) -> None:
    eid = _lost(backend)
    with page_client(monkeypatch, backend.url, ACCESS) as get:
        if setting is not None:
            monkeypatch.setenv("AIRFLOW__IDEMPOTENT_JOBS__CURRENCY", setting)
        else:
            monkeypatch.delenv("AIRFLOW__IDEMPOTENT_JOBS__CURRENCY", raising=False)
        for path in ("weeks", "weeks/2026-W32", f"episodes/{eid}"):
            status, body = get("alice", path)
            assert (status, body["currency"]) == (200, shown), (path, body)


@pytest.mark.parametrize("setting", ["US Dollar", "x" * 13, "EUR\u202e", "\u00a0EUR\u00a0x"])
def test_a_currency_that_is_no_unit_is_a_503_naming_the_setting(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    _lost(backend)
    with page_client(monkeypatch, backend.url, ACCESS) as get:
        monkeypatch.setenv("AIRFLOW__IDEMPOTENT_JOBS__CURRENCY", setting)
        status, body = get("alice", "weeks/2026-W32")
    assert status == 503
    assert body["detail"].startswith(
        "the page is misconfigured: invalid deployment setting: "
        "[idempotent_jobs] currency (AIRFLOW__IDEMPOTENT_JOBS__CURRENCY): "
    ), body
