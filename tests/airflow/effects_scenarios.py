"""Effects and the episode's one Asset event under real ``dag.test()`` runs, in ONE process.

Started by ``test_effect_runs.py`` with a DAGs folder holding ``dags_effects/effects_dags.py`` and the
two example DAG files of weekly_media_effects.py, and one provider server in its own process.
A "clear" is ``dag.test()`` again with the same logical date: Airflow clears the run's task
instances and runs them again under the same ``run_id``. Asset events are read from Airflow's
metadata database here (the test process may; package code never does). Usage:
``python -m tests.airflow.effects_scenarios OUT.json``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tests.airflow.scenario_process import Result, Scenarios, dag_store, provider, run_dag, store_contents, utc
from tests.airflow.taskflow_scenarios import NORMAL, xcoms

scenario = Scenarios()
FIRST, SECOND = utc(2026, 8, 3, 6), utc(2026, 8, 10, 6)  # 2026-W32, 2026-W33


def sink_lines(name: str) -> list[str]:
    """The lines an effect's body appended to its sink (tests/airflow/dags_effects: one per time it happened)."""
    path = Path(os.environ["IJ_EFFECT_SINKS"]) / f"{name}.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def run(bag: Any, dag_id: str, logical_date: Any = FIRST) -> Result:
    done = run_dag(bag, dag_id, logical_date=logical_date)
    done["xcoms"] = xcoms(dag_id, done["run_id"])
    return done


def asset_events(uri: str) -> list[dict[str, Any]]:
    """Every event Airflow registered on the asset, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(AssetEvent).join(AssetModel, AssetModel.id == AssetEvent.asset_id).where(AssetModel.uri == uri)
        ).all()
        return [
            {
                "id": e.id,
                "extra": e.extra,
                "source_dag_id": e.source_dag_id,
                "source_task_id": e.source_task_id,
                "source_run_id": e.source_run_id,
                "partition_key": e.partition_key,
            }
            for e in sorted(rows, key=lambda e: e.id)
        ]


def run_asset_triggered(bag: Any, dag_id: str, uri: str) -> Result:
    """``dag.test()`` of ``dag_id`` as the scheduler starts it for asset events: an asset-triggered run
    that consumed every event on ``uri`` (the scheduler's own steps: ``create_dagrun`` with run type
    ``asset_triggered``, then ``consumed_asset_events``), so its tasks read ``triggering_asset_events``."""
    import airflow.models.dagrun as dagrun_module
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType
    from sqlalchemy import select

    original = dagrun_module.get_or_create_dagrun

    def asset_triggered(*, dag: Any, run_after: Any, session: Any, **_: Any) -> Any:
        events = session.scalars(
            select(AssetEvent).join(AssetModel, AssetModel.id == AssetEvent.asset_id).where(AssetModel.uri == uri)
        ).all()
        dag_run = dag.create_dagrun(
            run_id=dagrun_module.DagRun.generate_run_id(
                run_type=DagRunType.ASSET_TRIGGERED, logical_date=None, run_after=run_after
            ),
            logical_date=None,
            data_interval=None,
            run_after=run_after,
            run_type=DagRunType.ASSET_TRIGGERED,
            triggered_by=DagRunTriggeredByType.ASSET,
            state=DagRunState.RUNNING,
            session=session,
        )
        dag_run.consumed_asset_events.extend(events)
        session.commit()
        return dag_run

    dagrun_module.get_or_create_dagrun = asset_triggered
    try:
        done = run_dag(bag, dag_id, logical_date=None, run_after=utc(2026, 8, 20, 6))
    finally:
        dagrun_module.get_or_create_dagrun = original
    done["xcoms"] = xcoms(dag_id, done["run_id"])
    return done


def effects_of(dag_id: str, store: Path | str | None = None) -> list[dict[str, Any]]:
    return [
        {"episode_id": e["episode_id"], "submission": e["submission"], "effects": e.get("effects") or {}}
        for e in store_contents(store or dag_store(dag_id))
    ]


def retried(bag: Any, dag_id: str, store: Path | str) -> Result:
    return {
        "run": run(bag, dag_id),
        "publish_sink": sink_lines(f"{dag_id}_publish"),
        "notify_sink": sink_lines(f"{dag_id}_notify"),
        "store": effects_of(dag_id, store),
    }


@scenario
def retry_after_the_effect(bag: Any) -> Result:
    """The decorator and the classic operator: try 1 crashes after its effect ran; try 2 runs nothing."""
    return retried(bag, "ije_retry", dag_store("ije_retry"))


@scenario
def retry_after_the_effect_pg(bag: Any) -> Result:
    """The same on the PostgreSQL store (skipped where no server answers)."""
    url = os.environ.get("IJ_EFFECTS_PG")
    return {"skipped": True} if not url else retried(bag, "ije_retry_pg", url)


@scenario
def producer_cleared(bag: Any) -> Result:
    """One run, three clears of it, a run in the next week: one effect each and one event per episode."""
    provider("POST", "/_admin/config", NORMAL)
    runs = [run(bag, "ije_producer") for _ in range(4)]
    runs.append(run(bag, "ije_producer", SECOND))
    return {
        "runs": runs,
        "publish_sink": sink_lines("ije_producer_publish"),
        "notify_sink": sink_lines("ije_producer_notify"),
        "events": asset_events("media://ije/episodes"),
        "store": effects_of("ije_producer"),
        "digest": run_asset_triggered(bag, "ije_digest", "media://ije/episodes"),
    }


@scenario
def emit_retried(bag: Any) -> Result:
    """The emitting try fails after adding the event (never registered); its retry adds it; a clear does not."""
    runs = [run(bag, "ije_emit_retry"), run(bag, "ije_emit_retry")]
    return {
        "runs": runs,
        "sink": sink_lines("ije_emit_retry_publish"),
        "events": asset_events("media://ije/retried-episodes"),
        "store": effects_of("ije_emit_retry"),
    }


@scenario
def mapped(bag: Any) -> Result:
    runs = [run(bag, "ije_mapped"), run(bag, "ije_mapped")]
    return {"runs": runs, "sink": sink_lines("ije_mapped_upload"), "store": effects_of("ije_mapped")}


@scenario
def changed_input(bag: Any) -> Result:
    return {
        "run": run(bag, "ije_changed_input"),
        "sink": sink_lines("ije_changed_input_publish"),
        "upload_sink": sink_lines("ije_changed_input_upload"),
        "notify_sink": sink_lines("ije_changed_input_notify"),
        "store": effects_of("ije_changed_input"),
    }


@scenario
def capabilities(bag: Any) -> Result:
    """Each body happens and loses its answer on try 1; then the run is cleared once."""
    runs = [run(bag, "ije_capabilities"), run(bag, "ije_capabilities")]
    return {
        "runs": runs,
        "sinks": {c: sink_lines(f"ije_capabilities_{c}") for c in ("none", "lookup", "key")},
        "store": effects_of("ije_capabilities"),
    }


@scenario
def example_effects(bag: Any) -> Result:
    """The example DAG pair as shipped: the producer run and cleared twice, then its digest."""
    provider("POST", "/_admin/config", NORMAL)
    runs = [run(bag, "weekly_media_effects", utc(2026, 9, 21, 4)) for _ in range(3)]
    default_store = Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs"
    return {
        "runs": runs,
        "events": asset_events("media://example/weekly-episodes"),
        "store": effects_of("weekly_media_effects", default_store),
        "provider": provider("GET", "/_admin/stats"),
        "digest": run_asset_triggered(bag, "weekly_digest", "media://example/weekly-episodes"),
    }


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
