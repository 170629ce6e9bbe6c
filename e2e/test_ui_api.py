"""The Idempotent Jobs page's JSON API on a real api-server (e2e/ui_deployment.py), started once.

Run by `make e2e-ui` (it needs a running api-server, so it is not part of `make test`).

Three users under the simple auth manager in multi-team mode: ``admin``; ``alice``, a viewer of
team_a (DAG ij_ui_alpha); ``bob``, a viewer of team_b (DAGs ij_ui_beta and ij_ui_beta_mimic, whose
keys name ij_ui_alpha). The store is a seeded PostgreSQL store; a second api-server points at a
port where nothing listens.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.stores import open_store
from e2e.airflow_rest import AirflowRest
from e2e.deployment import AIRFLOW, PG_HOST, PG_PORT, PG_USER, free_port
from e2e.tcp_relay import TcpRelay
from e2e.ui_deployment import ADMIN, ALICE, BOB, BUDGET, READABLE, UiDeployment
from e2e.ui_seed import (
    ALPHA,
    BETA,
    CURRENCY,
    HOSTILE_KEY,
    HOSTILE_TEXT,
    MIGRATED_KEY,
    MIMIC,
    STORE_OPTION,
    Seeded,
    lost_episode,
)

pytestmark = [pytest.mark.airflow, pytest.mark.postgres]

DOWN_PASSWORD = "sekret-pw-4711"


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiDeployment]:
    deployment = UiDeployment(tmp_path_factory.mktemp("ui"), tag=f"ui{free_port()}")
    try:
        deployment.start(print)
        yield deployment
    finally:
        assert deployment.stop() == []


@pytest.fixture(scope="module")
def facts(ui: UiDeployment) -> Seeded:
    assert ui.seeded is not None
    return ui.seeded


def call(base: str, path: str, token: str | None = None, **headers: str) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON body or text, headers) without following redirects."""
    if token:
        headers["Authorization"] = f"Bearer {token}"

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(base + path, headers=headers), timeout=60) as answer:
            status, raw, got = answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        status, raw, got = exc.code, exc.read(), dict(exc.headers)
    text = raw.decode(errors="replace")
    try:
        return status, json.loads(text), got
    except ValueError:
        return status, text, got


@pytest.fixture(scope="module")
def tokens(ui: UiDeployment) -> dict[str, str]:
    return {user: AirflowRest(ui.api_url, user, ui.passwords[user]).login() for user in (ADMIN, ALICE, BOB)}


def test_anonymous_gets_401_from_the_api_and_the_login_page_from_the_page(ui: UiDeployment, facts: Seeded) -> None:
    for path in ("/api/weeks", f"/api/weeks/{facts.current}", f"/api/episodes/{facts.current}-0", "/static/app.js"):
        status, body, _ = call(ui.api_url, "/idempotent-jobs" + path)
        assert status == 401, (path, body)
    status, _, headers = call(ui.api_url, "/idempotent-jobs/?week=" + facts.current)
    assert status == 303
    assert headers["location"].startswith("/auth/login?next=")
    assert "idempotent-jobs" in headers["location"]
    status, body, _ = call(ui.api_url, "/idempotent-jobs/api/weeks", token="not-a-token")
    assert status in (401, 403), body


@pytest.mark.parametrize("user", [ADMIN, ALICE, BOB])
def test_each_user_sees_only_episodes_of_dags_they_may_read_and_totals_of_those(
    ui: UiDeployment, facts: Seeded, tokens: dict[str, str], user: str
) -> None:
    readable = READABLE[user]
    for week in (facts.current, facts.previous):
        status, view, _ = call(ui.api_url, f"/idempotent-jobs/api/weeks/{week}", tokens[user])
        assert status == 200, view
        expected = [eid for eid in facts.visible_to(readable) if eid.startswith(week + "-")]
        assert sorted(row["episode_id"] for row in view["episodes"]) == expected
        assert view["spend"] == pytest.approx(facts.spend(week, readable))
        assert view["budget"] == BUDGET
        assert sum(view["counts"]["status"].values()) == len(expected)
        attention = sorted(item["episode_id"] for item in view["attention"])
        assert attention == sorted(eid for eid in facts.attention if eid in expected)
        for item in view["attention"]:
            assert item["command"] == facts.command(item["episode_id"])
        owners = {row["owner"]["dag_id"] if row["owner"] else None for row in view["episodes"]}
        assert owners <= readable
        if user != ADMIN:  # only a recorded owner shows an episode to a DAG's viewers
            assert {row["owner_source"] for row in view["episodes"]} <= {"recorded"}
        assert view["damaged"] == []
    status, weeks, _ = call(ui.api_url, "/idempotent-jobs/api/weeks", tokens[user])
    assert status == 200 and weeks["current"] == facts.current
    listed = {week["week_id"]: week for week in weeks["weeks"]}
    assert listed[facts.current]["episodes"] == len(
        [eid for eid in facts.visible_to(readable) if eid.startswith(facts.current + "-")]
    )
    assert listed[facts.previous]["spend"] == pytest.approx(facts.spend(facts.previous, readable))


