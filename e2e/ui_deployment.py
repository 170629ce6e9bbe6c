"""A real api-server with the Idempotent Jobs page, for the UI's API tests, browser test and demo.

LocalExecutor on 127.0.0.1 (`Deployment`): api-server, scheduler (it runs the tasks) and
dag-processor; Airflow's metadata and the episode store in PostgreSQL databases of their own. The
store is the deployment's ``[idempotent_jobs] store_conn_id`` (``ij_store``; the page's commands
name it so), seeded by `e2e.ui_seed.seed` before anything starts; the weekly budget is `BUDGET`,
in ``[idempotent_jobs] currency`` ``EUR``.

Access (the simple auth manager in multi-team mode, ``[core] multi_team = True``): the DAGs live
in two bundles, ``team_a`` (``ij_ui_alpha``) and ``team_b`` (``ij_ui_beta``), and each viewer
belongs to one team, so each may read only their team's DAG::

    admin  role admin                 every episode, the migrated one included
    alice  role viewer, team team_a   ij_ui_alpha's episodes only
    bob    role viewer, team team_b   ij_ui_beta's and ij_ui_beta_mimic's episodes only
    carol  role user, team team_a     ij_ui_alpha's episodes, and may settle them (edits its task instances)

``ij_ui_beta_mimic`` (team_b's bundle, in ij_ui_beta.py) names ij_ui_alpha in its allocation keys.

Use::

    ui = UiDeployment(workdir)
    try:
        ui.start(print)                   # ~40 s; ui.seeded says what the store holds
        ui.api_url, ui.page_url, ui.passwords["alice"]
        down = ui.start_api_server(store="postgresql://ij:pw@127.0.0.1:<closed port>/x")
    finally:
        ui.stop()
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.deployment import AIRFLOW, Deployment, free_port, wait_for
from e2e.ui_seed import ALPHA, ALPHA_PAID, ALPHA_SETTLE, BETA, CURRENCY, MIMIC, STORE_CONN_ID, Seeded, seed

DAGS = Path(__file__).resolve().parent / "dags_ui"
ADMIN, ALICE, BOB = "admin", "alice", "bob"
#: team_a's editor (role ``user``): may change ij_ui_alpha's task instances, so settle its episodes.
CAROL = "carol"
TEAMS = {"team_a": ALPHA, "team_b": BETA}
#: The weekly budget the page shows spend against.
BUDGET = 100.0
#: Which DAGs each user may read (None: episodes no DAG owns).
READABLE: dict[str, set[str | None]] = {ADMIN: {ALPHA, BETA, None}, ALICE: {ALPHA}, BOB: {BETA}, CAROL: {ALPHA}}


@dataclass
class UiDeployment(Deployment):
    executor: str = "LocalExecutor"
    workers: tuple[str, ...] = ()
    prediction_api: bool = False
    dag_ids: tuple[str, ...] = (ALPHA, BETA, MIMIC, ALPHA_PAID, ALPHA_SETTLE)
    #: ALPHA_PAID's provider (``media_provider``): nothing listens, so its paid step fails.
    provider_url: str = "http://127.0.0.1:9"
    #: ALPHA_SETTLE's provider (``settle_provider``): a live server, neither tokens nor lookup.
    settle_provider_url: str = ""
    passwords: dict[str, str] = field(
        default_factory=lambda: {user: f"{user[0]}-" + os.urandom(6).hex() for user in (ADMIN, ALICE, BOB, CAROL)}
    )
    seeded: Seeded | None = None
    #: Extra api-servers (`start_api_server`): their base URLs.
    extra_servers: list[str] = field(default_factory=list)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def page_url(self) -> str:
        return f"{self.api_url}/idempotent-jobs/"

    def bundle_path(self, team: str) -> Path:
        return self.home("control") / "dags" / team

    def settle_provider(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The settle provider's admin API: ``/_admin/stats`` (jobs and counters), ``/_admin/config`` (faults)."""
        import httpx

        headers = {"Authorization": f"Bearer {self.provider_token}"}
        answer = httpx.request(method, self.settle_provider_url + path, json=body, headers=headers, timeout=10)
        answer.raise_for_status()
        return answer.json()

    def env(self, name: str) -> dict[str, str]:
        from airflow_idempotent_jobs.testing.server import ServerConfig, server_connection

        env = super().env(name)
        passwords = self.workdir / "passwords.json"
        passwords.write_text(json.dumps(self.passwords))
        bundles = [
            {
                "name": f"{team}_dags",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(self.bundle_path(team)), "refresh_interval": 5},
                "team_name": team,
            }
            for team in TEAMS
        ]
        env.update(
            {
                # Plugins that providers register (ours) load only when providers are discovered eagerly.
                "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": "False",
                "AIRFLOW__CORE__MULTI_TEAM": "True",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": (
                    f"{ADMIN}:admin,{ALICE}:viewer:team_a,{BOB}:viewer:team_b,{CAROL}:user:team_a"
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
                "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
                "AIRFLOW__IDEMPOTENT_JOBS__STORE_CONN_ID": STORE_CONN_ID,
                "AIRFLOW__IDEMPOTENT_JOBS__CURRENCY": CURRENCY,
                "AIRFLOW_CONN_SETTLE_PROVIDER": json.dumps(
                    server_connection(
                        self.settle_provider_url or "http://127.0.0.1:9",
                        self.provider_token,
                        ServerConfig(honour_tokens=False),
                        lookup_path=None,
                    )
                ),
                "AIRFLOW__IDEMPOTENT_JOBS__TIMEZONE": "UTC",
                "AIRFLOW__IDEMPOTENT_JOBS__WEEKLY_BUDGET": str(BUDGET),
            }
        )
        return env

    def start(self, say: Callable[[str], None]) -> None:
        from airflow_idempotent_jobs.stores import open_store

        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._create_databases()
        for team, dag_id in TEAMS.items():
            self.bundle_path(team).mkdir(parents=True, exist_ok=True)
            (self.bundle_path(team) / f"{dag_id}.py").write_bytes((DAGS / f"{dag_id}.py").read_bytes())
        store = open_store(self.store_url)
        try:
            self.seeded = seed(store)
        finally:
            store.close()
        self.settle_provider_url = self.provider_process("settle-provider")
        self.airflow("db", "migrate", timeout=300)
        for team in TEAMS:
            self.airflow("teams", "create", team)
        control = self.env("control")
        self.spawn("api-server", [AIRFLOW, "api-server", "-H", "127.0.0.1", "-p", str(self.api_port)], control)
        self.spawn("scheduler", [AIRFLOW, "scheduler"], control)
        self.spawn("dag-processor", [AIRFLOW, "dag-processor"], control)
        wait_for("a healthy API server, scheduler and DAG processor", self._healthy, timeout=180)
        wait_for("the DAGs to be parsed and serialized", self._dag_serialized, timeout=120)
        say(f"UI deployment healthy in {time.monotonic() - started:.0f}s: {self.page_url}")

    def _healthy(self) -> bool:
        self._check_alive()
        health = _health(self.api_url)
        parts = ("metadatabase", "scheduler", "dag_processor")
        return all((health.get(part) or {}).get("status") == "healthy" for part in parts)

    def start_api_server(self, **settings: str) -> str:
        """Another api-server on the same metadata, with ``[idempotent_jobs]`` options replaced
        (``store="postgresql://..."`` points it at another store); its base URL once it answers."""
        port = free_port()
        env = self.env("control")
        env.pop("AIRFLOW__IDEMPOTENT_JOBS__STORE_CONN_ID", None)
        env.update({f"AIRFLOW__IDEMPOTENT_JOBS__{name.upper()}": value for name, value in settings.items()})
        self.spawn(f"api-server-{port}", [AIRFLOW, "api-server", "-H", "127.0.0.1", "-p", str(port)], env)
        url = f"http://127.0.0.1:{port}"
        wait_for(f"the extra api-server on port {port}", lambda: self._alive_and(_health(url)), timeout=120)
        self.extra_servers.append(url)
        return url

    def _alive_and(self, health: dict[str, Any]) -> bool:
        self._check_alive()
        return (health.get("metadatabase") or {}).get("status") == "healthy"


def _health(base_url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"{base_url}/api/v2/monitor/health", timeout=5) as answer:
            found: dict[str, Any] = json.loads(answer.read())
            return found
    except OSError:
        return {}
