"""`AllocateEpisodeOperator`: one job per scheduled invocation, the same job on every retry."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from airflow.sdk import BaseOperator

from ._common import AirflowFailException, open_task_store, task_errors

if TYPE_CHECKING:
    from airflow.sdk import Context

    from ..episode import Episode
    from ..identity import WeekId
    from ..stores import EpisodeStore

__all__ = ["TEMPORARY_RUN_PREFIX", "WEEK_SOURCES", "AllocateEpisodeOperator", "default_allocation_key"]

#: Where the week may come from; ``None`` means ``logical_date``, else ``run_after``.
WEEK_SOURCES: Final = ("logical_date", "data_interval_end", "run_after")
#: ``airflow tasks test`` runs under a throwaway run id that changes on every call.
TEMPORARY_RUN_PREFIX: Final = "__airflow_temporary_run_"


def default_allocation_key(dag_id: str, task_id: str, run_id: str, map_index: int | None) -> str:
    """``airflow:{dag_id}:{task_id}:{run_id}``, plus ``:{map_index}`` for a mapped task instance."""
    key = f"airflow:{dag_id}:{task_id}:{run_id}"
    if map_index is not None and map_index >= 0:
        key += f":{map_index}"
    return key


class AllocateEpisodeOperator(BaseOperator):
    """Allocate this run's episode (``2026-W32-0``, ``2026-W32-1``, ...) and return its id.

    Retries, cleared tasks and backfills of the same DAG run keep the ``run_id``, hence the key,
    hence the episode. Also pushes XComs ``week_id``, ``sequence``, ``allocation_key``, ``reused``.

    :param week: templated ``YYYY-Www`` override of the week.
    :param allocation_key: templated override of the default key.
    :param week_source: ``logical_date``, ``data_interval_end`` or ``run_after``; by default the
        logical date, or ``run_after`` for runs without one (manual and asset-triggered runs).
    :param timezone: IANA name the week is computed in; the DAG's time zone by default.
    :param fingerprint: templated hash of the request bound to the key (a different one later is a conflict).
    :param store: templated store URL (path, ``file://`` or ``postgresql://``).
    :param store_conn_id: a Connection naming the store (``idempotent_jobs_store`` or ``postgres``).
    :param allow_test_runs: let ``airflow tasks test`` runs allocate for real (they persist nothing by default).
    """

    template_fields: Sequence[str] = ("week", "allocation_key", "fingerprint", "store", "timezone")
    ui_color = "#e8f4ea"

    def __init__(
        self,
        *,
        week: str | None = None,
        allocation_key: str | None = None,
        week_source: str | None = None,
        timezone: str | None = None,
        fingerprint: str | None = None,
        store: str | None = None,
        store_conn_id: str | None = None,
        lock_timeout: float | None = None,
        allow_test_runs: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if week_source is not None and week_source not in WEEK_SOURCES:
            raise ValueError(f"week_source must be one of {', '.join(WEEK_SOURCES)}, not {week_source!r}")
        self.week = week
        self.allocation_key = allocation_key
        self.week_source = week_source
        self.timezone = timezone
        self.fingerprint = fingerprint
        self.store = store
        self.store_conn_id = store_conn_id
        self.lock_timeout = lock_timeout
        self.allow_test_runs = allow_test_runs

    def execute(self, context: Context) -> str | None:
        ti = context["ti"]
        run_id = context["run_id"]
        with task_errors():
            week = self._week(context)
            key = self.allocation_key or default_allocation_key(ti.dag_id, ti.task_id, run_id, ti.map_index)
            if run_id.startswith(TEMPORARY_RUN_PREFIX) and not self.allow_test_runs:
                self._dry_run(week, key, run_id)
                return None
            store = open_task_store(self.store, self.store_conn_id, self.lock_timeout)
            try:
                episode = store.allocate(week, key, self.fingerprint or None)
            finally:
                store.close()
        self._report(context, episode, store)
        return episode.episode_id

    def _week(self, context: Context) -> WeekId:
        from ..identity import WeekId

        if self.week:
            return WeekId.parse(self.week)
        moment, source = self._moment(context)
        zone: Any = self.timezone or getattr(self.dag, "timezone", None) or "UTC"
        week = WeekId.from_datetime(moment, zone)
        self.log.info("Week %s from %s %s (time zone %s)", week, source, moment.isoformat(), _zone_name(zone))
        return week

    def _moment(self, context: Context) -> tuple[dt.datetime, str]:
        dag_run = context["dag_run"]
        source = self.week_source
        if source is None:
            logical = context.get("logical_date")
            return (logical, "logical_date") if logical is not None else (dag_run.run_after, "run_after")
        if source == "run_after":
            return dag_run.run_after, source
        value = context.get(source) or getattr(dag_run, source, None)
        if not isinstance(value, dt.datetime):
            raise AirflowFailException(
                f"week_source={source!r} but run {context['run_id']!r} has no {source}; "
                "use week_source='run_after' or pass week="
            )
        return value, source

    def _dry_run(self, week: WeekId, key: str, run_id: str) -> None:
        """``airflow tasks test``: say what would be allocated, write nothing."""
        store = open_task_store(self.store, self.store_conn_id, self.lock_timeout)
        try:
            held = store.find(key)
            used = [e.sequence for e in store.list(week)]
        finally:
            store.close()
        next_id = f"{week}-{max(used) + 1 if used else 0}"
        would = f"reuse {held.episode_id}" if held is not None else f"allocate {next_id}"
        self.log.warning(
            "Test run %s: would %s for key %r; nothing persisted (pass allow_test_runs=True to allocate)",
            run_id,
            would,
            key,
        )

    def _report(self, context: Context, episode: Episode, store: EpisodeStore) -> None:
        verb = "reused" if episode.reused else "allocated"
        self.log.info(
            "Episode %s %s for key %r (week %s, store %s)",
            episode.episode_id,
            verb,
            episode.allocation_key,
            episode.week_id,
            store.location,
        )
        ti = context["ti"]
        ti.xcom_push(key="week_id", value=episode.week_id)
        ti.xcom_push(key="sequence", value=episode.sequence)
        ti.xcom_push(key="allocation_key", value=episode.allocation_key)
        ti.xcom_push(key="reused", value=episode.reused)


def _zone_name(zone: Any) -> str:
    return str(getattr(zone, "name", None) or zone)