def test_the_other_teams_episode_and_the_migrated_one_are_404_for_a_viewer(
    ui: UiDeployment, facts: Seeded, tokens: dict[str, str]
) -> None:
    beta_episode = facts.by_dag[BETA][0]
    migrated = facts.by_dag[None][0]
    # The key of each of the last two names ALPHA: one was allocated outside Airflow (no owner
    # recorded), the other by BETA's task. Neither is ALPHA's.
    for episode_id in (beta_episode, migrated, facts.outside, facts.mimic):
        status, body, _ = call(ui.api_url, f"/idempotent-jobs/api/episodes/{episode_id}", tokens[ALICE])
        assert (status, body) == (404, {"detail": f"episode {episode_id} not found"})
    status, body, _ = call(ui.api_url, f"/idempotent-jobs/api/episodes/{beta_episode}", tokens[BOB])
    assert status == 200 and body["owner"]["dag_id"] == BETA and body["owner_source"] == "recorded"
    status, body, _ = call(ui.api_url, f"/idempotent-jobs/api/episodes/{facts.mimic}", tokens[BOB])
    assert status == 200 and (body["owner"]["dag_id"], body["owner_source"]) == (BETA, "recorded")
    assert body["episode"]["allocation_key"].startswith(f"airflow:{ALPHA}:")
    status, body, _ = call(ui.api_url, f"/idempotent-jobs/api/episodes/{facts.outside}", tokens[ADMIN])
    assert status == 200 and (body["owner"]["dag_id"], body["owner_source"]) == (ALPHA, "key")
    assert call(ui.api_url, f"/idempotent-jobs/api/episodes/{facts.outside}", tokens[BOB])[0] == 404
    status, body, _ = call(ui.api_url, f"/idempotent-jobs/api/episodes/{migrated}", tokens[ADMIN])
    assert status == 200
    assert body["owner"] is None and body["episode"]["allocation_key"] == MIGRATED_KEY
    assert body["episode"]["metadata"]["migration"]["legacy_id"] == "17"


def test_an_allowed_episode_view_carries_the_record_owner_and_attention(
    ui: UiDeployment, facts: Seeded, tokens: dict[str, str]
) -> None:
    stuck = next(eid for eid in facts.attention if eid in facts.by_dag[ALPHA])
    status, body, _ = call(ui.api_url, f"/idempotent-jobs/api/episodes/{stuck}", tokens[ALICE])
    assert status == 200
    assert body["episode"]["episode_id"] == stuck
    assert body["episode"]["submission"]["state"] == "unknown"
    assert [h["to"] for h in body["episode"]["submission"]["history"]] == ["submitting", "unknown"]
    assert body["owner"]["dag_id"] == ALPHA and body["owner"]["task_id"] == "allocate"
    assert [item["command"] for item in body["attention"]] == [f"idempotent-jobs {STORE_OPTION} reconcile {stuck}"]
    (item,) = body["attention"]
    assert item["token"] == body["episode"]["submission"]["token"]
    assert item["lookup_command"] == f"{item['command']} --provider-url PROVIDER_URL"
    assert body["currency"] == CURRENCY


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("/api/weeks/2026-W54", "2026-W54"),
        ("/api/weeks/last-week", "last-week"),
        ("/api/episodes/2026-W32-007", "2026-W32-007"),
        ("/api/episodes/2026-W32-0%3Bdrop", "episode id"),
    ],
)
def test_bad_ids_are_400_with_one_line(ui: UiDeployment, tokens: dict[str, str], path: str, fragment: str) -> None:
    status, body, _ = call(ui.api_url, "/idempotent-jobs" + path, tokens[ADMIN])
    assert status == 400, body
    assert fragment in body["detail"] and "\n" not in body["detail"]


