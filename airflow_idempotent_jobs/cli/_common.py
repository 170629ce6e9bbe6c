"""What every CLI command shares: exit codes, one-line errors, opening the store."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn

from ..episode import is_negative_zero
from ..errors import IdempotentJobsError
from ..stores import EpisodeStore, open_store
from ..stores.url_parts import has_url_scheme
from ._output import json_line

__all__ = [
    "EXIT",
    "AirflowStores",
    "CliError",
    "Parser",
    "exit_code_for",
    "hide_urls",
    "lock_timeout_seconds",
    "open_cli_store",
    "print_json",
]

#: Opens the store an Airflow Connection names (a connection id), or the deployment's (None), with a
#: lock timeout (None: the store's default). The installed command passes Airflow's (`command`).
AirflowStores = Callable[[str | None, float | None], EpisodeStore]

#: Where ``--store-conn-id`` and ``--airflow-store`` work.
INSTALLED: Final = "run the installed idempotent-jobs command"

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


#: Said instead of an argument that is a URL: it may hold a password.
URL_NOT_REPEATED: Final = "(a URL: not repeated)"


def hide_urls(message: str, given: Sequence[str]) -> str:
    """``message`` without any argument of ``given`` that is a URL able to hold a secret (an ``@``
    or an option named like ``password``), quoted or not: ``--store`` forgotten, or an option
    misspelt, puts one where argparse or an id check repeats it."""
    for arg in given:
        value = arg.partition("=")[2] if arg.startswith("-") and "=" in arg else arg
        if has_url_scheme(value) and ("@" in value or "password" in value.lower()):
            for form in (repr(arg), arg, repr(value), value):  # longest first: each holds the next
                message = message.replace(form, URL_NOT_REPEATED)
    return message


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit 2, not a usage block."""

    #: The arguments this parser was given (a subcommand's parser gets its own), for `hide_urls`.
    given: Sequence[str] = ()

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self.given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT["usage"], f"{self.prog}: error: {hide_urls(message, self.given)}\n")


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


def open_cli_store(args: argparse.Namespace) -> EpisodeStore:
    """The store ``--store`` (or $IDEMPOTENT_JOBS_STORE), ``--store-conn-id`` or ``--airflow-store`` names."""
    if args.store_conn_id is not None or args.airflow_store:
        opener: AirflowStores | None = getattr(args, "airflow_stores", None)
        if opener is None:
            raise CliError(f"--store-conn-id and --airflow-store need Airflow: {INSTALLED}")
        conn_id = args.store_conn_id
        if conn_id is not None and not conn_id.strip():
            raise CliError("--store-conn-id: an empty connection id")
        return opener(conn_id, args.lock_timeout)
    url = args.store or os.environ.get("IDEMPOTENT_JOBS_STORE")
    if not url:
        raise CliError(
            "no store given: pass --store PATH_OR_URL, --store-conn-id CONN_ID or --airflow-store, "
            "or set IDEMPOTENT_JOBS_STORE"
        )
    options = {} if args.lock_timeout is None else {"lock_timeout": args.lock_timeout}
    return open_store(url, **options)


def print_json(data: Any) -> None:
    """One line of JSON; characters that are not printable are ``\\u`` escapes, never raw."""
    sys.stdout.write(json_line(data) + "\n")
