"""The ``idempotent-jobs`` command."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from ..errors import IdempotentJobsError
from ._common import CliError, Parser, exit_code_for, lock_timeout_seconds

__all__ = ["main"]

#: Modules under ``cli/`` that each add their commands with ``register(subparsers)``.
COMMAND_MODULES = ("episodes", "migrate", "reconcile")


def build_parser() -> Parser:
    parser = Parser(prog="idempotent-jobs", description="Exactly one job per scheduled invocation.")
    parser.add_argument("--store", help="store path, file:// or postgresql:// URL (default: $IDEMPOTENT_JOBS_STORE)")
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except CliError as exc:
        return _fail(str(exc), exc.code)
    except IdempotentJobsError as exc:
        return _fail(str(exc), exit_code_for(exc))
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"idempotent-jobs: error: {message}\n")
    return code
