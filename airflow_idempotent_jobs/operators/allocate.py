"""`AllocateEpisodeOperator`: one job per scheduled invocation, the same job on every retry."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from ..links.episode import EpisodeLink
from . import _metrics
from ._common import AirflowFailException, StoreOperator, refuse_empty_renderings, task_errors

if TYPE_CHECKING:
    from airflow.sdk import Context

    from ..episode import Episode
    from ..identity import WeekId
    from ..stores import EpisodeStore

__all__ = ["TEMPORARY_RUN_PREFIX", "WEEK_SOURCES", "AllocateEpisodeOperator"]

#: Names that moved to `airflow_idempotent_jobs.task_key` (the key format and its parsing, in one place).
_MOVED_TO_TASK_KEY: Final = frozenset({"BOUNDED_KEY_PREFIX", "bounded_allocation_key", "default_allocation_key"})

#: Where the week may come from; ``None`` means ``logical_date``, else ``run_after``.
WEEK_SOURCES: Final = ("logical_date", "data_interval_end", "run_after")
#: ``airflow tasks test`` runs under a throwaway run id that changes on every call.
TEMPORARY_RUN_PREFIX: Final = "__airflow_temporary_run_"


class AllocateEpisodeOperator(StoreOperator):
    """Allocate this run's episode (``2026-W32-0``, ``2026-W32-1``, ...) and return its id.

    Retries, cleared tasks and backfills of the same DAG run keep the ``run_id``, hence the key,
    hence the episode. Also pushes XComs ``week_id``, ``sequence``, ``allocation_key``, ``reused``.

    The new episode records this task instance as its owner (dag, task, run, map index), in the
    same commit; the Idempotent Jobs page shows it to that DAG's readers, whatever the key says.
    A key already held by another DAG's episode fails the task without retry (`AllocationConflict`).

    Every templated argument given must render a value: one that renders empty, ``None`` or
    ``null`` (any case, blanks ignored) fails the task without retry, naming the template.

    :param week: templated ``YYYY-Www`` override of the week.
    :param allocation_key: templated override of the default key. On a mapped task ``:{map_index}``
        is appended, so each map index gets its own episode, unless ``key_per_map_index=False``.
    :param key_per_map_index: with ``allocation_key`` on a mapped task: one episode per map index
        (the default) or, when False, one episode shared by all of them.
    :param week_source: ``logical_date``, ``data_interval_end`` or ``run_after``; by default the
        logical date, or ``run_after`` for runs without one (manual and asset-triggered runs).
    :param timezone: templated IANA name the week is computed in. Without it: the DAG's own time
        zone; for a DAG that has none (its zone is ``[core] default_timezone``), ``[idempotent_jobs]
        timezone`` when set, else that default.
    :param fingerprint: templated hash of the request bound to the key (a different one later is a conflict).
    :param store: templated store URL (path, ``file://`` or ``postgresql://``); its password never
        reaches the rendered fields Airflow shows.
    :param store_conn_id: a Connection naming the store (``idempotent_jobs_store`` or ``postgres``).
        With neither: ``[idempotent_jobs] store`` / ``store_conn_id``, else the file store under
        ``$AIRFLOW_HOME``, which is refused when the executor runs tasks on several hosts.
    :param allow_test_runs: let ``airflow tasks test`` runs allocate for real (they persist nothing by default).
    """

    template_fields: Sequence[str] = ("week", "allocation_key", "fingerprint", "store", "timezone")
    ui_color = "#e8f4ea"
    #: "Episode" on the task instance opens this episode in the Idempotent Jobs page.
    operator_extra_links = (EpisodeLink(),)

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
        key_per_map_index: bool = True,
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
        self.key_per_map_index = key_per_map_index
        # The templates as written, to name them when one renders nothing (see refuse_empty_renderings).
        self._templates = {field: getattr(self, field) for field in self.template_fields}

    def execute(self, context: Context) -> str | None:
        ti = context["ti"]
        run_id = context["run_id"]
        with task_errors():
            refuse_empty_renderings(
                self.task_id, self._templates, {field: getattr(self, field) for field in self.template_fields}
            )
            week = self._week(context)
            key = self._key(ti.dag_id, ti.task_id, run_id, ti.map_index)
            if run_id.startswith(TEMPORARY_RUN_PREFIX) and not self.allow_test_runs:
                self._dry_run(week, key, run_id)
                return None
            from ..owner import Owner  # here: DAG files import this module on every parse

            owner = Owner.of_task(ti.dag_id, ti.task_id, run_id, ti.map_index)
            store = self.hook.store
            try:
                episode = store.allocate(week, key, self.fingerprint, owner=owner)
            finally:
                store.close()
        self._report(context, episode, store)
        return episode.episode_id

    def _key(self, dag_id: str, task_id: str, run_id: str, map_index: int | None) -> str:
        if self.allocation_key is None:
            from ..task_key import default_allocation_key  # here: DAG files import this module on every parse

            return default_allocation_key(dag_id, task_id, run_id, map_index)
        key = str(self.allocation_key)
        if self.key_per_map_index and map_index is not None and map_index >= 0:
            key += f":{map_index}"  # one key for all map indexes would give them all one episode
        return key

    def _week(self, context: Context) -> WeekId:
        from ..identity import WeekId

        if self.week is not None:
            return WeekId.parse(self.week)
        moment, source = self._moment(context)
        zone, zone_source = self._zone()
        week = WeekId.from_datetime(moment, zone)
        self.log.info(
            "Week %s from %s %s (time zone %s, from %s)",
            week,
            source,
            moment.isoformat(),
            _zone_name(zone),
            zone_source,
        )
        return week

    def _zone(self) -> tuple[Any, str]:
        """timezone= first; then the DAG's own zone; then ``[idempotent_jobs] timezone``; then Airflow's default."""
        if self.timezone is not None:
            return self.timezone, "timezone="
        dag_zone = getattr(self.dag, "timezone", None)
        if dag_zone is not None and not _is_airflow_default_zone(dag_zone):
            return dag_zone, "the DAG"
        from ..config import SECTION, env_name, setting
        from ..errors import InvalidConfiguration, InvalidIdentifier
        from ..identity import resolve_timezone

        configured = setting("timezone")
        if configured is not None:
            try:
                return resolve_timezone(configured), f"[{SECTION}] timezone"
            except InvalidIdentifier as exc:
                field = f"[{SECTION}] timezone ({env_name('timezone')})"
                raise InvalidConfiguration("deployment setting", field, f"{configured!r}: {exc.reason}") from None
        return (dag_zone or "UTC"), "[core] default_timezone"

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
        """``airflow tasks test``: say what would be allocated, reading the store as a reader does.

        `EpisodeStore.require_existing` first: nothing is created (no schema, no directory), an older
        schema is not migrated, nothing is written. No store yet is a fresh deployment (the first real
        run takes the week's first number); a store this code cannot read fails the task without retry.
        """
        from ..errors import IdempotentJobsError, StoreMissing

        store = self.hook.store
        try:
            store.require_existing()
            held, used, fresh = store.find(key), [e.sequence for e in store.list(week)], ""
        except StoreMissing:
            held, used, fresh = None, [], f" (no store at {store.location} yet: the first real run creates it)"
        except IdempotentJobsError as exc:
            raise AirflowFailException(
                f"Test run {run_id}: cannot tell what it would allocate: {exc}; nothing was written"
            ) from exc
        finally:
            store.close()
        next_id = f"{week}-{max(used) + 1 if used else 0}"
        would = f"reuse {held.episode_id}" if held is not None else f"allocate {next_id}"
        self.log.warning(
            "Test run %s: would %s for key %r%s; nothing persisted (pass allow_test_runs=True to allocate)",
            run_id,
            would,
            key,
            fresh,
        )

    def _report(self, context: Context, episode: Episode, store: EpisodeStore) -> None:
        _metrics.allocated(context, episode)
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


def _is_airflow_default_zone(zone: Any) -> bool:
    """Whether a DAG's zone is Airflow's ``[core] default_timezone``: a DAG with no start date, or a
    naive one, gets it. (An explicit start date in that very zone cannot be told apart.)"""
    try:
        from airflow.settings import TIMEZONE
    except ImportError:  # pragma: no cover
        return False
    return _zone_name(zone) == _zone_name(TIMEZONE)


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_TASK_KEY:
        import warnings

        from .. import task_key

        warnings.warn(
            f"{__name__}.{name} moved to airflow_idempotent_jobs.task_key; the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(task_key, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
