"""The conformance kit: run a `PaidProvider` adapter through the faults that decide whether it pays twice.

The ledger's promise rests on each adapter telling failures apart honestly (`paid.provider`):
refused means nothing was created, outcome unknown means a job may exist, unavailable means the
request certainly never left. `check_adapter` starts a `FaultProxy` on 127.0.0.1 in front of the
API, builds the adapter for the proxy's URL with the caller's ``factory`` and, one fault at a time,
checks:

* ``submit``, on the paid request: a connection closed or reset after the API got it, an answer
  held past the read timeout, 5xx, 408 and 409 after the API got it, and a 200 whose body is not
  the API's answer must be `ProviderOutcomeUnknown`; 429 `ProviderUnavailable`; another 4xx
  `ProviderRejected`;
* ``submit``, on each free request before it (an upload): nothing paid was sent, so
  `ProviderUnavailable` (or `ProviderRejected` for a 4xx), or a recovered job;
* ``status``: three calls in a row agree and create nothing; under a fault it raises "try again"
  (`ProviderUnavailable`/`ProviderOutcomeUnknown`) or, for a 4xx, a `ProviderError`, and never
  turns a fault into a job state;
* ``find`` (when the adapter declares lookup): None for a token never used, the job of a lost
  submit for its token, also when another process made that submit and ended (a forked child:
  the ledger's retry runs in a fresh process, so a lookup that answers from its own process's
  memory pays twice), and never None under a fault: an unreadable 200, or a JSON 404 or 200 that
  is not the API's declared "no job" (a wrong path, a gateway, another service behind the host);
* resubmitting a lost submit's token returns its job, also when the lost submit was another
  process's (when the adapter declares idempotent tokens);
* a refused connection: ``submit`` `ProviderUnavailable`, ``status`` and ``find`` "try again".

Every claim is also checked against what the proxy saw: `ProviderUnavailable` after the API got
the paid call, `ProviderRejected` after it created the job, or a second paid call without
idempotent tokens is reported as UNSAFE. Importable without Airflow.

Which request is paid is the caller's to say (``paid=["POST /v1/batches"]``); by default every
request of ``submit`` that is not a GET, HEAD or OPTIONS is, and a fault-free ``submit`` must send
exactly one. The free requests are the others of that fault-free ``submit``, faulted by position
(the first, the second, ...). What each fault answers is a `FaultPlan`, one tuple of `Fault` per
kind of call, so a 5xx on ``status`` is judged as "try again" and on the paid call as "maybe
created". The factory must accept a plain ``http://127.0.0.1:<port>[/prefix]`` base URL, and its
adapter's read timeout must be below ``hold_seconds``. For the checks across processes it is also
called in a forked child (POSIX only; `_elsewhere`), so it must build its own connections.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from ..errors import InvalidConfiguration
from ..paid.provider import PaidProvider
from ._plan import FaultPlan, PaidRoutes
from ._port_checks import Kit
from ._report import CheckResult, ConformanceReport
from .fault_proxy import Fault, FaultProxy

__all__ = ["CheckResult", "ConformanceReport", "Fault", "FaultPlan", "assert_conformant", "check_adapter"]

_WHAT: Final = "conformance kit"


def check_adapter(
    factory: Callable[[str], PaidProvider],
    *,
    api_url: str,
    request: Mapping[str, Any],
    paid: Sequence[str] | None = None,
    plan: FaultPlan | None = None,
    hold_seconds: float = 5.0,
    call_timeout: float = 60.0,
) -> ConformanceReport:
    """Run the adapter ``factory(base_url)`` builds through every fault; the report says what passed.

    ``api_url``: where the API really is (a local server shaped like it, or a sandbox); the kit
    gives ``factory`` its own URL instead, with the same path prefix, and builds a fresh adapter
    per check. ``request``: a sample request the API accepts (every check submits it, with a new
    token each time, so it creates a few jobs). ``paid``: the requests that create a billable job,
    as ``"METHOD /path"`` (``*`` matches anything); default: every request of ``submit`` that is
    not a GET, HEAD or OPTIONS, so name it when ``submit`` makes more than one such call (an
    upload, then the paid call). ``plan``: the faults, with your API's own error bodies if it
    needs them. ``hold_seconds``: how long a held answer is withheld; the adapter's read timeout
    must be shorter. ``call_timeout``: how long one call may take before the check fails.
    """
    routes = PaidRoutes.parse(paid)
    _check_options(api_url, request, hold_seconds, call_timeout)
    started = time.monotonic()
    with FaultProxy(api_url, hold_seconds=hold_seconds) as proxy:
        kit = Kit(factory, proxy, request, routes, plan or FaultPlan(), call_timeout)
        kit.run()
    return ConformanceReport(
        adapter=kit.adapter_name,
        api_url=api_url,
        paid=routes.describe(),
        checks=tuple(kit.results),
        seconds=time.monotonic() - started,
    )


def _check_options(api_url: object, request: object, hold_seconds: object, call_timeout: object) -> None:
    """Bad usage is one clear line before anything is started or sent."""
    parts = urlsplit(api_url) if isinstance(api_url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise InvalidConfiguration(_WHAT, "api_url", "must be http(s)://host[:port][/prefix]")
    if not isinstance(request, Mapping):
        raise InvalidConfiguration(_WHAT, "request", "must be a mapping (the sample request the API accepts)")
    for name, value in (("hold_seconds", hold_seconds), ("call_timeout", call_timeout)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
            raise InvalidConfiguration(_WHAT, name, "must be a number of seconds above 0, at most 3600")


def assert_conformant(
    factory: Callable[[str], PaidProvider],
    **options: Any,
) -> ConformanceReport:
    """`check_adapter`, raising `AssertionError` with the whole report when a check failed (for pytest)."""
    report = check_adapter(factory, **options)
    if not report.ok:
        raise AssertionError(str(report))
    return report
