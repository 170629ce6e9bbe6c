"""The ``idempotent-jobs`` command."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Final

from ..errors import IdempotentJobsError
from ._common import EXIT, AirflowStores, CliError, Parser, exit_code_for, hide_urls, lock_timeout_seconds
from ._output import OutputFailed, guarded_streams, visible

__all__ = ["main"]

#: Modules under ``cli/`` that each add their commands with ``register(subparsers)``.
COMMAND_MODULES = ("episodes", "approval", "migrate", "reconcile", "report")
#: Set to print the traceback of an internal error (a bug) before its one-line report.
TRACEBACK_ENV: Final = "IDEMPOTENT_JOBS_TRACEBACK"


def build_parser() -> Parser:
    parser = Parser(prog="idempotent-jobs", description="Exactly one job per scheduled invocation.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--store", help="store path, file:// or postgresql:// URL (default: $IDEMPOTENT_JOBS_STORE)")
    where.add_argument(
        "--store-conn-id",
        metavar="CONN_ID",
        help="the store an Airflow Connection names (idempotent_jobs_store or postgres), read with this "
        "host's Airflow configuration and secrets backends",
    )
    where.add_argument(
        "--airflow-store",
        action="store_true",
        help="the store the deployment's operators and page use: [idempotent_jobs] store or store_conn_id, "
        "else the file store under $AIRFLOW_HOME",
    )
    parser.add_argument(
        "--lock-timeout",
        type=lock_timeout_seconds,
        metavar="SECONDS",
        help="seconds to wait for the store lock (default 30)",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(commands)
    return parser


def main(argv: Sequence[str] | None = None, *, airflow_stores: AirflowStores | None = None) -> int:
    """Run one command; every failure ends as one stderr line and its exit code, never a traceback.

    ``airflow_stores`` opens the stores ``--store-conn-id`` and ``--airflow-store`` name (the
    installed command passes Airflow's, `airflow_idempotent_jobs.command`); without it they are refused.
    """
    with guarded_streams():
        code = _run(argv, airflow_stores)
        try:
            sys.stdout.flush()  # a full disk or a closed pipe shows here, while we can still say so
        except OutputFailed as exc:
            code = _fail(str(exc), EXIT["store"])
        sys.stderr.flush()
        return code


def _run(argv: Sequence[str] | None, airflow_stores: AirflowStores | None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        args.airflow_stores = airflow_stores
        code: int = args.func(args)
        return code
    except SystemExit as exc:  # argparse: --help (0) or a usage error it already reported (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT["usage"])
    except OutputFailed as exc:
        return _fail(hide_urls(str(exc), given), EXIT["store"])
    except CliError as exc:
        return _fail(hide_urls(str(exc), given), exc.code)
    except IdempotentJobsError as exc:
        return _fail(hide_urls(str(exc), given), exit_code_for(exc))
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except OSError as exc:  # the file system refused something no layer below translated
        where = f" ({exc.filename})" if exc.filename else ""
        return _fail(f"{exc.strerror or exc}{where}", EXIT["store"])
    except Exception as exc:  # a bug; exit 5 keeps it apart from 1 (check found problems) and 2
        if os.environ.get(TRACEBACK_ENV):
            traceback.print_exc()
        message = f"internal error: {type(exc).__name__}: {exc} (set {TRACEBACK_ENV}=1 for the traceback)"
        return _fail(hide_urls(message, given), EXIT["store"])


def _fail(message: str, code: int) -> int:
    """One line on stderr, whatever the message holds (its newlines and controls are escaped)."""
    sys.stderr.write(f"idempotent-jobs: error: {visible(message)}\n")
    return code
