"""What every CLI command shares: exit codes, one-line errors, opening the store."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any, Final, NoReturn

from ..episode import is_negative_zero
from ..errors import IdempotentJobsError
from ..stores import EpisodeStore, open_store
from ._output import json_line

__all__ = ["EXIT", "CliError", "Parser", "exit_code_for", "open_cli_store", "print_json", "lock_timeout_seconds"]

#: The exit codes docs/design.md lists; each error class carries its own (``exit_code``).
EXIT: Final = {
    "ok": 0,
    "problems": 1,
    "usage": 2,
    "conflict": 3,
    "not_found": 4,
    "store": 5,
}


class CliError(Exception):
    """A usage problem found by a command itself (exit 2 unless said otherwise)."""

    def __init__(self, message: str, code: int = EXIT["usage"]) -> None:
        super().__init__(message)
        self.code = code


def exit_code_for(exc: IdempotentJobsError) -> int:
    """The exit code the error class declares (`IdempotentJobsError.exit_code`)."""
    return exc.exit_code


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit 2, not a usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT["usage"], f"{self.prog}: error: {message}\n")


def lock_timeout_seconds(text: str) -> float:
    """A finite number of seconds, 0 or more (0: try once), without a minus sign (``-0`` neither).

    Stores read the rest in ways of their own (the file store waits for ever on a negative or
    infinite timeout, NaN would never expire, PostgreSQL has no infinity): the command takes none.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a lock timeout is a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value < 0 or is_negative_zero(value):
        raise argparse.ArgumentTypeError(f"a lock timeout is a finite number of seconds >= 0, not {text!r}")
    return value


def open_cli_store(args: argparse.Namespace, **options: Any) -> EpisodeStore:
    url = args.store or os.environ.get("IDEMPOTENT_JOBS_STORE")
    if not url:
        raise CliError("no store given: pass --store PATH_OR_URL or set IDEMPOTENT_JOBS_STORE")
    if args.lock_timeout is not None:
        options.setdefault("lock_timeout", args.lock_timeout)
    return open_store(url, **options)


def print_json(data: Any) -> None:
    """One line of JSON; characters that are not printable are ``\\u`` escapes, never raw."""
    sys.stdout.write(json_line(data) + "\n")
