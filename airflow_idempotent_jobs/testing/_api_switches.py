"""What a local JSON API does on demand, and how it answers: shared by `server` and the example APIs.

The switches (`ApiSwitches`) change at run time through each server's ``POST /_admin/config``; a
server adds its own fields and the faults it knows in a subclass. `credential_echo` is the text a
careless API appends to its errors when ``echo_token`` is on (for redaction tests); `send_json`
writes one answer.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar
from urllib.parse import quote

__all__ = ["ApiSwitches", "credential_echo", "send_json"]


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


def send_json(handler: BaseHTTPRequestHandler, code: int, body: Any) -> None:
    """Answer ``body`` as JSON with ``code``; a client already gone only closes the connection."""
    raw = json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(raw)))
    handler.end_headers()
    try:
        handler.wfile.write(raw)
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True  # the client is gone (killed while we held the answer)
