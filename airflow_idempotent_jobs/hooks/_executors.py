"""Does Airflow's configured executor run tasks on several hosts? (Then a per-host store is wrong.)

``[core] executor`` in Airflow 3 is a comma-separated list, optionally per team (``;team=...``),
each entry a core name (``LocalExecutor``), a class path, or ``alias:name-or-path``. Only the
executors known to run every task on the scheduler's own host count as local; anything else,
including a custom class we cannot know, counts as distributed: the store must then be named.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["LOCAL_EXECUTORS", "configured_executors", "distributed_executors"]

#: Executors that run every task on one host. Airflow 3.3 has only LocalExecutor; the Airflow 2
#: SequentialExecutor and DebugExecutor were single-process too (and fail to load on Airflow 3).
LOCAL_EXECUTORS: Final = frozenset(
    {
        "LocalExecutor",
        "airflow.executors.local_executor.LocalExecutor",
        "SequentialExecutor",
        "airflow.executors.sequential_executor.SequentialExecutor",
        "DebugExecutor",
        "airflow.executors.debug_executor.DebugExecutor",
    }
)
#: Set by KubernetesExecutor in every task pod, whatever the pod's own configuration says.
K8S_POD_MARKER: Final = "AIRFLOW_IS_K8S_EXECUTOR_POD"


def configured_executors() -> str:
    """``[core] executor`` as configured; an unreadable value is reported as such (and is not local)."""
    from ..config import airflow_conf

    try:
        value = airflow_conf().get("core", "executor", fallback="")
    except Exception as exc:  # a broken config is not evidence of a single host
        return f"<unreadable: {type(exc).__name__}>"
    return value if isinstance(value, str) else ""


def distributed_executors(config: str, environ: dict[str, str] | None = None) -> list[str]:
    """The entries of ``config`` not known to be local (empty: every task runs on this host)."""
    env = os.environ if environ is None else environ
    found: list[str] = []
    if env.get(K8S_POD_MARKER, "").strip():
        found.append(f"KubernetesExecutor (this process runs in a task pod: {K8S_POD_MARKER} is set)")
    entries = [name.strip() for part in config.split(";") for name in _team_executors(part).split(",")]
    entries = [name for name in entries if name]
    if not entries:
        found.append(repr(config))  # no executor at all: nothing proves a single host
    for entry in entries:
        target = entry.split(":", 1)[1].strip() if ":" in entry else entry
        if target not in LOCAL_EXECUTORS:
            found.append(entry)
    return found


def _team_executors(part: str) -> str:
    """``team=A,B`` -> ``A,B``; a global list (no team, or ``=A,B``) stays as it is."""
    part = part.strip()
    if part.startswith("="):
        return part[1:]
    return part.split("=", 1)[1] if "=" in part else part
