"""Hostile answers and bypasses of the approval gate, in ONE ``dag.test()`` process.

Started by ``test_approval_hostile.py`` like ``approval_scenarios.py`` (same DAGs folder, store,
provider server and secrets backend), whose `Responder` plays the outside world: answers written
as the REST API's ``PATCH .../hitlDetails`` writes them (which checks neither the user's name nor
``params_input``), and a task marked done by hand as the UI's "mark success" leaves it.
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path
from typing import Any

from tests.airflow.approval_scenarios import Responder, allocate, decide, provider_stats, record
from tests.airflow.scenario_process import Result, Scenarios, run_dag, utc

scenario = Scenarios()
#: The longest comment the REST API lets through is not bounded: a megabyte, with a terminal escape.
MEGABYTE = "\x1b[31mred\x1b[0m " + "x" * (1 << 20)


def answer_with(option: str, user: dict[str, Any], params_input: dict[str, Any]) -> Any:
    """What the REST API's PATCH does, with any user and any ``params_input`` (it checks neither)."""

    def act(ti: Any, session: Any) -> None:
        from airflow.models.trigger import handle_event_submit
        from airflow.triggers.base import TriggerEvent

        detail = ti.hitl_detail
        detail.responded_by = dict(user)
        detail.responded_at = datetime.datetime.now(datetime.timezone.utc)
        detail.chosen_options = [option]
        detail.params_input = dict(params_input)
        session.add(detail)
        handle_event_submit(TriggerEvent(detail.as_resume_event_payload()), task_instance=ti, session=session)

    return act


class SettledResponder(Responder):
    """A `Responder` that acts on each waiting task instance only once it has waited a second.

    An answer written the instant the task parks can be lost (the same race Airflow 3.3.2 shows
    in a deployment, see e2e/approval.py): give the park time to settle, as a person would.
    """

    SETTLE = 1.0

    def _run(self) -> None:
        import time

        from airflow.utils.session import create_session

        seen: dict[Any, float] = {}
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with create_session() as session:
                for ti in self._all_waiting(session):
                    first = seen.setdefault(ti.id, time.monotonic())
                    if time.monotonic() - first < self.SETTLE:
                        continue
                    try:
                        self.act(ti, session)
                    except LookupError:  # not this responder's task instance
                        continue
                    self.acted = True
                    return
            time.sleep(0.3)
        raise TimeoutError("no task instance waited for this responder")

    def _all_waiting(self, session: Any) -> list[Any]:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.state import TaskInstanceState
        from sqlalchemy import select
        from sqlalchemy.orm import joinedload

        return list(
            session.scalars(
                select(TaskInstance)
                .where(
                    TaskInstance.dag_id == self.dag_id,
                    TaskInstance.run_id == self.run_id,
                    TaskInstance.state == TaskInstanceState.AWAITING_INPUT,
                )
                .options(joinedload(TaskInstance.hitl_detail))
            )
        )


def gated_run(bag: Any, dag_id: str, eid: str, day: int, act: Any) -> Result:
    """``approval_scenarios.gated_run`` with a `SettledResponder`."""
    logical_date = utc(2026, 8, day, 6)
    responder = SettledResponder(dag_id, f"manual__{logical_date.isoformat()}", act)
    responder.start()
    run = run_dag(bag, dag_id, logical_date=logical_date, conf={"episode": eid})
    responder.join(timeout=5)
    run["responder"] = {"acted": responder.acted, "error": responder.error}
    run["episode"] = record(eid)
    return run


def mark_success(ti: Any, session: Any) -> None:
    """The UI's "mark success" on the waiting approval task: no answer, no decision."""
    from airflow.utils.state import TaskInstanceState

    ti.state = TaskInstanceState.SUCCESS
    session.add(ti)


@scenario
def odd_answers(bag: Any) -> Result:
    """Answers Airflow accepted with names and comments the record's rules refuse as they are."""
    cases: dict[str, tuple[str, dict[str, str], dict[str, Any]]] = {
        "control_characters": ("Approve", {"id": "u1", "name": "al\x07ice\u200cb"}, {"comment": MEGABYTE}),
        "long_name": ("Reject", {"id": "i" * 300, "name": "n" * 300}, {"comment": "no\tthanks\nbye"}),
        "nameless": ("Approve", {"id": "", "name": " "}, {}),
        "id_only": ("Approve", {"id": "user-7", "name": ""}, {"comment": {"n": 1}, "extra": "dropped"}),
    }
    runs = {}
    for day, (name, (option, user, params_input)) in enumerate(cases.items(), start=3):
        eid = allocate(f"odd-{name}")
        runs[name] = gated_run(bag, "ija_gate", eid, day, answer_with(option, user, params_input))
    return {**runs, "provider": provider_stats()}


@scenario
def marked_by_hand(bag: Any) -> Result:
    """The example DAGs gated, ``approve`` marked success by hand while it waits; then one unattended run."""
    from airflow_idempotent_jobs import open_store

    runs = {}
    for dag_id, day in (("weekly_media_pipeline", 17), ("weekly_media_pipeline_taskflow", 24)):
        logical_date = utc(2026, 8, day, 4)  # Monday 06:00 Berlin
        responder = SettledResponder(dag_id, f"manual__{logical_date.isoformat()}", mark_success)
        responder.start()
        run = run_dag(bag, dag_id, logical_date=logical_date, conf={"require_approval": True})
        responder.join(timeout=5)
        run["responder"] = {"acted": responder.acted, "error": responder.error}
        runs[dag_id] = run
    runs["unattended"] = run_dag(
        bag, "weekly_media_pipeline", logical_date=utc(2026, 8, 31, 4), conf={"require_approval": False}
    )
    with open_store(Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs") as store:
        episodes = {e.episode_id: e.to_dict() for e in store.list()}
    return {**runs, "episodes": episodes, "provider": provider_stats()}


@scenario
def mapped(bag: Any) -> Result:
    """Four map indexes: approved and rejected beforehand (no question), then one approved, one rejected."""
    ids = [allocate(f"mapped-{n}") for n in ("approved-before", "rejected-before", "approve-me", "reject-me")]
    decide(ids[0], "approved", by="dora")
    decide(ids[1], "rejected", by="erin")
    options = {ids[2]: "Approve", ids[3]: "Reject"}
    logical_date = utc(2026, 9, 7, 6)
    responders = []
    for eid, option in options.items():

        def act(ti: Any, session: Any, eid: str = eid, option: str = option) -> None:
            if eid not in (ti.hitl_detail.body or ""):
                raise LookupError("another map index's question")
            answer_with(option, {"id": "m", "name": f"mapper-{option}"}, {"comment": eid})(ti, session)

        responders.append(SettledResponder("ija_mapped_gate", f"manual__{logical_date.isoformat()}", act))
    for responder in responders:
        responder.start()
    run = run_dag(bag, "ija_mapped_gate", logical_date=logical_date, conf={"episodes": ids})
    for responder in responders:
        responder.join(timeout=5)
    run["responders"] = [{"acted": r.acted, "error": r.error} for r in responders]
    return {"run": run, "ids": ids, "episodes": {eid: record(eid) for eid in ids}, "provider": provider_stats()}


if __name__ == "__main__":
    import faulthandler

    faulthandler.dump_traceback_later(240, exit=True)  # a hung run shows every thread's stack in the log
    scenario.main(sys.argv[1:])
