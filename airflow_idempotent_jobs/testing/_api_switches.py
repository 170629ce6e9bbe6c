"""What a local JSON API does on demand, and how it answers: shared by `server` and the example APIs.

The switches (`ApiSwitches`) change at run time through each server's ``POST /_admin/config``; a
server adds its own fields and the faults it knows in a subclass. `credential_echo` is the text a
careless API appends to its errors when ``echo_token`` is on (for redaction tests); `json_answer`,
`hold` and `drop_connection` are how a server's Starlette app answers, late, or not at all.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

__all__ = ["ApiSwitches", "credential_echo", "drop_connection", "hold", "json_answer", "with_drops"]

#: Where `with_drops` leaves uvicorn's own ``send`` in a request's scope.
_RAW_SEND: Final = "airflow_idempotent_jobs.raw_send"
#: How often a held answer looks whether its server is stopping.
_HOLD_TICK: Final = 0.05


@dataclass
class ApiSwitches:
    """Switches every local API has; all can change at run time (``POST /_admin/config``)."""

    #: The faults a ``*fault`` field accepts (each server names its own).
    faults: ClassVar[frozenset[str]] = frozenset()

    #: Offer the lookup of jobs by token (capability (b)); off, it answers 501.
    lookup: bool = True
    polls_to_finish: int = 2
    seconds_to_finish: float | None = None
    price: float = 1.25
    #: Fault for the next ``fault_times`` paid calls (-1: all of them).
    fault: str | None = None
    fault_times: int = 1
    slow_seconds: float = 5.0
    #: The next status calls answer these HTTP codes, one per call (nothing changes on the job).
    status_errors: list[int] = dataclasses.field(default_factory=list)
    #: The same for lookups by token.
    lookup_errors: list[int] = dataclasses.field(default_factory=list)
    #: Repeat the request's credential in every error answer, as careless APIs do (redaction tests).
    echo_token: bool = False

    def update(self, changes: dict[str, Any]) -> None:
        """Apply ``changes``, or none of them: ValueError for an unknown field or fault."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}")
        self.check(changes)
        for name, value in changes.items():
            setattr(self, name, list(value) if isinstance(value, list) else value)  # never the caller's list

    def check(self, changes: dict[str, Any]) -> None:
        """Raise ValueError for a value this server does not know; subclasses check their own fields too."""
        for name, value in changes.items():
            if name.endswith("fault") and value is not None and value not in self.faults:
                raise ValueError(f"unknown {name} {value!r} (one of {sorted(self.faults)})")

    def take_fault(self, name: str = "fault") -> str | None:
        """The fault the next call draws (and one fewer left), from the fields ``name``/``name_times``."""
        fault = getattr(self, name)
        times = getattr(self, f"{name}_times")
        if fault is None or times == 0:
            return None
        if times > 0:
            setattr(self, f"{name}_times", times - 1)
        return str(fault)


def credential_echo(authorization: str) -> str:
    """The credential of an ``Authorization`` header value in every form an API might echo it."""
    bare = authorization.split(" ", 1)[1] if " " in authorization else authorization
    encoded = base64.b64encode(bare.encode()).decode()
    return (
        f" (token {bare} is not valid; url {quote(bare, safe='')}; b64 {encoded}; "
        f"json {json.dumps(bare)[1:-1]}; header Authorization: {authorization})"
    )


def json_answer(code: int, body: Any) -> Response:
    """``body`` as JSON with ``code`` (``json.dumps`` as it is: ASCII, its default separators)."""
    return Response(json.dumps(body).encode(), status_code=code, media_type="application/json")


async def hold(stopping: threading.Event, seconds: float) -> None:
    """Wait ``seconds`` without holding a thread, or less once the server is stopping."""
    deadline = time.monotonic() + seconds
    while not stopping.is_set() and (remaining := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(remaining, _HOLD_TICK))


def with_drops(app: Any) -> Any:
    """Wrap an ASGI app so that its endpoints may `drop_connection` (uvicorn's ``send`` kept in the scope)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[_RAW_SEND] = send
        await app(scope, receive, send)

    return wrapped


async def drop_connection(request: Request) -> None:
    """Close the client's connection without an answer (a lost answer: the job already exists).

    ASGI has no message for "close without answering" (an app that sends nothing gets a 500 from
    the server), so this aborts uvicorn's transport for the connection (a plain close, FIN: nothing
    unread is left), as its h11 protocol closes it when an app fails half-way through an answer.
    Once uvicorn has seen the connection lost, whatever the endpoint answers goes nowhere.
    """
    transport = getattr(getattr(request.scope.get(_RAW_SEND), "__self__", None), "transport", None)
    if transport is None:
        raise RuntimeError("drop_connection needs the app wrapped by with_drops and served by uvicorn's h11")
    transport.abort()
    await asyncio.sleep(0)  # uvicorn's connection_lost runs: the request's later sends are no-ops
