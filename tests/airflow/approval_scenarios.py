"""The approval gate's real-Airflow scenarios, in ONE ``dag.test()`` process (see scenario_process.py).

Started by ``test_approval_runs.py`` with a DAGs folder holding only ``dags_approval/``, the
provider server in its own process and the recording secrets backend.

``dag.test()`` never answers a HITL question itself: it keeps the run alive while the task waits
in ``awaiting_input``. A `Responder` thread plays the part of the outside world on the same
metadata database, through Airflow's own code: a person's answer is written as the REST API's
``PATCH .../hitlDetails`` writes it (the response columns, then ``handle_event_submit``), and a
timeout is the scheduler's own sweep (``SchedulerJobRunner.check_awaiting_input_timeouts``). The
HTTP layer itself is the e2e suite's (e2e/approval.py, a real api-server).
"""

from __future__ import annotations

import datetime
import logging
import os
import subprocess
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.airflow.scenario_process import Result, Scenarios, provider, run_dag, secrets_lookups, utc

scenario = Scenarios()
STORE = Path(os.environ.get("IJ_STORES", ".")) / "ija"
ALICE = {"id": "alice-id", "name": "alice"}


def provider_stats() -> Any:
    return provider("GET", "/_admin/stats")


def allocate(key: str) -> str:
    from airflow_idempotent_jobs import open_store

    with open_store(STORE) as store:
        return str(store.allocate("2026-W32", key).episode_id)


def decide(eid: str, decision: str, by: str = "carol", comment: str | None = None) -> None:
    from airflow_idempotent_jobs import open_store

    with open_store(STORE) as store:
        store.decide(eid, decision, by=by, via="cli", comment=comment)


def record(eid: str) -> dict[str, Any]:
    from airflow_idempotent_jobs import open_store

    with open_store(STORE) as store:
        return store.get(eid).to_dict()


class Responder(threading.Thread):
    """Waits for ``dag_id``'s task to park in ``awaiting_input``, then acts on it once."""

    def __init__(self, dag_id: str, run_id: str, act: Callable[[Any, Any], None]) -> None:
        super().__init__(daemon=True)
        self.dag_id, self.run_id, self.act = dag_id, run_id, act
        self.error: str | None = None
        self.acted = False

    def run(self) -> None:
        try:
            self._run()
        except Exception:  # reported in the scenario's result; the parked task is failed so the run ends
            self.error = traceback.format_exc()
            print(f"Responder for {self.dag_id}: {self.error}", file=sys.stderr, flush=True)
            self._give_up()

    def _waiting(self, session: Any) -> Any:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.state import TaskInstanceState
        from sqlalchemy import select
        from sqlalchemy.orm import joinedload

        return session.scalars(
            select(TaskInstance)
            .where(
                TaskInstance.dag_id == self.dag_id,
                TaskInstance.run_id == self.run_id,
                TaskInstance.state == TaskInstanceState.AWAITING_INPUT,
            )
            .options(joinedload(TaskInstance.hitl_detail))
        ).first()

    def _run(self) -> None:
        from airflow.utils.session import create_session

        deadline = time.monotonic() + 60
        parked_at: float | None = None
        while time.monotonic() < deadline:
            with create_session() as session:
                ti = self._waiting(session)
                if ti is not None:
                    # Answering the instant the task parks can leave it waiting for good under
                    # dag.test(); a person is never that fast: act a moment later.
                    parked_at = parked_at or time.monotonic()
                    if time.monotonic() - parked_at >= 1.0:
                        self.act(ti, session)
                        self.acted = True
                        return
            time.sleep(0.3)
        raise TimeoutError("the task never waited for input")

    def _give_up(self) -> None:
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState

        with create_session() as session:
            ti = self._waiting(session)
            if ti is not None:
                ti.state = TaskInstanceState.FAILED


def answer(option: str, comment: str, user: dict[str, str] = ALICE, before: Callable[[], None] | None = None) -> Any:
    """What the REST API's PATCH does with a person's answer (routes/public/hitl.py)."""

    def act(ti: Any, session: Any) -> None:
        from airflow.models.trigger import handle_event_submit
        from airflow.triggers.base import TriggerEvent

        if before is not None:
            before()
        detail = ti.hitl_detail
        detail.responded_by = dict(user)
        detail.responded_at = datetime.datetime.now(datetime.timezone.utc)
        detail.chosen_options = [option]
        detail.params_input = {"comment": comment}
        session.add(detail)
        handle_event_submit(TriggerEvent(detail.as_resume_event_payload()), task_instance=ti, session=session)

    return act


def time_out(ti: Any, session: Any) -> None:
    """The scheduler's sweep, once the response deadline has passed."""
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner

    time.sleep(2.5)  # response_timeout is 1 s
    # A runner needs a scheduler Job; the sweep itself uses only its logger.
    runner: Any = types.SimpleNamespace(log=logging.getLogger("sweep"))
    SchedulerJobRunner.check_awaiting_input_timeouts(runner)


def gated_run(bag: Any, dag_id: str, eid: str, day: int, act: Any = None, conf: dict[str, Any] | None = None) -> Result:
    logical_date = utc(2026, 8, day, 6)
    responder = None if act is None else Responder(dag_id, f"manual__{logical_date.isoformat()}", act)
    if responder is not None:
        responder.start()
    run = run_dag(bag, dag_id, logical_date=logical_date, conf={"episode": eid, **(conf or {})})
    if responder is not None:
        responder.join(timeout=5)
        run["responder"] = {"acted": responder.acted, "error": responder.error}
    run["episode"] = record(eid)
    return run


