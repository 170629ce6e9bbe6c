"""What a DAG file sees of effects at parse time: ``@task.episode(effect=...)``, `EpisodeEffectOperator`
and ``asset_event=``: options that cannot work refused with one line naming the task, the alias in the
task's outlets (and its serialized form), templated fields, nothing read or written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG, Asset, AssetAlias, task

from airflow_idempotent_jobs.effect import EFFECT_NAME_PATTERN
from airflow_idempotent_jobs.operators import EpisodeEffectOperator
from airflow_idempotent_jobs.operators._asset_event import effect_name_for
from airflow_idempotent_jobs.operators._effect_step import EffectStep

pytestmark = pytest.mark.airflow

START = pendulum.datetime(2026, 1, 1, tz="UTC")
EPISODES = Asset(name="episodes", uri="media://example/episodes")


def publish(episode: Any = None, effect_token: Any = None) -> None:
    pass


def plain(episode: Any = None) -> None:
    pass


def look(token: str) -> None:
    return None


def test_effect_options_reach_the_operator_and_asset_event_adds_only_an_alias(tmp_path: Path) -> None:
    with DAG("defs_effects", schedule=None, start_date=START) as dag:
        task.episode(
            episode_id="{{ ti.xcom_pull('allocate') }}",
            store=str(tmp_path / "store"),
            effect="notify:slack",
            effect_capability="lookup",
            effect_lookup=look,
            effect_inputs={"channel": "{{ params.channel }}"},
            effect_per_map_index=False,
            asset_event=EPISODES,
            outlets=[Asset("other")],
        )(publish)()
        EpisodeEffectOperator(
            task_id="classic", episode_id="2026-W32-0", effect="publish", python_callable=publish, op_kwargs={"a": 1}
        )
    step, classic = dag.get_task("publish"), dag.get_task("classic")
    assert isinstance(step, EffectStep) and isinstance(classic, EpisodeEffectOperator)
    assert (step.effect, step.effect_capability, step.effect_lookup, step.effect_per_map_index) == (
        "notify:slack",
        "lookup",
        look,
        False,
    )
    assert step.effect_inputs == {"channel": "{{ params.channel }}"}
    # The asset itself is no outlet (it would get an event on every successful try): its alias is.
    assert step.outlets == [Asset("other"), AssetAlias("idempotent_jobs:episode_events:episodes")]
    assert classic.outlets == [] and classic.effect == "publish" and classic.op_kwargs == {"a": 1}
    assert list(classic.template_fields) == ["episode_id", "store", "effect_inputs", "op_args", "op_kwargs"]
    assert "effect_inputs" in step.template_fields
    assert list(tmp_path.iterdir()) == []  # nothing created, no connection looked up
    from airflow.serialization.serialized_objects import DagSerialization

    again = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    assert [o.name for o in again.get_task("publish").outlets] == ["other", "idempotent_jobs:episode_events:episodes"]
    assert again.get_task("classic").task_type == "EpisodeEffectOperator"


@pytest.mark.parametrize(
    ("options", "function", "error", "message"),
    [
        ({}, publish, TypeError, r"publish\(\) takes 'effect_token', which only effect= passes"),
        ({"effect": "publish"}, plain, TypeError, r"plain\(\) must take a parameter named 'effect_token'"),
        ({"effect_capability": "lookup", "effect_lookup": look}, plain, TypeError, "need effect="),
        ({"effect_inputs": {"a": 1}}, plain, TypeError, "need effect="),
        ({"effect": "publish now"}, publish, ValueError, "publish: invalid effect name 'publish now'"),
        ({"effect": "publish", "effect_capability": "retry"}, publish, ValueError, "must be one of none, idempotent"),
        ({"effect": "publish", "effect_capability": "lookup"}, publish, TypeError, "effect_lookup .* only then"),
        ({"effect": "publish", "effect_lookup": look}, publish, TypeError, "effect_lookup .* only then"),
        ({"effect": "publish", "effect_per_map_index": "yes"}, publish, TypeError, "True or False"),
        ({"asset_event": "media://x"}, plain, TypeError, "asset_event must be an airflow.sdk.Asset, not str"),
        ({"asset_event": AssetAlias("a")}, plain, TypeError, "must be an airflow.sdk.Asset, not AssetAlias"),
        (
            {"asset_event": EPISODES, "outlets": [Asset(name="episodes", uri="media://example/episodes")]},
            plain,
            TypeError,
            "is both asset_event and in outlets: an outlet gets an event on every successful try",
        ),
    ],
)
def test_options_that_cannot_work_fail_when_the_dag_is_parsed(
    options: dict[str, Any], function: Any, error: type[Exception], message: str
) -> None:
    with DAG("defs_refused_effects", schedule=None, start_date=START), pytest.raises(error, match=message):
        task.episode(episode_id="2026-W32-0", **options)(function)()


def test_the_operator_needs_an_effect_and_supplies_episode_and_token_itself() -> None:
    with DAG("defs_refused_classic", schedule=None, start_date=START):
        with pytest.raises(TypeError, match="needs effect="):
            EpisodeEffectOperator(task_id="a", episode_id="2026-W32-0", effect=None, python_callable=publish)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="passes the effect's token itself"):
            EpisodeEffectOperator(
                task_id="b",
                episode_id="2026-W32-0",
                effect="publish",
                python_callable=publish,
                op_kwargs={"effect_token": "mine"},
            )
        with pytest.raises(TypeError, match=r"plain\(\) must take a parameter named 'effect_token'"):
            EpisodeEffectOperator(task_id="c", episode_id="2026-W32-0", effect="publish", python_callable=plain)


def test_an_asset_names_its_event_effect_or_its_digest_when_an_effect_name_cannot_hold_it() -> None:
    assert effect_name_for(EPISODES) == "asset_event:episodes"
    odd = effect_name_for(Asset(name="weekly episodes?", uri="media://x"))
    assert odd.startswith("asset_event:sha256-") and EFFECT_NAME_PATTERN.fullmatch(odd)
    assert odd == effect_name_for(Asset(name="weekly episodes?", uri="media://y")), "the name decides"
