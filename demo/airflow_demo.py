"""`make demo`: the example DAG under real Airflow, with a crash, a lost answer, and three runs.

A throwaway AIRFLOW_HOME under .demo/airflow (SQLite metadata database, the embedded file store
at $AIRFLOW_HOME/idempotent_jobs), and the local provider server in its own process. Runs of
``example_dags/weekly_media_pipeline.py`` through ``dag.test()`` (scheduler-free, triggers inline):

1. Monday 2026-08-03: the ``allocate`` task crashes right after allocating; Airflow retries it.
2. Wednesday 2026-08-05, same ISO week: the provider accepts the job but the answer is lost; Airflow retries.
3. Monday 2026-08-10, the next week.

Then it prints the jobs (``idempotent-jobs list``) and what the provider server received.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / ".demo" / "airflow"
HOME = DEMO / "home"
STORE = HOME / "idempotent_jobs"
BIN = Path(sys.executable).parent
DAG_ID = "weekly_media_pipeline"
TOKEN = "demo-provider-token"

#: (label, logical date UTC, run conf, provider fault for this run)
RUNS: list[tuple[str, str, dict[str, Any], str | None]] = [
    (
        "Mon 2026-08-03, allocate crashes after allocating",
        "2026-08-03T04:00:00+00:00",
        {"demo_crash_after_allocation": True},
        None,
    ),
    ("Wed 2026-08-05, same week, provider answer lost", "2026-08-05T08:00:00+00:00", {}, "drop_after_accept"),
    ("Mon 2026-08-10, the next week", "2026-08-10T04:00:00+00:00", {}, None),
]


def main() -> int:
    if sys.argv[1:2] == ["--inside"]:
        return inside(Path(sys.argv[2]))
    shutil.rmtree(DEMO, ignore_errors=True)
    (HOME / "dags").mkdir(parents=True)
    (HOME / "config").mkdir()
    shutil.copy(ROOT / "example_dags" / f"{DAG_ID}.py", HOME / "dags")
    shutil.copy(ROOT / "demo" / "demo_policy.py", HOME / "config" / "airflow_local_settings.py")
    server = subprocess.Popen(
        [sys.executable, "-m", "airflow_idempotent_jobs.testing.server", "--port", "0", "--token", TOKEN],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        env = airflow_env(url)
        print(f"AIRFLOW_HOME={HOME} (SQLite), store {STORE}, provider server {url} (own process)")
        started = time.monotonic()
        run_quietly([str(BIN / "airflow"), "db", "migrate"], env, DEMO / "migrate.log")
        print(f"airflow db migrate: {time.monotonic() - started:.1f}s\n")
        results = DEMO / "runs.json"
        started = time.monotonic()
        run_quietly([sys.executable, __file__, "--inside", str(results)], env, DEMO / "airflow-runs.log")
        print(f"Three runs of {DAG_ID} through dag.test() in {time.monotonic() - started:.1f}s")
        print(f"(Airflow's own log: {DEMO / 'airflow-runs.log'})\n")
        for run in json.loads(results.read_text()):
            print_run(run)
        print_log_excerpt(DEMO / "airflow-runs.log")
        print("$ idempotent-jobs list")
        listing = subprocess.run(
            [str(BIN / "idempotent-jobs"), "--store", str(STORE), "list"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        print(listing.stdout)
        duplicates = print_provider(url)
        check(json.loads(results.read_text()), duplicates)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return 0


def airflow_env(url: str) -> dict[str, str]:
    from airflow_idempotent_jobs.testing.server import server_connection

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(HOME),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(HOME / "dags"),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{HOME / 'airflow.db'}",
        AIRFLOW_CONN_MEDIA_PROVIDER=json.dumps(server_connection(url, TOKEN)),
        DEMO_PROVIDER_URL=url,
    )
    return env


def run_quietly(cmd: list[str], env: dict[str, str], log: Path) -> None:
    with log.open("w") as sink:
        done = subprocess.run(cmd, env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=600, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"demo: {' '.join(cmd[:3])} failed (exit {done.returncode}); see {log}")


def print_run(run: dict[str, Any]) -> None:
    print(f"Run {run['run_id']}: {run['label']}")
    for ti in run["tis"]:
        tries = "1 try" if ti["try_number"] == 1 else f"{ti['try_number']} tries"
        print(f"  {ti['task_id']:<14} {ti['state']:<8} after {tries}")
    episode = run["episode"]
    if episode:
        sub = episode["submission"]
        print(
            f"  -> episode {episode['episode_id']}: paid job {sub['remote_ref']} {sub['state']}, cost {sub['cost']}"
            f" ({sub['attempts']} submit call(s) with token {sub['token']})"
        )
    print()


#: Task-log messages worth showing: what allocation decided, and the two injected failures.
LOG_MARKERS = (
    " allocated for key ",
    " reused for key ",
    "RuntimeError: demo:",
    "ProviderOutcomeUnknown: ",
    ": submission accepted",
    ": the trigger reported",
)


def print_log_excerpt(log: Path) -> None:
    print("From Airflow's task logs:")
    for line in log.read_text(errors="replace").splitlines():
        if any(marker in line for marker in LOG_MARKERS):
            message = line.split("] ", 1)[-1].rsplit(" [", 1)[0] if "] " in line else line
            message = message.split(", store ", 1)[0].replace("airflow_idempotent_jobs.paid.provider.", "")
            print(f"  {message[:160]}")
    print()


def print_provider(url: str) -> int:
    stats = httpx.get(f"{url}/_admin/stats", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).json()
    print(
        f"The provider server received {stats['submissions']} submissions and created {stats['accepted']} jobs "
        f"({stats['status_calls']} status calls):"
    )
    for job in stats["jobs"].values():
        sent = stats["submissions_per_token"].get(job["token"], 0)
        print(
            f"  {job['id']}  {job['status']:<9} cost {job['cost']}  prompt {job['request']['prompt']!r}"
            f"  ({sent} submission(s) with its token)"
        )
    duplicates = [t for t, n in stats["accepted_per_token"].items() if n > 1]
    print(f"Jobs created twice for one episode: {len(duplicates)}")
    return len(duplicates)


def check(runs: list[dict[str, Any]], duplicates: int) -> None:
    """The demo's promises, checked: it exits non-zero if Airflow or the store disagree."""
    episodes = [run["episode"]["episode_id"] if run["episode"] else None for run in runs]
    tries = [{ti["task_id"]: ti["try_number"] for ti in run["tis"]} for run in runs]
    problems = []
    if episodes != ["2026-W32-0", "2026-W32-1", "2026-W33-0"]:
        problems.append(f"episodes {episodes}")
    if tries[0].get("allocate") != 2 or tries[1].get("generate") != 2:
        problems.append(f"expected retries did not happen: {tries}")
    if any(run["episode"]["submission"]["state"] != "succeeded" for run in runs if run["episode"]):
        problems.append("a paid job did not succeed")
    if duplicates:
        problems.append(f"{duplicates} episode(s) paid twice")
    if problems:
        sys.exit("demo: FAILED: " + "; ".join(problems))
    print("demo: OK (3 episodes, one paid job each, across 2 Airflow retries)")


