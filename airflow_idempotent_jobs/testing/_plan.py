"""What the kit injects, where: the fault plan per kind of call, and which requests are paid."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ..errors import InvalidConfiguration
from .fault_proxy import Fault

__all__ = ["FaultPlan", "PaidRoutes"]

_NOT_FOUND_PAGE: Final = b"<html><body><h1>404 Not Found</h1></body></html>"
#: A 200 whose body is not the API's answer (a captive portal, a gateway's page): it proves nothing.
_UNREADABLE: Final = Fault.answer(200, b"<html><body><h1>Please sign in</h1></body></html>", "text/html")
#: JSON answers a wrong path, a gateway or another service behind the API's host gives: none is an
#: API's declared "no job", so a lookup that settles "no job" on one would pay twice after a lost submit.
_STRAY_JSON: Final = (
    Fault.answer(404, b'{"error": {"code": "not_found_route", "message": "no route matches this path"}}'),
    Fault.answer(404, b'{"detail": "Not Found"}'),
    Fault.answer(404, b'{"message": "no route"}'),
    Fault.answer(200, b"{}"),
    Fault.answer(200, b'{"data": null}'),
    Fault.answer(200, b'{"jobs": "x"}'),
)
#: Methods that never create anything; by default every other request of ``submit`` is paid.
_READS: Final = frozenset({"GET", "HEAD", "OPTIONS"})


def _answers(*statuses: int) -> tuple[Fault, ...]:
    return tuple(Fault.answer(status) for status in statuses)


@dataclass(frozen=True)
class FaultPlan:
    """The faults each kind of call meets, one check each. Replace a tuple to use your API's own bodies.

    An ``answer`` fault's expectation follows its status (`Fault.forwards`): 5xx, 408 and 409 may
    have been processed; 429 and any other 4xx were not; a 200 whose body is not the API's answer
    (`Fault.unreadable`) comes after the API processed the call and proves nothing about the job.
    """

    #: On the paid request of ``submit`` (the one that creates the billable job).
    submit: tuple[Fault, ...] = (
        Fault.drop(),
        Fault.reset(),
        Fault.hold(),
        *_answers(500, 502, 503, 408, 409, 429, 400, 401, 422),
        _UNREADABLE,
    )
    #: On each other request ``submit`` makes (an upload, a token exchange), one request at a time.
    free: tuple[Fault, ...] = (Fault.drop(), Fault.hold(), *_answers(503, 429, 422), _UNREADABLE)
    #: On the first request of ``status``.
    status: tuple[Fault, ...] = (
        Fault.drop(),
        Fault.reset(),
        Fault.hold(),
        *_answers(500, 503, 408, 429, 401, 404),
        _UNREADABLE,
    )
    #: On the first request of ``find`` (checked only when the adapter declares lookup), for the
    #: token of a job that exists: none of these answers is the API's declared "no job". Replace the
    #: JSON ones if your API's "no job" answer is one of them (then it cannot be told from a stray).
    find: tuple[Fault, ...] = (
        Fault.drop(),
        Fault.hold(),
        *_answers(500, 503, 408, 429, 401),
        Fault.answer(404, _NOT_FOUND_PAGE, "text/html"),
        _UNREADABLE,
        *_STRAY_JSON,
    )


@dataclass(frozen=True)
class PaidRoutes:
    """Which requests create a billable job: ``"POST /v1/batches"``, ``"/v1/jobs/*/start"`` (any method).

    Paths are matched without the query, as on the wire (with the API's prefix), ``*`` matching
    anything. Without any, every request of ``submit`` that is not a GET, HEAD or OPTIONS is paid.
    """

    patterns: tuple[tuple[str | None, str], ...] | None = None

    @classmethod
    def parse(cls, paid: Sequence[str] | None) -> PaidRoutes:
        if paid is None:
            return cls()
        if isinstance(paid, str) or not paid:
            raise InvalidConfiguration("conformance kit", "paid", 'must be a non-empty list such as ["POST /v1/jobs"]')
        patterns = []
        for entry in paid:
            words = entry.split() if isinstance(entry, str) else []
            method, path = (words[0].upper(), words[1]) if len(words) == 2 else (None, words[0] if words else "")
            if len(words) not in (1, 2) or not path.startswith("/") or (method is not None and not method.isalpha()):
                raise InvalidConfiguration("conformance kit", "paid", f'{entry!r} is not "METHOD /path" or "/path"')
            patterns.append((method, path))
        return cls(tuple(patterns))

    def __call__(self, method: str, path: str) -> bool:
        if self.patterns is None:
            return method.upper() not in _READS
        return any(
            (want is None or want == method.upper()) and fnmatch.fnmatchcase(path, pattern)
            for want, pattern in self.patterns
        )

    def describe(self) -> str:
        if self.patterns is None:
            return "by default, every request of submit but GET, HEAD and OPTIONS"
        return ", ".join(f"{method} {path}" if method else path for method, path in self.patterns)
