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

    :param episode_id: templated id of an existing episode (e.g. ``"{{ ti.xcom_pull('allocate') }}"``).
    :param effect: the effect's name (``publish``, ``notify:slack``); on a mapped task ``[map_index]``
        is appended unless ``effect_per_map_index=False``.
    :param python_callable: the effect's body; also receives the context keys it names.
    :param op_args: templated positional arguments; ``op_kwargs``: templated keyword arguments.
    :param effect_capability: what the target does with a repeated token: ``"none"`` (default: an
        effect that may have happened waits for reconcile), ``"idempotent_key"`` (running again with the
        same token is harmless), ``"lookup"`` (``effect_lookup(token)`` returns `Happened` or None).
    :param effect_inputs: templated JSON value the effect acts on; by default the call's own arguments
        (``op_args``, ``op_kwargs``). A retry with other inputs is refused.
    :param asset_event: an ``airflow.sdk.Asset``: the episode's one event on it, emitted after the
        effect, through an alias (never on a later try or clear); its extra holds the episode id, week,
        cost, remote ref and each effect's result.
    :param store: templated store URL; ``store_conn_id``: a Connection naming the store.
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
