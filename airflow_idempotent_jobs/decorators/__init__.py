"""TaskFlow decorators: ``@task.paid_generation`` and ``@task.episode``.

Airflow finds them through the provider info's ``task-decorators`` (``get_provider_info.py``);
``from airflow.sdk import task`` then makes ``@task.paid_generation(...)`` and ``@task.episode(...)``
available. They can also be imported from here.

Importing this module imports nothing else (not even Airflow): DAG files are parsed constantly.
Airflow's TaskFlow machinery and the operators load when a decorator is first used, which a DAG
file written with ``from airflow.sdk import task`` has already paid for (see
benchmarks/import_cost.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk.bases.decorator import TaskDecorator

__all__ = ["episode_task", "paid_generation_task"]


def paid_generation_task(python_callable: Callable[..., Any] | None = None, **kwargs: Any) -> TaskDecorator:
    """``@task.paid_generation``: the function returns the request; it is paid for at most once per episode.

    Takes `PaidGenerationOperator`'s parameters (``episode_id``, ``provider_conn_id``, ``store``,
    ``deferrable``, budgets, ...), except ``request``: that is what the function returns.
    """
    from .paid_generation import paid_generation_task as factory

    return factory(python_callable, **kwargs)


def episode_task(python_callable: Callable[..., Any] | None = None, **kwargs: Any) -> TaskDecorator:
    """``@task.episode``: run a step of an existing episode, which the function receives as ``episode``.

    Takes ``episode_id`` (templated), ``store``, ``store_conn_id``, ``lock_timeout`` and any
    operator argument.
    """
    from .episode import episode_task as factory

    return factory(python_callable, **kwargs)
