"""``@task.episode``: a step of an existing episode (reassembly, publishing, notification).

Order (docs/design.md, as for `PaidGenerationOperator`): validate the episode id, open the store,
load the episode, close the store, and only then run the user's function with the `Episode` as its
``episode`` argument. A malformed, empty or unknown id fails the task without retry before the
function runs; a malformed or empty one before the store (or its connection) is even opened.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

from airflow.sdk.bases.decorator import DecoratedOperator, determine_kwargs, task_decorator_factory
from airflow.sdk.definitions.context import context_merge

from ..links.episode import EpisodeLink
from ..operators._common import StoreOperator, checked_episode_id, task_errors

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.bases.decorator import TaskDecorator

    from ..episode import Episode

__all__ = ["EPISODE_PARAMETER", "episode_task"]

#: The parameter of the user's function that receives the loaded `Episode`.
EPISODE_PARAMETER: Final = "episode"


class _EpisodeStep(StoreOperator):
    """Loads the episode ``episode_id`` names, then runs `_run` with it; the store is closed by then."""

    template_fields: Sequence[str] = ("episode_id", "store")
    #: "Episode" on the task instance opens this episode in the Idempotent Jobs page.
    operator_extra_links = (EpisodeLink(),)

    def __init__(
        self,
        *,
        episode_id: str | None,
        store: str | None = None,
        store_conn_id: str | None = None,
        lock_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.episode_id = episode_id
        self.store = store
        self.store_conn_id = store_conn_id
        self.lock_timeout = lock_timeout

    def execute(self, context: Context) -> Any:
        eid = checked_episode_id(self.task_id, self.episode_id)
        with task_errors():  # EpisodeNotFound, StoreCorrupted: no retry; StoreUnavailable: retried
            store = self.hook.store
            try:
                episode = store.get(eid)
            finally:
                store.close()
        self.log.info("Episode %s loaded (submission %s)", eid, episode.submission.state.value)
        return self._run(context, episode)

    def _run(self, context: Context, episode: Episode) -> Any:
        raise NotImplementedError


class _EpisodeDecoratedOperator(DecoratedOperator, _EpisodeStep):
    """Runs the user's function with the loaded `Episode` as ``episode``; returns what it returns."""

    template_fields: Sequence[str] = (*DecoratedOperator.template_fields, *_EpisodeStep.template_fields)
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
        _check_episode_parameter(python_callable, op_kwargs)
        # The function's ``episode`` is supplied at run time: a placeholder lets Airflow's signature
        # check pass now (as it does for context keys); it is gone again before anything renders it.
        super().__init__(
            python_callable=python_callable,
            op_args=op_args,
            op_kwargs={**(op_kwargs or {}), EPISODE_PARAMETER: None},
            **kwargs,
        )
        self.op_kwargs = {k: v for k, v in self.op_kwargs.items() if k != EPISODE_PARAMETER}

    def _run(self, context: Context, episode: Episode) -> Any:
        context_merge(context, self.op_kwargs)
        kwargs = dict(determine_kwargs(self.python_callable, self.op_args, context))
        kwargs[EPISODE_PARAMETER] = episode
        return self.python_callable(*self.op_args, **kwargs)


def _check_episode_parameter(python_callable: Callable[..., Any], op_kwargs: Mapping[str, Any] | None) -> None:
    """The function must take ``episode`` (by name or through ``**kwargs``); the caller must not pass it."""
    name = getattr(python_callable, "__name__", repr(python_callable))
    parameters = inspect.signature(python_callable).parameters
    takes = parameters.get(EPISODE_PARAMETER)
    wildcard = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if takes is None and not wildcard:
        raise TypeError(f"@task.episode function {name}() must take a parameter named {EPISODE_PARAMETER!r}")
    if takes is not None and takes.kind is inspect.Parameter.POSITIONAL_ONLY:
        raise TypeError(f"@task.episode function {name}(): {EPISODE_PARAMETER!r} must not be positional-only")
    if op_kwargs and EPISODE_PARAMETER in op_kwargs:
        raise TypeError(
            f"{name}() got {EPISODE_PARAMETER!r}: @task.episode passes the loaded episode itself; "
            "name the episode with episode_id= on the decorator"
        )


def episode_task(python_callable: Callable[..., Any] | None = None, **kwargs: Any) -> TaskDecorator:
    """``@task.episode(episode_id=..., store=...)`` (see the module docstring)."""
    return task_decorator_factory(
        python_callable=python_callable,
        decorated_operator_class=_EpisodeDecoratedOperator,
        **kwargs,
    )
