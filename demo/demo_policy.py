"""The demos' Airflow cluster policy, as ``airflow_local_settings`` (``make demo``: in
``$AIRFLOW_HOME/config``; ``make demo-ui``: in a folder on every process's PYTHONPATH).

It leaves the example DAG's code untouched and changes two things at parse time, for the demo only:
no waiting between retries, and a crash of the ``allocate`` task right AFTER it allocated, on its
first try, in runs whose conf asks for it (``{"demo_crash_after_allocation": true}``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

DEMO_DAG = "weekly_media_pipeline"


def task_policy(task: Any) -> None:
    if task.dag_id != DEMO_DAG:
        return
    task.retry_delay = dt.timedelta(0)
    if task.task_id == "allocate":
        task.post_execute = crash_after_allocation


def crash_after_allocation(context: Any, result: Any = None) -> None:
    """Runs right after ``execute`` returned: the episode is allocated and committed by now."""
    conf = context["dag_run"].conf or {}
    if conf.get("demo_crash_after_allocation") and context["ti"].try_number == 1:
        raise RuntimeError("demo: the worker died right after allocating; Airflow will retry the task")
