"""What both operators share: store selection and the translation of our errors into Airflow's.

Kept free of heavy imports at module level: DAG files import the operators, and Airflow parses
DAG files constantly.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

try:
    from airflow.sdk.exceptions import AirflowFailException
except ImportError:  # Airflow < 3.2
    from airflow.exceptions import AirflowFailException  # type: ignore[attr-defined,no-redef,unused-ignore]

if TYPE_CHECKING:
    from ..stores import EpisodeStore

__all__ = ["AirflowFailException", "DEFAULT_STORE_DIRNAME", "default_store_path", "open_task_store", "task_errors"]

#: The embedded default store lives here, under ``$AIRFLOW_HOME``.
DEFAULT_STORE_DIRNAME = "idempotent_jobs"


def default_store_path() -> Path:
    """``$AIRFLOW_HOME/idempotent_jobs``; Airflow's own default home is ``~/airflow``."""
    home = os.environ.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow")
    return Path(home) / DEFAULT_STORE_DIRNAME


def open_task_store(store: str | None, store_conn_id: str | None, lock_timeout: float | None) -> EpisodeStore:
    """``store=`` (a URL) wins, then ``store_conn_id=``, else the file store under ``$AIRFLOW_HOME``."""
    from ..stores import open_store

    options = {} if lock_timeout is None else {"lock_timeout": lock_timeout}
    if store:
        return open_store(store, **options)
    if store_conn_id:
        from ..hooks.store import EpisodeStoreHook

        return EpisodeStoreHook(store_conn_id, lock_timeout=lock_timeout).store
    return open_store(default_store_path(), **options)


@contextmanager
def task_errors() -> Iterator[None]:
    """Translate this package's errors for Airflow inside the ``with`` body.

    An error a retry cannot fix (``retryable`` is false: a bad id, a conflict, a corrupt file, an
    unknown episode, an uncertain paid submission, a bad configuration) fails the task without
    retry; everything else, notably `StoreUnavailable` (lock timeout, database down), stays
    retryable. `AirflowFailException` passes through untouched.
    """
    from ..errors import IdempotentJobsError

    try:
        yield
    except IdempotentJobsError as exc:
        if not exc.retryable:
            raise AirflowFailException(str(exc)) from exc
        raise