def test_an_unknown_episode_is_404(ui: UiDeployment, tokens: dict[str, str]) -> None:
    status, body, _ = call(ui.api_url, "/idempotent-jobs/api/episodes/2026-W01-99", tokens[ADMIN])
    assert (status, body) == (404, {"detail": "episode 2026-W01-99 not found"})


def _unavailable(base: str, token: str, paths: tuple[str, ...], secret: str) -> list[str]:
    """Each path's 503 detail, checked to be one line without the password or a traceback."""
    details = []
    for path in paths:
        status, body, _ = call(base, "/idempotent-jobs" + path, token)
        assert status == 503, (path, body)
        detail = body["detail"]
        assert detail.startswith("episode store unavailable:") and "\n" not in detail
        assert secret not in json.dumps(body) and "Traceback" not in detail
        details.append(detail)
    return details


def test_a_store_down_missing_then_back_is_503_until_it_is_there_and_never_created(
    ui: UiDeployment, facts: Seeded
) -> None:
    """One api-server, never restarted: its store's database unreachable, reachable without the
    store's schema (the page must not create it), the schema made by a writer, down again, back."""
    secret = os.environ.get("PGPASSWORD") or DOWN_PASSWORD  # trust auth ignores it; no page may show it
    port, schema = free_port(), f"ij_page_{os.getpid()}"
    relay = TcpRelay(port, (PG_HOST, int(PG_PORT)))
    url = f"postgresql://{PG_USER}:{secret}@127.0.0.1:{port}/{ui.store_db}?schema={schema}"
    base = ui.start_api_server(store=url)
    token = AirflowRest(base, ADMIN, ui.passwords[ADMIN]).login()
    week = f"/api/weeks/{facts.current}"
    paths = ("/api/weeks", week, f"/api/episodes/{facts.current}-0")
    try:
        assert all("is unavailable" in d for d in _unavailable(base, token, paths, secret))
        relay.start()
        details = _unavailable(base, token, paths, secret)
        assert all(f"no episode store in schema {schema}" in d for d in details), details
        with psycopg.connect(ui.store_url, autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchall()
        assert found == [], "the page created the store's schema"
        with contextlib.closing(open_store(f"{ui.store_url}?schema={schema}")) as writer:
            made = writer.allocate(WeekId.parse(facts.current), MIGRATED_KEY).episode_id
        status, view, _ = call(base, "/idempotent-jobs" + week, token)
        assert status == 200 and [row["episode_id"] for row in view["episodes"]] == [made], view
        relay.stop()  # the kept connections break, as when PostgreSQL restarts
        _unavailable(base, token, (week,), secret)
        relay.start()
        status, view, _ = call(base, "/idempotent-jobs" + week, token)
        assert status == 200 and [row["episode_id"] for row in view["episodes"]] == [made], view
    finally:
        relay.stop()
    log = next(p.log for p in ui.processes if p.name == f"api-server-{base.rsplit(':', 1)[1]}")
    assert secret not in log.read_text(errors="replace")


@pytest.mark.parametrize("name", ["at", "question", "ambiguous-host"])
def test_a_store_password_with_reserved_marks_never_shows_in_the_503(ui: UiDeployment, name: str) -> None:
    """Hostile store URLs on a real api-server: ``ij:SE@CRET@host`` must not show ``CRET...@127.0.0.1``
    to any user, nor ``ij:?SECRET@host`` its password to store-wide users."""
    from tests.hostile_store_urls import HOSTILE, leaked

    (hostile,) = [h for h in HOSTILE if h.name == name]
    base = ui.start_api_server(store=hostile.at(f"127.0.0.1:{free_port()}/{ui.store_db}"))
    for user in (ADMIN, ALICE):
        token = AirflowRest(base, user, ui.passwords[user]).login()
        for path in ("/api/weeks", "/api/episodes/2026-W32-0"):
            status, body, _ = call(base, "/idempotent-jobs" + path, token)
            assert status == 503 and "\n" not in body["detail"], (user, path, body)
            assert leaked(hostile.secrets, json.dumps(body)) == [], (user, path, body)
            expected = "unavailable" if hostile.password is not None else "misconfigured"
            assert body["detail"].startswith(f"episode store {expected}: "), body
    log = next(p.log for p in ui.processes if p.name == f"api-server-{base.rsplit(':', 1)[1]}")
    assert leaked(hostile.secrets, log.read_text(errors="replace")) == []


def test_every_answer_carries_the_security_headers_and_nothing_is_public(
    ui: UiDeployment, facts: Seeded, tokens: dict[str, str]
) -> None:
    answers = {
        "page": call(ui.api_url, "/idempotent-jobs/", tokens[ALICE]),
        "script": call(ui.api_url, "/idempotent-jobs/static/app.js", tokens[ALICE]),
        "api": call(ui.api_url, f"/idempotent-jobs/api/weeks/{facts.current}", tokens[ALICE]),
        "anonymous": call(ui.api_url, "/idempotent-jobs/api/weeks"),
        "hidden": call(ui.api_url, f"/idempotent-jobs/api/episodes/{facts.by_dag[BETA][0]}", tokens[ALICE]),
    }
    assert [answer[0] for answer in answers.values()] == [200, 200, 200, 401, 404]
    for name, (_, _, headers) in answers.items():
        lower = {key.lower(): value for key, value in headers.items()}
        assert lower.get("x-content-type-options") == "nosniff", name
        assert lower.get("x-frame-options") == "SAMEORIGIN", name
        policy = lower.get("content-security-policy", "")
        assert "frame-ancestors 'self'" in policy and "script-src 'self'" in policy, (name, policy)
        assert "unsafe-inline" not in policy, name
    assert answers["script"][2]["content-type"].startswith("text/javascript")
    assert answers["api"][2]["content-type"] == "application/json"
    for path in ("/openapi.json", "/docs", "/redoc"):  # the API's schema is not for anonymous eyes
        assert call(ui.api_url, "/idempotent-jobs" + path)[0] in (401, 404), path


def test_hostile_stored_text_comes_back_exactly_as_stored(
    ui: UiDeployment, facts: Seeded, tokens: dict[str, str]
) -> None:
    """The API returns data, never markup: the page renders it as text (checked in a browser by make e2e-ui)."""
    status, body, headers = call(ui.api_url, f"/idempotent-jobs/api/episodes/{facts.hostile}", tokens[ALICE])
    assert status == 200 and headers["content-type"] == "application/json"
    assert body["episode"]["allocation_key"] == HOSTILE_KEY
    assert body["owner"]["run_id"].startswith("javascript:alert(1)")
    assert body["episode"]["approval"]["by"] == HOSTILE_TEXT
    assert call(ui.api_url, f"/idempotent-jobs/api/episodes/{facts.hostile}", tokens[BOB])[0] == 404


def test_the_page_is_served_to_a_logged_in_user_with_its_root(ui: UiDeployment, tokens: dict[str, str]) -> None:
    status, page, headers = call(ui.api_url, "/idempotent-jobs/episodes/2026-W01-0", tokens[BOB])
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert '<meta name="ij-root" content="/idempotent-jobs">' in page
    assert '<script src="/idempotent-jobs/static/app.js">' in page
    status, script, _ = call(ui.api_url, "/idempotent-jobs/static/app.js", tokens[BOB])
    assert status == 200 and "innerHTML" not in script.replace("never innerHTML", "")
    assert call(ui.api_url, "/idempotent-jobs/static/../app.py", tokens[BOB])[0] == 404


def airflow_json(ui: UiDeployment, *args: str) -> Any:
    done = subprocess.run([AIRFLOW, *args, "--output", "json"], env=ui.env("control"), capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return json.loads(done.stdout)


def test_airflow_lists_the_plugin_from_the_provider(ui: UiDeployment, tokens: dict[str, str]) -> None:
    ours = [plugin for plugin in airflow_json(ui, "plugins") if plugin["name"] == "idempotent_jobs"]
    assert len(ours) == 1
    assert "/idempotent-jobs" in json.dumps(ours[0]["fastapi_apps"])
    assert ours[0]["external_views"][0]["href"] == "/idempotent-jobs/"
    # Not from a plugins folder (the deployment's is empty) nor an airflow.plugins entry point: the provider's.
    plugins_folder = ui.home("control") / "plugins"
    assert not plugins_folder.exists() or not any(plugins_folder.iterdir())
    assert not [ep for ep in importlib.metadata.entry_points(group="airflow.plugins") if "idempotent" in ep.value]
    provider = airflow_json(ui, "providers", "get", "airflow-idempotent-jobs", "--full")
    info = json.dumps(provider)
    assert "airflow_idempotent_jobs.plugins.idempotent_jobs.IdempotentJobsPlugin" in info
    links = airflow_json(ui, "providers", "links")
    assert any("airflow_idempotent_jobs.links.episode.EpisodeLink" in json.dumps(entry) for entry in links)
    status, body, _ = call(ui.api_url, "/api/v2/plugins", tokens[ADMIN])
    assert status == 200 and "idempotent_jobs" in {plugin["name"] for plugin in body["plugins"]}


def test_the_episode_link_of_a_real_task_instance(ui: UiDeployment, tokens: dict[str, str]) -> None:
    rest = AirflowRest(ui.api_url, ADMIN, ui.passwords[ADMIN], token=tokens[ADMIN])
    run = rest._call("POST", f"/api/v2/dags/{ALPHA}/dagRuns", {"logical_date": "2020-03-04T00:00:00Z", "conf": {}})
    run_id = run["dag_run_id"]
    assert rest.wait_for_run(ALPHA, run_id, timeout=180) == "success"
    for task_id in ("allocate", "look"):
        links = rest._call("GET", f"/api/v2/dags/{ALPHA}/dagRuns/{_q(run_id)}/taskInstances/{task_id}/links")
        # Inside Airflow's frame: /plugin/<route>/<the page's own path> (Airflow 3.3 frames any path of it).
        framed = f"{ui.api_url}/plugin/idempotent-jobs/idempotent-jobs/episodes/2020-W10-0"
        assert links["extra_links"] == {"Episode": framed}, task_id
    status, body, _ = call(ui.api_url, "/idempotent-jobs/api/episodes/2020-W10-0", tokens[ALICE])
    assert status == 200
    assert body["owner"] == {"dag_id": ALPHA, "task_id": "allocate", "run_id": run_id, "map_index": None}
    assert body["owner_source"] == "recorded"
    assert body["episode"]["metadata"] == {"allocated_by": body["owner"]}
    assert call(ui.api_url, "/idempotent-jobs/api/episodes/2020-W10-0", tokens[BOB])[0] == 404


def _q(part: str) -> str:
    from urllib.parse import quote

    return quote(part, safe="")


def test_a_dag_whose_key_names_another_teams_dag_stays_on_its_own_teams_page(
    ui: UiDeployment, tokens: dict[str, str]
) -> None:
    """On a real scheduler: the owner is the allocating task instance, never the key."""
    rest = AirflowRest(ui.api_url, ADMIN, ui.passwords[ADMIN], token=tokens[ADMIN])

    def run(dag_id: str, when: str, conf: dict[str, str]) -> tuple[str, str]:
        made = rest._call("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": when, "conf": conf})
        return made["dag_run_id"], rest.wait_for_run(dag_id, made["dag_run_id"], timeout=180)

    alpha_run, state = run(ALPHA, "2020-05-06T00:00:00Z", {})  # 2020-W19
    assert state == "success"
    # team_a's run's very key, in the same week: not a retry of that task, so refused on the first try.
    taken, state = run(MIMIC, "2020-05-07T00:00:00Z", {"key": f"airflow:{ALPHA}:allocate:{alpha_run}"})
    tried = rest._call("GET", f"/api/v2/dags/{MIMIC}/dagRuns/{_q(taken)}/taskInstances/allocate")
    assert (state, tried["state"], tried["try_number"]) == ("failed", "failed", 1)
    # A key that merely reads as team_a's: allocated, recorded as the mimic's own.
    own, state = run(MIMIC, "2020-05-13T00:00:00Z", {})  # 2020-W20
    assert state == "success"
    pages = {
        user: {
            week: call(ui.api_url, f"/idempotent-jobs/api/weeks/{week}", tokens[user])
            for week in ("2020-W19", "2020-W20")
        }
        for user in (ALICE, BOB)
    }
    assert all(status == 200 for weeks in pages.values() for status, _, _ in weeks.values())
    rows = {user: {week: answer[1]["episodes"] for week, answer in weeks.items()} for user, weeks in pages.items()}
    alpha_owner = {"dag_id": ALPHA, "task_id": "allocate", "run_id": alpha_run, "map_index": None}
    mimic_owner = {"dag_id": MIMIC, "task_id": "allocate", "run_id": own, "map_index": None}
    assert [(r["episode_id"], r["owner"], r["owner_source"]) for r in rows[ALICE]["2020-W19"]] == [
        ("2020-W19-0", alpha_owner, "recorded")
    ]
    assert rows[ALICE]["2020-W20"] == [] and rows[BOB]["2020-W19"] == []
    (mine,) = rows[BOB]["2020-W20"]
    assert (mine["episode_id"], mine["owner"], mine["owner_source"]) == ("2020-W20-0", mimic_owner, "recorded")
    assert mine["allocation_key"] == f"airflow:{ALPHA}:allocate:{own}"
    assert call(ui.api_url, "/idempotent-jobs/api/episodes/2020-W20-0", tokens[ALICE])[:2] == (
        404,
        {"detail": "episode 2020-W20-0 not found"},
    )


def _damage(ui: UiDeployment, episode_id: str) -> contextlib.AbstractContextManager[None]:
    """The row's metadata holds a number no reader may accept (``1e999``) for the ``with`` body."""

    @contextlib.contextmanager
    def damaged() -> Iterator[None]:
        with psycopg.connect(ui.store_url, autocommit=True) as conn:
            sql = "SELECT metadata::text FROM idempotent_jobs.episodes WHERE episode_id = %s"
            (before,) = conn.execute(sql, (episode_id,)).fetchone() or (None,)
            assert before is not None
            conn.execute(
                "UPDATE idempotent_jobs.episodes SET metadata = '{\"x\": 1e999}'::jsonb WHERE episode_id = %s",
                (episode_id,),
            )
            try:
                yield
            finally:
                conn.execute(
                    "UPDATE idempotent_jobs.episodes SET metadata = %s::jsonb WHERE episode_id = %s",
                    (before, episode_id),
                )

    return damaged()


def test_a_damaged_record_is_404_to_viewers_and_named_to_store_wide_users_the_week_still_shown(
    ui: UiDeployment, facts: Seeded, tokens: dict[str, str]
) -> None:
    """No existence oracle, and one damaged record does not hide its week from anyone."""
    damaged = next(eid for eid in facts.by_dag[BETA] if eid.startswith(facts.current))
    missing = f"{facts.current}-999"
    week = f"/idempotent-jobs/api/weeks/{facts.current}"
    intact = {user: call(ui.api_url, week, tokens[user])[1] for user in (ADMIN, ALICE, BOB)}
    with _damage(ui, damaged):
        for user in (ALICE, BOB):  # bob's own DAG's record: unreadable, so its owner is not known either
            for eid in (damaged, missing):
                status, body, _ = call(ui.api_url, f"/idempotent-jobs/api/episodes/{eid}", tokens[user])
                assert (status, body) == (404, {"detail": f"episode {eid} not found"}), (user, eid)
            status, view, _ = call(ui.api_url, week, tokens[user])
            assert status == 200, view
            assert view["damaged"] == [] and damaged not in json.dumps(view)
            expected = [r["episode_id"] for r in intact[user]["episodes"] if r["episode_id"] != damaged]
            assert [r["episode_id"] for r in view["episodes"]] == expected
            status, weeks, _ = call(ui.api_url, "/idempotent-jobs/api/weeks", tokens[user])
            assert status == 200 and damaged not in json.dumps(weeks)
            assert {w["week_id"]: w["damaged"] for w in weeks["weeks"]}[facts.current] == 0
        status, body, _ = call(ui.api_url, f"/idempotent-jobs/api/episodes/{damaged}", tokens[ADMIN])
        assert status == 503 and damaged in body["detail"], body
        status, view, _ = call(ui.api_url, week, tokens[ADMIN])
        assert status == 200, view
        assert [d["episode_id"] for d in view["damaged"]] == [damaged]
        assert view["spend"] == pytest.approx(intact[ADMIN]["spend"] - facts.costs.get(damaged, 0.0))
        assert len(view["episodes"]) == len(intact[ADMIN]["episodes"]) - 1
    assert call(ui.api_url, week, tokens[BOB])[1] == intact[BOB]


# -- settling an unknown submission from the page -------------------------------------------------
def _unknown_episode(ui: UiDeployment, week: str, dag: str) -> dict[str, Any]:
    """A new episode of ``dag`` in ``week`` whose paid answer was lost, as the page shows it."""
    with open_store(ui.store_url) as store:
        shown = lost_episode(store, week, dag)
    return {"episode_id": shown.episode_id, "updated_at": shown.updated_at}


def settle(
    ui: UiDeployment,
    token: str,
    eid: str,
    body: dict[str, Any],
    *,
    csrf: str | None = "session",
    origin: str | None = "own",
) -> tuple[int, Any]:
    """POST .../settle as the page sends it (its CSRF token from /api/session, its Origin), or spoiled."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if csrf == "session":
        csrf = call(ui.api_url, "/idempotent-jobs/api/session", token)[1]["csrf_token"]
    if csrf is not None:
        headers["X-CSRF-Token"] = csrf
    if origin is not None:
        headers["Origin"] = ui.api_url if origin == "own" else origin
    request = urllib.request.Request(
        f"{ui.api_url}/idempotent-jobs/api/episodes/{eid}/settle", json.dumps(body).encode(), headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_an_editor_of_the_owning_dag_settles_an_unknown_submission_recorded_with_name_via_and_comment(
    ui: UiDeployment, tokens: dict[str, str]
) -> None:
    from e2e.ui_deployment import CAROL

    carol = AirflowRest(ui.api_url, CAROL, ui.passwords[CAROL]).login()
    lost = _unknown_episode(ui, "2025-W10", ALPHA)
    eid = lost["episode_id"]
    body = {
        "answer": "ours",
        "remote_ref": "job-4711",
        "comment": "the provider's console shows it",
        "seen_updated_at": lost["updated_at"],
    }
    status, answer = settle(ui, tokens[ALICE], eid, body)  # a viewer of the owning DAG: no control
    assert status == 403 and "may not change the task instances" in answer["detail"], answer
    assert settle(ui, tokens[BOB], eid, body) == (404, {"detail": f"episode {eid} not found"})  # another team's
    status, view = settle(ui, carol, eid, body)
    assert status == 200, view
    with open_store(ui.store_url) as store:
        sub = store.get(eid).submission
    assert (sub.state.value, sub.remote_ref, sub.settled_by, sub.settled_how) == (
        "accepted",
        "job-4711",
        CAROL,
        "operator: remote ref given",
    )
    last = sub.history[-1]
    assert (last["by"], last["via"], last["comment"], last["to"]) == (CAROL, "ui", body["comment"], "accepted")
    assert view["episode"]["submission"]["state"] == "accepted"
    status, again = settle(ui, carol, eid, body)  # settled already: the reason, nothing changed
    assert status == 409 and "only submitting or unknown can be settled" in again["detail"], again


def test_a_settle_refused_for_a_changed_episode_a_cross_site_request_and_a_missing_token(
    ui: UiDeployment, tokens: dict[str, str]
) -> None:
    lost = _unknown_episode(ui, "2025-W11", ALPHA)
    eid = lost["episode_id"]
    body = {"answer": "not_submitted", "comment": "never reached them", "seen_updated_at": "2025-01-01T00:00:00+00:00"}
    status, answer = settle(ui, tokens[ADMIN], eid, body)
    assert status == 409 and "changed since it was shown" in answer["detail"], answer
    body["seen_updated_at"] = lost["updated_at"]
    assert settle(ui, tokens[ADMIN], eid, body, origin="https://evil.example")[0] == 403
    assert settle(ui, tokens[ADMIN], eid, body, csrf=None)[0] == 403
    assert settle(ui, tokens[ADMIN], eid, body, csrf="0" * 64)[0] == 403
    assert settle(ui, tokens[ADMIN], eid, {**body, "comment": "  "})[0] == 400
    with open_store(ui.store_url) as store:
        assert store.get(eid).submission.state.value == "unknown"  # nothing refused changed anything
    status, view = settle(ui, tokens[ADMIN], eid, body)
    assert status == 200 and view["episode"]["submission"]["state"] == "none", view
