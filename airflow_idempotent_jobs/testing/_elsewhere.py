"""One ``submit`` in another process: the kit's proof that ``find`` does not answer from memory.

The ledger's retry runs in a fresh process. A lookup that remembers what its own process sent (on
the adapter object, on its class, in a module global, in an HTTP library's cache) says "no job"
there for the job a lost submit created, and the retry pays again; in one process it looks right.
So the kit has a job created by a process that then ends, and asks ``find`` in its own.

The factory the caller passes is usually a lambda over local objects, which cannot be pickled into
a fresh interpreter; a forked child inherits it instead, builds its own adapter, submits, sends back
what the call did, and exits, taking whatever the call wrote into memory with it. POSIX only
(``os.fork``): elsewhere the check says it could not run, and fails.
"""

from __future__ import annotations

import multiprocessing
import warnings
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

from ..paid.provider import PaidProvider
from ..paid.results import redactor
from ._calls import Outcome

__all__ = ["submit_elsewhere"]

#: How long a child that answered is given to exit before it is killed.
_EXIT_GRACE = 2.0


def submit_elsewhere(
    factory: Callable[[str], PaidProvider],
    base_url: str,
    request: Mapping[str, Any],
    token: str,
    timeout: float,
) -> str:
    """``factory(base_url).submit(request, token)`` in a forked child; what it did, as a report phrase.

    ``returned 'job-1'`` / ``raised ProviderOutcomeUnknown (...)``, or why the child said nothing.
    The child is killed if it has not answered within ``timeout`` seconds.
    """
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:
        return "could not run: this platform cannot fork a process (the check needs os.fork)"
    reader, writer = context.Pipe(duplex=False)
    child = context.Process(
        target=_submit, args=(factory, base_url, request, token, writer), name="conformance-elsewhere", daemon=True
    )
    with warnings.catch_warnings():
        # Python 3.12+ warns on any fork of a threaded process; the child only builds an adapter
        # and makes one call, bounded by ``timeout``.
        warnings.filterwarnings("ignore", ".*use of fork\\(\\) may lead to deadlocks", DeprecationWarning)
        child.start()
    writer.close()
    try:
        said: str | None = reader.recv() if reader.poll(timeout) else None
    except (EOFError, OSError):
        said = None
    finally:
        reader.close()
    child.join(_EXIT_GRACE if said is not None else 0)
    alive = child.is_alive()
    if alive:
        child.kill()
        child.join()
    if said is not None:
        return said
    if alive:
        return f"did not return within {timeout:g} s"
    return f"ended the child process (exit code {child.exitcode}) without an answer"


def _submit(
    factory: Callable[[str], PaidProvider],
    base_url: str,
    request: Mapping[str, Any],
    token: str,
    writer: Connection,
) -> None:
    """In the child: build, submit, send back what happened (redacted, as the report writes it)."""
    try:
        adapter = factory(base_url)
    except BaseException as exc:  # the caller's own: the parent reports it
        writer.send(f"could not run: factory({base_url!r}) {Outcome(error=exc).text(redactor(None))}")
        return
    try:
        outcome = Outcome(value=adapter.submit(request, token))
    except BaseException as exc:  # the adapter's own, whatever it is
        outcome = Outcome(error=exc)
    writer.send(outcome.text(redactor(adapter)))
    writer.close()