# -- decided beforehand: no question ---------------------------------------------------------------
@scenario
def decided_beforehand(bag: Any) -> Result:
    approved, rejected = allocate("approved-before"), allocate("rejected-before")
    cli = subprocess.run(
        [
            str(Path(sys.executable).parent / "idempotent-jobs"),
            "--store",
            str(STORE),
            "approve",
            approved,
            "--by",
            "dora",
            "--comment",
            "fine by me",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    decide(rejected, "rejected", by="erin", comment="not this week")
    return {
        "cli": {"code": cli.returncode, "stderr": cli.stderr[-2000:]},
        "approved": gated_run(bag, "ija_gate", approved, 3),
        "approved_other_dag": gated_run(bag, "ija_gate_again", approved, 3),
        "rejected": gated_run(bag, "ija_gate", rejected, 4),
        "rejected_strict": gated_run(bag, "ija_gate_strict", rejected, 4),
        "provider": provider_stats(),
    }


@scenario
def bad_ids(bag: Any) -> Result:
    return {"run": run_dag(bag, "ija_bad_ids", logical_date=utc(2026, 8, 3, 6))}


# -- asked: a person answers -----------------------------------------------------------------------
@scenario
def answered(bag: Any) -> Result:
    approve_me, reject_me, crash_after = allocate("answer-approve"), allocate("answer-reject"), allocate("crash")
    return {
        "approved": gated_run(bag, "ija_gate", approve_me, 5, answer("Approve", "ship it")),
        "rejected": gated_run(bag, "ija_gate", reject_me, 6, answer("Reject", "")),
        # Try 1 records the answer, then crashes: try 2 finds the decision and does not ask.
        "crash_after_answer": gated_run(
            bag, "ija_gate", crash_after, 7, answer("Approve", "yes"), conf={"fail_on_try": 1}
        ),
        "provider": provider_stats(),
    }


@scenario
def conflicting_answer(bag: Any) -> Result:
    """Someone rejects with the CLI while the question is open; then a person approves in Airflow."""
    eid = allocate("conflict")
    run = gated_run(bag, "ija_gate", eid, 10, answer("Approve", "go", before=lambda: decide(eid, "rejected", "frank")))
    return {"run": run, "provider": provider_stats()}


@scenario
def timeouts(bag: Any) -> Result:
    to_reject, to_fail = allocate("timeout-reject"), allocate("timeout-fail")
    return {
        "reject": gated_run(bag, "ija_timeout_reject", to_reject, 11, time_out),
        "fail": gated_run(bag, "ija_timeout_fail", to_fail, 12, time_out),
    }


# -- the paid step requires approval -------------------------------------------------------------
@scenario
def required(bag: Any) -> Result:
    undecided, undecided_tf = allocate("required-undecided"), allocate("required-undecided-tf")
    rejected, rejected_tf = allocate("required-rejected"), allocate("required-rejected-tf")
    approved, approved_tf = allocate("required-approved"), allocate("required-approved-tf")
    for eid in (rejected, rejected_tf):
        decide(eid, "rejected", by="gina")
    for eid in (approved, approved_tf):
        decide(eid, "approved", by="gina")
    before = len(secrets_lookups())
    runs = {
        "undecided": run_dag(
            bag,
            "ija_required",
            logical_date=utc(2026, 8, 13, 6),
            conf={"episode": undecided, "episode_tf": undecided_tf},
        ),
        "rejected": run_dag(
            bag, "ija_required", logical_date=utc(2026, 8, 14, 6), conf={"episode": rejected, "episode_tf": rejected_tf}
        ),
    }
    refused_lookups = secrets_lookups()[before:]
    runs["approved"] = run_dag(
        bag, "ija_required", logical_date=utc(2026, 8, 15, 6), conf={"episode": approved, "episode_tf": approved_tf}
    )
    return {
        **runs,
        "refused_lookups": refused_lookups,
        "episodes": {
            eid: record(eid) for eid in (undecided, undecided_tf, rejected, rejected_tf, approved, approved_tf)
        },
        "ids": {
            "undecided": [undecided, undecided_tf],
            "rejected": [rejected, rejected_tf],
            "approved": [approved, approved_tf],
        },
        "provider": provider_stats(),
    }


# -- the example DAGs with their gate on -----------------------------------------------------------
@scenario
def examples_gated(bag: Any) -> Result:
    """Both example DAGs as shipped, run with ``{"require_approval": true}``: one approved, one rejected."""
    from airflow_idempotent_jobs import open_store

    runs = {}
    for dag_id, option, day in (
        ("weekly_media_pipeline", "Approve", 17),
        ("weekly_media_pipeline_taskflow", "Reject", 24),
    ):
        logical_date = utc(2026, 8, day, 4)  # Monday 06:00 Berlin
        responder = Responder(dag_id, f"manual__{logical_date.isoformat()}", answer(option, f"{option} via example"))
        responder.start()
        run = run_dag(bag, dag_id, logical_date=logical_date, conf={"require_approval": True})
        responder.join(timeout=5)
        run["responder"] = {"acted": responder.acted, "error": responder.error}
        runs[dag_id] = run
    with open_store(Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs") as store:
        episodes = {e.episode_id: e.to_dict() for e in store.list()}
    return {**runs, "episodes": episodes, "provider": provider_stats()}


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
