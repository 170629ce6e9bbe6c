"""`make demo`, last step: one approval answered through Airflow's REST API, as a person would.

Starts a small real deployment under .demo/approval (api-server, scheduler, dag-processor and
triggerer with LocalExecutor; Airflow's metadata in SQLite; the embedded file store; the simple
auth manager with a user ``approver``) and the local provider server. Triggers one run of
demo/dags/approved_media_pipeline.py, logs in, answers its question with Approve and a comment,
then prints what the episode recorded and what the provider received. Prints each REST call as
the curl command that does the same. Always stops what it started.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the e2e package: the deployment and the REST client

from airflow_idempotent_jobs import open_store  # noqa: E402
from e2e.airflow_rest import AirflowRest  # noqa: E402
from e2e.deployment import wait_for  # noqa: E402
from e2e.hitl_deployment import APPROVER, HitlDeployment  # noqa: E402

WORKDIR = ROOT / ".demo" / "approval"
DAG_FILE = ROOT / "demo" / "dags" / "approved_media_pipeline.py"
DAG_ID = "approved_media_pipeline"
COMMENT = "within budget, go ahead"


def say(text: str) -> None:
    print(f"[approval {time.strftime('%H:%M:%S')}] {text}", flush=True)


def curl(method: str, url: str, body: object = None, token: bool = True) -> str:
    parts = ["curl -s", *(["-X", method] if method != "GET" else []), shlex.quote(url)]
    if token:
        parts.append('-H "Authorization: Bearer $TOKEN"')
    if body is not None:
        parts += ["-H 'Content-Type: application/json'", "-d", shlex.quote(json.dumps(body))]
    return " ".join(parts)


def main() -> int:
    shutil.rmtree(WORKDIR, ignore_errors=True)
    deployment = HitlDeployment(WORKDIR, sqlite=True, dag_files=(DAG_FILE,), dag_ids=(DAG_ID,), record_lookups=False)
    try:
        deployment.start(say)
        show(deployment)
    except (Exception, KeyboardInterrupt) as exc:
        say(f"FAILED: {type(exc).__name__}: {exc} (logs in {WORKDIR})")
        return 1
    finally:
        for problem in deployment.stop():
            say(f"stop: {problem}")
    shutil.rmtree(WORKDIR, ignore_errors=True)
    return 0


def show(deployment: HitlDeployment) -> None:
    api, password = deployment.api_url, deployment.passwords[APPROVER]
    rest = AirflowRest(api, APPROVER, password)
    print("\nThe same calls with curl (this deployment's port and password):")
    login = {"username": APPROVER, "password": password}
    print("  TOKEN=$(" + curl("POST", f"{api}/auth/token", login, token=False), end="")
    print(" | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"access_token\"])')")
    rest.login()
    run_id = rest.trigger(DAG_ID)
    print("  " + curl("POST", f"{api}/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": None}))
    path = rest.hitl_path(DAG_ID, run_id, "approve")
    print("  " + curl("GET", api + path))
    answer = {"chosen_options": ["Approve"], "params_input": {"comment": COMMENT}}
    print("  " + curl("PATCH", api + path, answer) + "\n")

    question = rest.wait_for_question(DAG_ID, run_id, "approve", timeout=180)
    try_number = int(question["task_instance"]["try_number"])
    wait_for("the scheduler to see the task park", lambda: deployment.parked(DAG_ID, run_id, "approve", try_number), 60)
    say(f"run {run_id}: task 'approve' awaits input; the question:")
    print(f"  subject: {question['subject']}")
    for line in str(question.get("body") or "").splitlines():
        print(f"  | {line}")
    replied = rest.answer(DAG_ID, run_id, "approve", "Approve", {"comment": COMMENT})
    say(f"PATCH hitlDetails -> responded_by {replied['responded_by']['name']}, chosen {replied['chosen_options']}")
    state = rest.wait_for_run(DAG_ID, run_id, timeout=180)
    say(f"run {run_id}: {state}")

    with open_store(deployment.file_store) as store:
        owned = [e for e in store.list() if e.allocation_key.endswith(f":{DAG_ID}:allocate:{run_id}")]
    for episode in owned:
        a = episode.approval
        decision = a.decision.value if a.decision else None
        say(f"episode {episode.episode_id}: status {episode.status.value}, decision {decision}, by {a.by}, at {a.at}")
        say(f"  comment {a.comment!r}, via {a.via}, history {[entry['event'] for entry in a.history]}")
    request = urllib.request.Request(
        f"{deployment.provider_url}/_admin/stats", headers={"Authorization": f"Bearer {deployment.provider_token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        stats = json.loads(reply.read())
    say(f"provider: {stats['submissions']} submission(s), {stats['accepted']} job(s) accepted")
    if state != "success" or len(owned) != 1 or stats["accepted"] != 1:
        raise RuntimeError("the approved run did not pay exactly once")


if __name__ == "__main__":
    sys.exit(main())
