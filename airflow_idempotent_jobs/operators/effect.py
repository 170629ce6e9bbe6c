"""`EpisodeEffectOperator`: an effect of an existing episode (publish, upload, notify), at most once.

The classic-DAG form of ``@task.episode(effect=...)``: the same steps (`EffectStep`, in
operators/_effect_step.py), with the function given as ``python_callable`` and its arguments as
``op_args``/``op_kwargs``, as for ``PythonOperator``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, ClassVar

from ._effect_step import EffectStep, check_parameters

__all__ = ["EpisodeEffectOperator"]


class EpisodeEffectOperator(EffectStep):
    """Run ``python_callable(episode=..., effect_token=..., **op_kwargs)`` at most once per episode and effect.

    Its return value is recorded as the effect's result and returned (the XCom); a retry or clear of a
    done effect returns the recorded result without calling it. A call whose inputs differ from the
    recorded ones fails without retry; one that raised leaves the effect ``unknown``, which a retry
    settles by ``effect_capability``, or (``"none"``) only ``idempotent-jobs reconcile ID --effect NAME``.

    :param effect: the effect's name (``publish``, ``notify:slack``); on a mapped task ``[map_index]``
        is appended unless ``effect_per_map_index=False``.
    :param python_callable: the effect's body; also receives the context keys it names.
    :param op_args: templated positional arguments of ``python_callable``.
    :param op_kwargs: templated keyword arguments of ``python_callable``.
    """

    template_fields: Sequence[str] = ("episode_id", "store", "effect_inputs", "op_args", "op_kwargs")
    template_fields_renderers: ClassVar[dict[str, str]] = {"op_args": "py", "op_kwargs": "py"}
    ui_color = "#e8f0fd"

    def __init__(
        self,
        *,
        episode_id: str | None,
        effect: str,
        python_callable: Callable[..., Any],
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not callable(python_callable):
            raise TypeError(f"{kwargs.get('task_id', '?')}: python_callable must be callable")
        if effect is None:
            raise TypeError(f"{kwargs.get('task_id', '?')}: EpisodeEffectOperator needs effect= (its name)")
        check_parameters(python_callable, op_kwargs, effect=True, kind="EpisodeEffectOperator")
        super().__init__(episode_id=episode_id, effect=effect, **kwargs)
        self.python_callable = python_callable
        self.op_args = list(op_args or [])
        self.op_kwargs = dict(op_kwargs or {})