# -- inside the Airflow process ------------------------------------------------------------------
def inside(results: Path) -> int:
    """Runs in a child with the demo's AIRFLOW_HOME: every dag.test() in one process."""
    import pendulum
    from airflow.dag_processing.dagbag import DagBag

    from airflow_idempotent_jobs import open_store

    bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    dag = bag.get_dag(DAG_ID)
    if dag is None:
        sys.exit(f"demo: {DAG_ID} did not load: {bag.import_errors}")
    out = []
    for label, when, conf, fault in RUNS:
        configure_provider({"fault": fault, "fault_times": 1})
        moment = pendulum.parse(when)
        dag_run = dag.test(logical_date=moment, run_after=moment, run_conf=conf)
        configure_provider({"fault": None})
        tis = [
            {"task_id": ti.task_id, "state": str(ti.state), "try_number": ti.try_number}
            for ti in sorted(dag_run.get_task_instances(), key=lambda t: t.start_date or t.end_date or moment)
        ]
        with open_store(STORE) as store:
            episode = store.find(f"airflow:{DAG_ID}:allocate:{dag_run.run_id}")
        out.append(
            {"label": label, "run_id": dag_run.run_id, "tis": tis, "episode": episode.to_dict() if episode else None}
        )
    results.write_text(json.dumps(out, default=str))
    return 0


def configure_provider(changes: dict[str, Any]) -> None:
    url = os.environ["DEMO_PROVIDER_URL"] + "/_admin/config"
    httpx.post(url, json=changes, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).raise_for_status()


if __name__ == "__main__":
    sys.exit(main())
