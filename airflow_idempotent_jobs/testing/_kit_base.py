"""The kit's plumbing: building adapters, calling them through the armed proxy, and writing results.

`Kit` (`_port_checks`) runs the checks on top of it, `LookupChecks` (`_lost_submit_checks`) those on lost
submits; this module knows nothing of what any check expects.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..paid.provider import PaidProvider, ProviderCapabilities
from ..paid.results import clean_text, redactor
from ._calls import Outcome, call, class_names
from ._plan import FaultPlan, PaidRoutes
from ._report import CheckResult
from ._verdicts import Classes, describe_routes
from .fault_proxy import Exchange, Fault, FaultProxy, RouteMatcher

__all__ = ["KitBase", "Lost", "new_token", "nth"]


@dataclass(frozen=True)
class Lost:
    """A submit whose paid answer the proxy dropped after the API created the job."""

    token: str
    #: The API's answer to the lost call, which names the job.
    answer: str
    #: The job's reference, once ``find`` (or a recovering submit) named it.
    ref: str | None = None


def new_token() -> str:
    return f"conformance-{uuid.uuid4().hex}"


def nth(index: int) -> RouteMatcher:
    """Matches the ``index``-th request after arming (0 = the first)."""
    seen = itertools.count()
    return lambda method, path: next(seen) == index


class KitBase:
    """One run over one adapter: its state and the plumbing every check uses; results in ``results``."""

    def __init__(
        self,
        factory: Callable[[str], PaidProvider],
        proxy: FaultProxy,
        request: Mapping[str, Any],
        paid: PaidRoutes,
        plan: FaultPlan,
        call_timeout: float,
    ) -> None:
        self.factory, self.proxy, self.request, self.paid, self.plan = factory, proxy, request, paid, plan
        self.call_timeout = call_timeout
        self.results: list[CheckResult] = []
        self.caps = ProviderCapabilities()
        self.redact: Callable[[str], str] = redactor(None)
        #: token -> the reference a submit returned for it.
        self.refs: dict[str, str] = {}
        self.sequence: list[Exchange] = []
        self.adapter_name = "adapter"

    # -- plumbing --------------------------------------------------------------------------------
    def ok(self, name: str, detail: str) -> None:
        self.results.append(CheckResult(name, True, detail))

    def fail(self, name: str, detail: str) -> None:
        self.results.append(CheckResult(name, False, detail))

    def build(self, name: str, base_url: str | None = None) -> PaidProvider | None:
        base = self.proxy.base_url if base_url is None else base_url
        outcome = call(self.factory, base, timeout=self.call_timeout)
        if outcome.error is not None or outcome.timed_out:
            self.fail(name, f"factory({base!r}) {outcome.text(self.redact)}")
            return None
        adapter: PaidProvider = outcome.value
        return adapter

    def through_proxy(
        self, fault: Fault | None, when: RouteMatcher | None, fn: Callable[..., Any], *args: Any
    ) -> tuple[Outcome, list[Exchange], bool]:
        """``fn(*args)`` with ``fault`` armed; its outcome, the exchanges it caused, and whether the fault fired."""
        mark = self.proxy.mark()
        if fault is not None:
            self.proxy.arm(fault, when)
        outcome = call(fn, *args, timeout=self.call_timeout)
        unfired = self.proxy.disarm() is not None
        return outcome, self.proxy.exchanges(mark), fault is None or not unfired

    def quote(self, answer: str) -> str:
        """An API answer for the report: redacted, on one line, cut short."""
        return clean_text(" ".join(answer.split()), self.redact, 120)

    def paid_request(self, exchange: Exchange) -> bool:
        return self.paid(exchange.method, exchange.path)

    def fault_problem(self, fault: Fault, outcome: Outcome, exchanges: list[Exchange], fired: bool) -> str | None:
        """Why this check tested nothing (the fault never fired, the call hung, the API failed), or None."""
        said = outcome.text(self.redact)
        if not fired:
            return f"the fault never fired: the call made no such request ({describe_routes(exchanges)}); it {said}"
        if outcome.timed_out:
            return f"{said}: an adapter needs a read timeout, or a stuck API stalls the task forever"
        broken = [e for e in exchanges if e.upstream_error]
        if broken:
            return f"the API itself failed behind the proxy ({broken[0].route}: {broken[0].upstream_error})"
        held = [e for e in exchanges if e.fault and e.delivered and fault.action == "hold"]
        if held:
            return (
                f"{said} after waiting out the answer the proxy held for {self.proxy.hold_seconds:g} s: its read "
                "timeout is longer, or it has none (build it with a read timeout under hold_seconds)"
            )
        return None

    def judge_plain(self, name: str, outcome: Outcome, expected: Classes, why: str) -> None:
        said = outcome.text(self.redact)
        if outcome.error is not None and isinstance(outcome.error, expected):
            self.ok(name, said)
        else:
            self.fail(name, f"{said}, expected {class_names(expected)}: {why}")
