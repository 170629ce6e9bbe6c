"""``make e2e-approval``: the approval gate under a real scheduler, answered through the REST API.

Starts (on 127.0.0.1) the LocalExecutor deployment of e2e/hitl_deployment.py with the DAGs of
e2e/dags_approval/, logs in as the approver (``POST /auth/token``) and answers each question with
``PATCH .../hitlDetails``, as the UI does. For each store (file, PostgreSQL), in parallel:

a. approve -> the provider got 1 job; the episode records approved, by the approver, the comment;
b. reject -> no provider request, ``generate`` skipped, the episode rejected;
c. the approval task SIGKILLed after the answer was recorded -> try 2 asks nothing, paid once;
d. case a's run cleared after it succeeded -> no new question, no second payment;
e. an unknown episode -> the approval task failed on try 1 (retries=2), no HITL row;
f. ``require_approval=True`` without a decision -> ``generate`` failed on try 1, and the recording
   secrets backend saw no lookup of its provider Connection.

Everything is observed from outside: the provider's counters, the store's episodes (through the
library), HITL rows through the REST API and a read-only query of the metadata database.
Always stops what it started; exit 0 only if every case held.

Run: ``.venv/bin/python -m e2e.approval [--keep]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path
from types import FrameType
from typing import Any

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.episode import Episode
from e2e.airflow_rest import AirflowRest, RestError
from e2e.deployment import REPO, wait_for
from e2e.hitl_deployment import APPROVER, VIEWER, HitlDeployment
from e2e.results import Results, run_deployed

DAG_FILE = REPO / "e2e" / "dags_approval" / "ij_approval.py"
STORES = ("file", "pg")
KINDS = ("", "kill_", "unknown_", "required_")
DAG_IDS = tuple(f"ij_approval_{kind}{store}" for store in STORES for kind in KINDS)
UNAPPROVED_PROVIDER_CONN_ID = "media_provider_unapproved"
WAIT = 180.0
#: Airflow 3.1.0 fails a task killed after it resumed from its deferral (its try 1) without retrying
#: it, where 3.1.8 and later retry it: case c then clears the run, as an operator would.
KILLED_RESUMED_TRY_FAILS = version("apache-airflow") == "3.1.0"


def say(text: str) -> None:
    print(f"[e2e-approval {time.strftime('%H:%M:%S')}] {text}", flush=True)


class Observer:
    """Reads what happened from outside Airflow's task code."""

    def __init__(self, deployment: HitlDeployment, rest: AirflowRest) -> None:
        self.deployment = deployment
        self.rest = rest

    def wait_for_question(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        """The question, once the scheduler has also seen the asking process exit.

        Answering earlier loses a race in Airflow 3.3.2 (seen here with answers 0.5 s after the
        question): the answer resumes the task (queued), then the scheduler reads the parked
        process's exit, finds the task queued instead of awaiting input, and fails it.
        """
        question = self.rest.wait_for_question(dag_id, run_id, task_id, WAIT)
        try_number = int(question["task_instance"]["try_number"])
        wait_for(
            f"the scheduler to see {dag_id}.{task_id} park",
            lambda: self.deployment.parked(dag_id, run_id, task_id, try_number),
            timeout=60,
            every=0.5,
        )
        return question

    def finish_unasked(self, dag_id: str, run_id: str) -> str:
        """The run's end state, or ``asked again (try N)`` as soon as ``approve`` awaits input anew."""
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            state = self.rest.run_state(dag_id, run_id)
            if state in ("success", "failed"):
                return state
            approve = self.rest.task_instance(dag_id, run_id, "approve")
            if approve.get("state") == "awaiting_input":
                return f"asked again (try {approve.get('try_number')})"
            time.sleep(1.0)
        raise TimeoutError(f"run {dag_id}/{run_id} did not finish within {WAIT:.0f}s")

    def store_url(self, store: str) -> str:
        return str(self.deployment.file_store) if store == "file" else self.deployment.store_url

    def episode_of(self, store: str, dag_id: str, run_id: str) -> Episode | None:
        with open_store(self.store_url(store)) as episodes:
            owned = [e for e in episodes.list() if e.allocation_key == f"airflow:{dag_id}:allocate:{run_id}"]
        return owned[0] if len(owned) == 1 else None

    def jobs_for_run(self, run_id: str) -> int:
        """Jobs the provider accepted whose prompt names this run (the DAG puts it there)."""
        request = urllib.request.Request(
            f"{self.deployment.provider_url}/_admin/stats",
            headers={"Authorization": f"Bearer {self.deployment.provider_token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            stats = json.loads(answer.read())
        return sum(1 for job in stats["jobs"].values() if str(job["request"].get("prompt", "")).endswith(run_id))

    def tries(self, dag_id: str, run_id: str) -> dict[str, tuple[str, int]]:
        rows = self.deployment.metadata(
            "SELECT task_id, state, try_number FROM task_instance WHERE dag_id = %s AND run_id = %s", dag_id, run_id
        )
        return {task: (state, number) for task, state, number in rows}

    def hitl_history(self) -> bool:
        """Whether this Airflow keeps past tries' HITL rows (``hitl_detail_history``, from 3.2)."""
        return bool(self.deployment.metadata("SELECT 1 FROM pg_tables WHERE tablename = 'hitl_detail_history'"))

    def hitl_rows(self, dag_id: str, run_id: str) -> list[tuple[int, str, str, str]]:
        """(try, table, created_at, responded_at) of the run's HITL rows, current tries and past ones.

        Airflow carries a try's row, answer included, into the next try of the same task; asking
        again would reset the answer (responded_at NULL until someone answers anew).
        """
        current = self.deployment.metadata(
            "SELECT ti.try_number, h.created_at, h.responded_at FROM hitl_detail h"
            " JOIN task_instance ti ON ti.id = h.ti_id WHERE ti.dag_id = %s AND ti.run_id = %s",
            dag_id,
            run_id,
        )
        if not self.hitl_history():
            # Airflow 3.1 keeps no HITL history: a past try's row stays in hitl_detail under its try's id.
            past = self.deployment.metadata(
                "SELECT th.try_number, h.created_at, h.responded_at FROM hitl_detail h"
                " JOIN task_instance_history th ON th.task_instance_id = h.ti_id"
                " WHERE th.dag_id = %s AND th.run_id = %s",
                dag_id,
                run_id,
            )
            return sorted((n, "hitl_detail", _time(c), _time(r)) for n, c, r in [*current, *past])
        past = self.deployment.metadata(
            "SELECT th.try_number, h.created_at, h.responded_at FROM hitl_detail_history h"
            " JOIN task_instance_history th ON th.task_instance_id = h.ti_history_id"
            " WHERE th.dag_id = %s AND th.run_id = %s",
            dag_id,
            run_id,
        )
        rows = [(n, "hitl_detail", c, r) for n, c, r in current] + [
            (n, "hitl_detail_history", c, r) for n, c, r in past
        ]
        return sorted((n, table, _time(c), _time(r)) for n, table, c, r in rows)


def _time(value: Any) -> str:
    return "-" if value is None else value.strftime("%H:%M:%S.%f")[:-3]


def asked_once(rows: list[tuple[int, str, str, str]], history: bool) -> bool:
    """Every row of the task holds the one question of try 1 and its one answer: a row for each of the
    two tries where Airflow keeps HITL history (3.2+), else the one row, carried into try 2 (3.1)."""
    one = bool(rows) and len({(c, r) for _, _, c, r in rows}) == 1 and rows[0][3] != "-"
    return one and [n for n, *_ in rows] == ([1, 2] if history else [2])


def _approval(episode: Episode | None) -> dict[str, Any]:
    if episode is None:
        return {"episode": None}
    a = episode.approval
    return {
        "episode": episode.episode_id,
        "status": episode.status.value,
        "decision": a.decision.value if a.decision else None,
        "by": a.by,
        "comment": a.comment,
        "via": a.via,
        "events": [entry["event"] for entry in a.history],
        "submission": episode.submission.state.value,
    }


def case_approve(obs: Observer, out: Results, store: str, viewer: AirflowRest) -> str:
    dag_id = f"ij_approval_{store}"
    run_id = obs.rest.trigger(dag_id)
    question = obs.wait_for_question(dag_id, run_id, "approve")
    try:
        viewer.answer(dag_id, run_id, "approve", "Approve")
        refused = "the viewer's PATCH was accepted"
    except RestError as exc:
        refused = f"viewer PATCH -> HTTP {exc.status}"
    comment = f"fine for {store}"
    obs.rest.answer(dag_id, run_id, "approve", "Approve", {"comment": comment})
    state = obs.rest.wait_for_run(dag_id, run_id, WAIT)
    seen = _approval(obs.episode_of(store, dag_id, run_id))
    jobs = obs.jobs_for_run(run_id)
    out.expect(
        f"[{store}] a. approve -> paid once, approval by {APPROVER} with the comment",
        state == "success"
        and jobs == 1
        and refused.endswith("403")
        and seen.get("episode") is not None
        and str(seen["episode"]) in str(question.get("body", "")) + str(question.get("subject", ""))
        and (seen["decision"], seen["by"], seen["comment"], seen["via"]) == ("approved", APPROVER, comment, "airflow")
        and seen["submission"] == "succeeded",
        {"run": state, "provider jobs": jobs, refused: "", **seen},
    )
    return run_id


def case_reject(obs: Observer, out: Results, store: str) -> None:
    dag_id = f"ij_approval_{store}"
    run_id = obs.rest.trigger(dag_id)
    obs.wait_for_question(dag_id, run_id, "approve")
    obs.rest.answer(dag_id, run_id, "approve", "Reject", {"comment": "too dear"})
    state = obs.rest.wait_for_run(dag_id, run_id, WAIT)
    tries = obs.tries(dag_id, run_id)
    seen = _approval(obs.episode_of(store, dag_id, run_id))
    jobs = obs.jobs_for_run(run_id)
    out.expect(
        f"[{store}] b. reject -> no provider request, generate skipped, episode rejected",
        jobs == 0
        and tries.get("generate", ("?",))[0] == "skipped"
        and tries.get("publish", ("?",))[0] == "skipped"
        and (seen.get("status"), seen.get("decision"), seen.get("by")) == ("rejected", "rejected", APPROVER)
        and seen.get("submission") == "none",
        {"run": state, "provider jobs": jobs, "tries": tries, **seen},
    )


def case_killed(obs: Observer, out: Results, store: str) -> None:
    dag_id = f"ij_approval_kill_{store}"
    run_id = obs.rest.trigger(dag_id)
    obs.wait_for_question(dag_id, run_id, "approve")
    obs.rest.answer(dag_id, run_id, "approve", "Approve", {"comment": "go"})
    state = obs.finish_unasked(dag_id, run_id)
    tries = obs.tries(dag_id, run_id)
    cleared = KILLED_RESUMED_TRY_FAILS and state == "failed" and tries.get("approve") == ("failed", 1)
    if cleared:  # Airflow 3.1.0 does not retry it: an operator's clear is its try 2
        obs.rest.clear_run(dag_id, run_id)
        state = obs.finish_unasked(dag_id, run_id)
        tries = obs.tries(dag_id, run_id)
    rows = obs.hitl_rows(dag_id, run_id)
    seen = _approval(obs.episode_of(store, dag_id, run_id))
    jobs = obs.jobs_for_run(run_id)
    out.expect(
        f"[{store}] c. approval task SIGKILLed after recording -> try 2 asked nothing, paid once"
        + (" (Airflow 3.1.0 failed the killed try without retry: try 2 is a clear)" if cleared else ""),
        state == "success"
        and tries.get("approve") == ("success", 2)
        and asked_once(rows, obs.hitl_history())
        and jobs == 1
        and seen.get("decision") == "approved"
        and seen.get("events", []).count("asked") == 1,
        {
            "run": state,
            "tries": tries,
            "HITL rows (try, table, created, responded)": rows,
            "provider jobs": jobs,
            **seen,
        },
    )


def case_cleared(obs: Observer, out: Results, store: str, run_id: str) -> None:
    dag_id = f"ij_approval_{store}"
    obs.rest.clear_run(dag_id, run_id)
    state = obs.finish_unasked(dag_id, run_id)
    tries = obs.tries(dag_id, run_id)
    rows = obs.hitl_rows(dag_id, run_id)
    seen = _approval(obs.episode_of(store, dag_id, run_id))
    jobs = obs.jobs_for_run(run_id)
    out.expect(
        f"[{store}] d. run cleared after success -> no new question, no second payment",
        state == "success"
        and tries.get("approve") == ("success", 2)
        and tries.get("generate") == ("success", 2)
        and asked_once(rows, obs.hitl_history())
        and jobs == 1
        and seen.get("events", []).count("asked") == 1,
        {
            "run": state,
            "tries": tries,
            "HITL rows (try, table, created, responded)": rows,
            "provider jobs": jobs,
            **seen,
        },
    )


def case_unknown(obs: Observer, out: Results, store: str) -> None:
    dag_id = f"ij_approval_unknown_{store}"
    run_id = obs.rest.trigger(dag_id)
    state = obs.rest.wait_for_run(dag_id, run_id, WAIT)
    tries = obs.tries(dag_id, run_id)
    rows = obs.hitl_rows(dag_id, run_id)
    out.expect(
        f"[{store}] e. unknown episode -> approve failed on try 1 (retries=2), no HITL row",
        state == "failed"
        and tries.get("approve") == ("failed", 1)
        and not rows
        and obs.rest.hitl_detail(dag_id, run_id, "approve") is None,
        {"run": state, "tries": tries, "HITL rows": rows},
    )


def case_required(obs: Observer, out: Results, store: str) -> None:
    dag_id = f"ij_approval_required_{store}"
    run_id = obs.rest.trigger(dag_id)
    state = obs.rest.wait_for_run(dag_id, run_id, WAIT)
    tries = obs.tries(dag_id, run_id)
    seen = _approval(obs.episode_of(store, dag_id, run_id))
    out.expect(
        f"[{store}] f. require_approval without a decision -> generate failed on try 1",
        state == "failed"
        and tries.get("generate") == ("failed", 1)
        and seen.get("decision") is None
        and seen.get("submission") == "none"
        and obs.jobs_for_run(run_id) == 0,
        {"run": state, "tries": tries, **seen},
    )


def run(deployment: HitlDeployment, out: Results) -> None:
    deployment.start(say)
    rest = AirflowRest(deployment.api_url, APPROVER, deployment.passwords[APPROVER])
    rest.login()
    viewer = AirflowRest(deployment.api_url, VIEWER, deployment.passwords[VIEWER])
    obs = Observer(deployment, rest)
    started = time.monotonic()

    def per_store(store: str) -> None:
        def guarded(case: str, job: Callable[[], Any]) -> Any:
            try:
                return job()
            except Exception as exc:  # one case going wrong is that case's FAIL; the others go on
                out.expect(f"[{store}] {case} ran to the end", False, f"{type(exc).__name__}: {exc}")
                return None

        with ThreadPoolExecutor(max_workers=5) as pool:
            approved = pool.submit(guarded, "a. approve", lambda: case_approve(obs, out, store, viewer))
            others: list[tuple[str, Callable[[], None]]] = [
                ("b. reject", lambda: case_reject(obs, out, store)),
                ("c. killed approval task", lambda: case_killed(obs, out, store)),
                ("e. unknown episode", lambda: case_unknown(obs, out, store)),
                ("f. require_approval", lambda: case_required(obs, out, store)),
            ]
            futures = [pool.submit(guarded, case, job) for case, job in others]
            run_id = approved.result()
            if run_id is not None:
                guarded("d. cleared run", lambda: case_cleared(obs, out, store, run_id))
            for future in futures:
                future.result()

    pool = ThreadPoolExecutor(max_workers=len(STORES))
    try:
        for future in [pool.submit(per_store, store) for store in STORES]:
            future.result()
    finally:
        # On Ctrl-C, do not wait for the cases: stopping the deployment ends their polling.
        pool.shutdown(wait=False, cancel_futures=True)
    lookups = deployment.connection_lookups()
    out.expect(
        "f. the recording secrets backend saw lookups, none of the unapproved step's provider Connection",
        "media_provider" in lookups and "ij_store" in lookups and UNAPPROVED_PROVIDER_CONN_ID not in lookups,
        {conn_id: lookups.count(conn_id) for conn_id in sorted(set(lookups))},
    )
    say(f"cases ran in {time.monotonic() - started:.0f}s")


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the work dir, logs and databases")
    parser.add_argument("--workdir", type=Path, default=REPO / ".e2e" / "approval")
    args = parser.parse_args()
    args.workdir = args.workdir.resolve()  # Airflow's processes run elsewhere: a relative DAGs folder finds nothing
    signal.signal(signal.SIGTERM, _terminate)
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    deployment = HitlDeployment(
        args.workdir,
        tag=f"appr{int(time.time()) % 100000}",
        dag_files=(DAG_FILE,),
        dag_ids=DAG_IDS,
        provider_aliases=(UNAPPROVED_PROVIDER_CONN_ID,),
    )
    out = Results(say, shown=100_000)
    run_deployed(deployment, out, lambda: run(deployment, out), keep=args.keep)
    if out.ok and not args.keep:
        shutil.rmtree(args.workdir, ignore_errors=True)
    else:
        say(f"logs kept in {args.workdir}")
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(main())
