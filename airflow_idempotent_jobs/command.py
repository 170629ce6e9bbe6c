"""The ``idempotent-jobs`` command as installed: the CLI, plus the stores Airflow's configuration names.

`cli` sits below Airflow (it runs on any host with the package); this entry point gives it
``--store-conn-id`` and ``--airflow-store``, opened as the operators and the page open them
(`hooks.store.EpisodeStoreHook`), so a command the page prints never needs a password typed out.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .cli import main as cli_main

if TYPE_CHECKING:
    from .stores import EpisodeStore

__all__ = ["airflow_store", "main"]


def airflow_store(conn_id: str | None, lock_timeout: float | None) -> EpisodeStore:
    """The store Connection ``conn_id`` names, or with None the deployment's ``[idempotent_jobs]`` store.

    A Connection Airflow does not know is a usage error naming it (exit 2), not a bug. Airflow's own
    log lines (the hook's "Episode store from connection ...") stay out of the command's output:
    below WARNING they are off unless the environment sets Airflow's level, and they go to stderr.
    """
    from .cli._common import CliError

    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    try:
        from .hooks.store import EpisodeStoreHook
    except ImportError as exc:  # the package without a working Airflow
        raise CliError(f"--store-conn-id and --airflow-store need Airflow: {exc}") from None
    hook = EpisodeStoreHook(conn_id, lock_timeout=lock_timeout)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return hook.store
    except Exception as exc:
        if type(exc).__name__ != "AirflowNotFoundException":
            raise
        if conn_id is not None:
            raise CliError(f"--store-conn-id: Airflow has no connection {conn_id!r}") from None
        from .config import SECTION, setting

        named = f"[{SECTION}] store_conn_id names {setting('store_conn_id')!r}"
        raise CliError(f"--airflow-store: {named}: Airflow has no such connection") from None


def main(argv: Sequence[str] | None = None) -> int:
    """``idempotent-jobs``: `cli.main` with Airflow's stores."""
    return cli_main(argv, airflow_stores=airflow_store)
