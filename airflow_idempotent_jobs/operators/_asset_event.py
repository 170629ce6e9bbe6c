"""The episode's one Asset event: emitted through an `AssetAlias`, and only when the effects ledger says it is new.

What Airflow 3.3's task SDK does with a task's outlets (read in the installed 3.3.2 sources):

* ``airflow/sdk/execution_time/task_runner.py`` (``_handle_current_task_success``,
  ``_serialize_outlet_events``): when a try succeeds, the task reports its outlets and every event
  added to ``outlet_events``; ``airflow/models/taskinstance.py`` (``register_asset_changes_in_db``)
  then registers them, in the same transaction that marks the try a success. A plain
  ``outlets=[asset]`` gets an event on EVERY successful try, whether or not anything was added to
  ``outlet_events[asset]``: a retry or a clear emits again.
* An `AssetAlias` in ``outlets`` registers one event per ``outlet_events[alias].add(asset, extra=...)``
  and none when nothing was added. So the alias is the switch: `emit_once` adds the event only
  when the ledger's ``asset_event:<asset>`` effect is new.
* Partition keys: 3.3 has them (``OutletEventAccessor.add_partitions``, ``AssetEvent.partition_key``),
  but not through an alias: ``add_partitions`` on an alias accessor raises ``TypeError``
  (``airflow/sdk/execution_time/context.py``) and an alias's events take the DAG run's partition key
  (``register_asset_changes_in_db``). The episode id is therefore in the event's extra, not its key.

The ledger records the effect ``done`` when the event is added, but Airflow registers it only if that
try then succeeds. The extra carries the effect's token, and the Execution API lists the alias's
events (``GetAssetEventByAssetAlias``, no metadata database): a try that finds the effect ``done``
by its own task instance and no event with the token adds the recorded event again (the try that
added it failed, so nothing was registered); an ``unknown`` one is settled by the same lookup.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ._common import task_errors

if TYPE_CHECKING:
    from airflow.sdk import Asset, AssetAlias, Context
    from structlog.typing import FilteringBoundLogger

    from ..effects import EffectLedger, Happened
    from ..episode import Episode

__all__ = [
    "ALIAS_PREFIX",
    "EFFECT_PREFIX",
    "alias_for",
    "checked_asset",
    "effect_name_for",
    "episode_extra",
    "emit_once",
]

#: The alias each emitting task declares in its outlets: ``idempotent_jobs:episode_events:<asset name>``.
ALIAS_PREFIX: Final = "idempotent_jobs:episode_events:"
#: The ledger's effect for an asset's event: ``asset_event:<asset name>``.
EFFECT_PREFIX: Final = "asset_event:"


def checked_asset(task_id: str, asset: object, outlets: Any) -> list[Any]:
    """The task's outlets with the alias for ``asset`` added; TypeError for anything that cannot emit once."""
    from airflow.sdk import Asset

    if not isinstance(asset, Asset):
        raise TypeError(f"{task_id}: asset_event must be an airflow.sdk.Asset, not {type(asset).__name__}")
    given = [] if outlets is None else list(outlets) if isinstance(outlets, (list, tuple)) else [outlets]
    if any(isinstance(o, Asset) and (o.name, o.uri) == (asset.name, asset.uri) for o in given):
        raise TypeError(
            f"{task_id}: {asset.name!r} is both asset_event and in outlets: an outlet gets an event on every"
            " successful try; leave it out of outlets (asset_event emits its one event per episode)"
        )
    return [*given, alias_for(asset)]


def alias_for(asset: Asset) -> AssetAlias:
    from airflow.sdk import AssetAlias

    return AssetAlias(name=ALIAS_PREFIX + asset.name)


def effect_name_for(asset: Asset) -> str:
    """``asset_event:<name>``; a name an effect cannot carry is replaced by its digest."""
    from ..effect import EFFECT_NAME_PATTERN

    name = EFFECT_PREFIX + asset.name
    if EFFECT_NAME_PATTERN.fullmatch(name):
        return name
    return EFFECT_PREFIX + "sha256-" + hashlib.sha256(asset.name.encode()).hexdigest()[:32]


def episode_extra(episode: Episode, token: str, source: Mapping[str, Any]) -> dict[str, Any]:
    """The event's extra: the episode, its paid job, each done effect's result, the token, the emitting task."""
    from ..effect import EffectState

    sub = episode.submission
    effects = {
        name: effect.result
        for name, effect in episode.effects.items()
        if effect.state is EffectState.DONE and not name.startswith(EFFECT_PREFIX)
    }
    return {
        "episode_id": episode.episode_id,
        "week_id": episode.week_id,
        "cost": sub.cost,
        "remote_ref": sub.remote_ref,
        "effects": effects,
        "effect_token": token,
        "emitted_by": dict(source),
    }


def emit_once(
    ledger: EffectLedger, episode_id: str, asset: Asset, context: Context, log: FilteringBoundLogger | Any
) -> dict[str, Any] | None:
    """Add the episode's event on ``asset`` unless the ledger (and Airflow) already hold it; the extra."""
    alias = alias_for(asset)
    outlet = context["outlet_events"][alias]
    ti = context["ti"]
    source = {"dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id, "map_index": ti.map_index}

    def body(token: str) -> dict[str, Any]:
        extra = episode_extra(ledger.store.get(episode_id), token, source)
        outlet.add(asset, extra=extra)
        return extra

    def find(token: str) -> Happened | None:
        return _find_event(alias.name, token)

    inputs = {"asset": {"name": asset.name, "uri": asset.uri}}
    with task_errors():
        run = ledger.run(episode_id, effect_name_for(asset), body, inputs=inputs, capability="lookup", lookup=find)
    recorded = run.result if isinstance(run.result, dict) else None
    if run.ran:
        log.info("Episode %s: its event on %s added (registered when this try succeeds)", episode_id, asset.name)
    elif recorded is not None and recorded.get("emitted_by") == source and find(run.effect.token) is None:
        outlet.add(asset, extra=recorded)
        log.warning(
            "Episode %s: the try that added its event on %s did not succeed: added again", episode_id, asset.name
        )
    else:
        log.info("Episode %s: its event on %s was emitted before; none now", episode_id, asset.name)
    return recorded


def _find_event(alias_name: str, token: str) -> Happened | None:
    """The alias's event whose extra carries ``token``, read through the Execution API."""
    from airflow.sdk.execution_time.context import InletEventsAccessor

    from ..effects import Happened

    for event in InletEventsAccessor(alias_name=alias_name):
        extra = event.extra
        if isinstance(extra, Mapping) and extra.get("effect_token") == token:
            return Happened(dict(extra))
    return None
