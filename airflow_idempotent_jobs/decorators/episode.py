"""``@task.episode``: a step of an existing episode (reassembly, publishing, notification).

Order (docs/design.md, as for `PaidGenerationOperator`): validate the episode id, open the store,
load the episode, and only then run the user's function with the `Episode` as its ``episode``
argument. A malformed, empty or unknown id fails the task without retry before the function runs;
a malformed or empty one before the store (or its connection) is even opened.

With ``effect="publish"`` the function runs at most once per episode and effect name (``publish[i]``
per map index), through the effects ledger: it also gets ``effect_token``, its return value is
recorded, and a retry or a clear of a done effect returns the recorded result without running it.
With ``asset_event=Asset(...)`` the episode's one event on that asset is emitted after it. Both are
`EffectStep`'s (operators/_effect_step.py), shared with `EpisodeEffectOperator`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk.bases.decorator import DecoratedOperator, task_decorator_factory

from ..operators._effect_step import EFFECT_TOKEN_PARAMETER, EPISODE_PARAMETER, EffectStep, check_parameters

if TYPE_CHECKING:
    from airflow.sdk.bases.decorator import TaskDecorator

__all__ = ["EFFECT_TOKEN_PARAMETER", "EPISODE_PARAMETER", "episode_task"]


class _EpisodeDecoratedOperator(DecoratedOperator, EffectStep):
    """Runs the user's function with the loaded `Episode` as ``episode``; returns what it returns
    (with ``effect=``: the effect's recorded result)."""

    template_fields: Sequence[str] = (*DecoratedOperator.template_fields, *EffectStep.template_fields)
    template_fields_renderers: ClassVar[dict[str, str]] = dict(DecoratedOperator.template_fields_renderers)
    custom_operator_name: str = "@task.episode"
    ui_color = "#e8f0fd"

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        effect = kwargs.get("effect") is not None
        check_parameters(python_callable, op_kwargs, effect=effect, kind="@task.episode")
        # ``episode`` and ``effect_token`` are supplied at run time: placeholders let Airflow's
        # signature check pass now (as it does for context keys); they are gone again before anything
        # renders them.
        supplied = (EPISODE_PARAMETER, EFFECT_TOKEN_PARAMETER) if effect else (EPISODE_PARAMETER,)
        super().__init__(
            python_callable=python_callable,
            op_args=op_args,
            op_kwargs={**(op_kwargs or {}), **dict.fromkeys(supplied)},
            **kwargs,
        )
        self.op_kwargs = {k: v for k, v in self.op_kwargs.items() if k not in supplied}


def episode_task(python_callable: Callable[..., Any] | None = None, **kwargs: Any) -> TaskDecorator:
    """``@task.episode(episode_id=..., store=..., effect=..., asset_event=...)`` (see the module docstring)."""
    return task_decorator_factory(
        python_callable=python_callable,
        decorated_operator_class=_EpisodeDecoratedOperator,
        **kwargs,
    )
