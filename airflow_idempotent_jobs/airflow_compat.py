"""What differs between the Airflow releases this package supports (3.1, 3.2 and 3.3), in one place.

Each function is the newest release's API, with the fallback for the older ones named beside it;
nothing else in the package branches on Airflow's version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import Connection

__all__ = [
    "aextra_dejson",
    "amask_secret",
    "determine_kwargs",
    "hook_class_name",
    "mask_secret",
    "plugin_frame_follows_paths",
]


def determine_kwargs(func: Callable[..., Any], args: Any, kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The keyword arguments ``func`` takes from the task context (``airflow.sdk.bases.decorator``
    from 3.2; ``airflow.utils.operator_helpers`` on 3.1)."""
    try:
        from airflow.sdk.bases.decorator import determine_kwargs as found
    except ImportError:  # Airflow 3.1
        from airflow.utils.operator_helpers import determine_kwargs as found  # type: ignore[attr-defined,no-redef,unused-ignore]
    return found(func, args, kwargs)  # type: ignore[no-any-return,unused-ignore]


def hook_class_name(conn_type: str) -> str | None:
    """The hook class a provider registered for ``conn_type``, or None (the task runtime's providers
    manager from 3.2; the core's ``ProvidersManager`` on 3.1)."""
    info: Any
    try:
        from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime
    except ImportError:  # Airflow 3.1
        from airflow.providers_manager import ProvidersManager

        info = ProvidersManager().hooks.get(conn_type)  # type: ignore[no-untyped-call,unused-ignore]
    else:
        info = ProvidersManagerTaskRuntime().hooks.get(conn_type)  # type: ignore[no-untyped-call,unused-ignore]
    return None if info is None else (info.hook_class_name or None)


async def aextra_dejson(conn: Connection) -> dict[str, Any]:
    """The Connection's extra as a dict without blocking the event loop (``aextra_dejson`` from 3.3,
    task SDK 1.3; before, the ``extra_dejson`` property, which parses the extra in memory)."""
    if hasattr(conn, "aextra_dejson"):
        return dict(await conn.aextra_dejson())
    return dict(conn.extra_dejson)


def mask_secret(value: str) -> None:
    """Register ``value`` with Airflow's secrets masker (this process and its supervisor)."""
    from airflow.sdk.log import mask_secret as register

    register(value)


async def amask_secret(value: str) -> None:
    """`mask_secret` from the triggerer's event loop (``amask_secret`` from 3.3; before, the blocking call)."""
    try:
        from airflow.sdk.log import amask_secret as register
    except ImportError:  # Airflow 3.1 and 3.2
        mask_secret(value)
        return
    await register(value)


def plugin_frame_follows_paths() -> bool:
    """Whether Airflow's UI frames a plugin page at any of its paths: ``/plugin/<route>/<path>`` shows
    ``/<path>`` inside Airflow (from 3.3; before, the route shows the view's ``href`` only)."""
    from importlib.metadata import version

    major, minor = (int(part) for part in version("apache-airflow-core").split(".")[:2])
    return (major, minor) >= (3, 3)
