"""`make demo-ui`: the Idempotent Jobs page in Airflow's own UI, on a running deployment, until Ctrl-C.

Starts under .demo/ui, all on 127.0.0.1: api-server (with the page, loaded from the provider's entry
point), scheduler (LocalExecutor: it runs the tasks), dag-processor and triggerer; Airflow's
metadata in SQLite; the embedded file store; the local provider server. Runs the example DAG
(example_dags/weekly_media_pipeline.py) three times by hand, besides the scheduled run Airflow makes
when the DAG appears: two paid jobs succeed; the third loses the provider's answer (the demo's
Connection neither honours tokens nor offers lookup), so its episode is ``unknown`` and the page
lists it under "needs attention" with the reconcile command. Then it prints the logins and the
page's URL and keeps everything running until Ctrl-C (or SIGTERM), and stops all it started.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the e2e package: the deployment and the REST client

from e2e.airflow_rest import AirflowRest, RestError  # noqa: E402
from e2e.deployment import Deployment, wait_for  # noqa: E402

WORKDIR = ROOT / ".demo" / "ui"
DAG_FILE = ROOT / "example_dags" / "weekly_media_pipeline.py"
DAG_ID = "weekly_media_pipeline"
ZONE = "Europe/Berlin"  # the example DAG's zone: the page's "current week" is the tasks' week
BUDGET = "10"
ADMIN, VIEWER = "admin", "viewer"


def say(text: str) -> None:
    print(f"[demo-ui {time.strftime('%H:%M:%S')}] {text}", flush=True)


@dataclass
class UiDemo(Deployment):
    """`Deployment` with LocalExecutor, SQLite, two people who can log in, and the page's settings."""

    executor: str = "LocalExecutor"
    workers: tuple[str, ...] = ()
    prediction_api: bool = False
    sqlite: bool = True
    dag_files: tuple[Path, ...] = (DAG_FILE,)
    dag_ids: tuple[str, ...] = (DAG_ID,)
    passwords: dict[str, str] = field(default_factory=lambda: {ADMIN: "", VIEWER: ""})

    def __post_init__(self) -> None:
        super().__post_init__()
        import secrets

        self.passwords = {user: f"{user}-{secrets.token_hex(4)}" for user in self.passwords}

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def page_url(self) -> str:
        return f"{self.api_url}/idempotent-jobs/"

    @property
    def file_store(self) -> Path:
        return self.home("control") / "idempotent_jobs"

    def env(self, name: str) -> dict[str, str]:
        from airflow_idempotent_jobs.testing.server import ServerConfig, server_connection

        env = super().env(name)
        passwords = self.workdir / "passwords.json"
        passwords.write_text(json.dumps(self.passwords))
        plain = server_connection(
            self.provider_url, self.provider_token, ServerConfig(honour_tokens=False), lookup_path=None
        )
        env.update(
            {
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin,{VIEWER}:viewer",
                "AIRFLOW__CORE__PARALLELISM": "4",  # LocalExecutor forks this many workers (default 32)
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
                # Airflow 3.3 loads the plugins that providers register only with this off
                # (plugins_manager: `if not settings.LAZY_LOAD_PROVIDERS`); by default the page is not mounted.
                "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": "False",
                "AIRFLOW__IDEMPOTENT_JOBS__STORE": str(self.file_store),
                "AIRFLOW__IDEMPOTENT_JOBS__TIMEZONE": ZONE,
                "AIRFLOW__IDEMPOTENT_JOBS__WEEKLY_BUDGET": BUDGET,
                "AIRFLOW_CONN_MEDIA_PROVIDER": json.dumps(plain),
                # demo/demo_policy.py as the cluster policy: the example DAG's retries do not wait.
                "PYTHONPATH": f"{self.policy_folder()}:{env['PYTHONPATH']}",
            }
        )
        return env

    def policy_folder(self) -> Path:
        """A folder holding demo/demo_policy.py as ``airflow_local_settings`` (Airflow imports it by that name)."""
        folder = self.workdir / "policy"
        if not folder.exists():
            folder.mkdir(parents=True)
            shutil.copy(ROOT / "demo" / "demo_policy.py", folder / "airflow_local_settings.py")
        return folder

    def provider(self, body: dict[str, Any]) -> None:
        request = urllib.request.Request(
            f"{self.provider_url}/_admin/config",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {self.provider_token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10):
            pass

    def runs_settled(self) -> bool:
        self._check_alive()
        states = [state for (state,) in self.metadata("SELECT state FROM dag_run WHERE dag_id = %s", DAG_ID)]
        return bool(states) and all(state in ("success", "failed") for state in states)


def answer_status(url: str, token: str | None = None) -> int:
    """The HTTP status ``url`` answers with (redirects not followed)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.build_opener(NoRedirect).open(urllib.request.Request(url, headers=headers), timeout=10):
            return 200
    except urllib.error.HTTPError as exc:
        return exc.code


def trigger(rest: AirflowRest) -> str:
    """A manual run; SQLite's lock may refuse the API's write for a moment (HTTP 500): try again."""
    for attempt in range(1, 6):
        try:
            return rest.trigger(DAG_ID)
        except RestError as exc:
            if exc.status != 500 or attempt == 5:
                raise
            say(f"triggering answered HTTP 500 (SQLite busy?); again in 2 s ({attempt}/5)")
            time.sleep(2)
    raise AssertionError("unreachable")


def run_pipeline(demo: UiDemo, rest: AirflowRest) -> None:
    first = [trigger(rest) for _ in range(2)]
    for run_id in first:
        say(f"waiting for run {run_id} (allocate, then generate submits and polls the provider)")
        say(f"run {run_id}: {rest.wait_for_run(DAG_ID, run_id, timeout=300)}")
    say("waiting for every run of the DAG to finish (the scheduled one Airflow made too)")
    wait_for("every run of the DAG to finish (the scheduled one too)", demo.runs_settled, timeout=300)
    demo.provider({"fault": "drop_after_accept", "fault_times": 1})  # the next submit's answer is lost
    lost = trigger(rest)
    say(
        f"waiting for run {lost}: the provider accepts its job but the answer is lost; generate's try 2"
        " (no retry delay in the demo) finds the outcome unknown and stops without paying again"
    )
    say(f"run {lost}: {rest.wait_for_run(DAG_ID, lost, timeout=300)} (the provider's answer was lost)")


def show(demo: UiDemo, rest: AirflowRest) -> None:
    anonymous = answer_status(demo.page_url)
    weeks = rest._call("GET", "/idempotent-jobs/api/weeks")
    say(f"{demo.page_url} answers {anonymous} without a login; {ADMIN} sees:")
    for week in weeks["weeks"]:
        if week["episodes"]:
            spend, attention = week["spend"], week["attention"]
            print(f"  {week['week_id']}: {week['episodes']} episode(s), spend {spend}, attention {attention}")
    current = rest._call("GET", f"/idempotent-jobs/api/weeks/{weeks['current']}")
    print(f"  this week ({current['week_id']}): budget {current['budget']}, counts {current['counts']['submission']}")
    for item in current["attention"]:
        print(f"  needs attention: {item['episode_id']} ({item['reason']}): {item['command']}")
    print(
        f"\nThe Idempotent Jobs page: {demo.page_url}\n"
        f"Log in at {demo.api_url}/ as {ADMIN} / {demo.passwords[ADMIN]} (every episode)\n"
        f"                 or as {VIEWER} / {demo.passwords[VIEWER]} (read-only)\n"
        f"Its JSON: TOKEN=$(curl -s -X POST {demo.api_url}/auth/token -H 'Content-Type: application/json' "
        f'-d \'{{"username": "{ADMIN}", "password": "{demo.passwords[ADMIN]}"}}\' | '
        "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"access_token\"])')\n"
        f'          curl -s -H "Authorization: Bearer $TOKEN" {demo.page_url}api/weeks/{current["week_id"]}\n'
        f"Logs and the store under {WORKDIR}. Running until Ctrl-C.",
        flush=True,
    )


def interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> int:
    # Ctrl-C and SIGTERM stop the same way, also when started with SIGINT ignored (a background job).
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    shutil.rmtree(WORKDIR, ignore_errors=True)
    demo = UiDemo(WORKDIR)
    try:
        demo.start(say)
        rest = AirflowRest(demo.api_url, ADMIN, demo.passwords[ADMIN])
        rest.login()
        run_pipeline(demo, rest)
        show(demo, rest)
        while True:
            time.sleep(1)
            demo._check_alive()
    except KeyboardInterrupt:
        say("stopping (Ctrl-C or SIGTERM)")
        code = 0
    except Exception as exc:
        say(f"FAILED: {type(exc).__name__}: {exc} (logs in {WORKDIR})")
        code = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave processes behind
        for problem in demo.stop():
            say(f"stop: {problem}")
    say("stopped everything it started")
    return code


if __name__ == "__main__":
    sys.exit(main())
