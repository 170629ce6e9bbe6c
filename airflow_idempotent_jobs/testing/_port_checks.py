"""The checks: every call of the port through every fault, judged against what the proxy saw.

Two judgments per check. Safety first, from the proxy's record (the truth): an adapter that says
"certainly not sent" (`ProviderUnavailable`) when the API got the paid call, "nothing created"
(`ProviderRejected`) when the API created the job, or "no job" (``find`` returning None) for a
token whose job exists, makes the ledger pay twice or lose a billed job. Then precision: the class
the fault calls for (`_verdicts`), so that the ledger neither waits for a reconcile it
does not need nor retries what it must not.
"""

from __future__ import annotations

import itertools
from typing import Any, Final

from ..paid.provider import PaidProvider, ProviderCapabilities, RemoteState, RemoteStatus
from ..paid.results import redactor, ref_problem
from ._calls import Outcome, call, class_names
from ._kit_base import Lost, new_token, nth
from ._lost_submit_checks import LookupChecks
from ._verdicts import (
    TRY_AGAIN,
    UNAVAILABLE,
    WHY_NO_JOB,
    WHY_READ,
    WHY_REFUSED,
    describe_routes,
    expected_read,
    expected_submit,
    same_status,
    unsafe_submit,
    why_read,
)
from .fault_proxy import Exchange, Fault, RouteMatcher, refusing_url

__all__ = ["Kit"]

#: Calls made on the API through the proxy in "status, repeated".
REPEATS: Final = 3
_RANK: Final = {RemoteState.PENDING: 0, RemoteState.RUNNING: 1, RemoteState.SUCCEEDED: 2, RemoteState.FAILED: 2}


class Kit(LookupChecks):
    """One run over one adapter; `run` appends a `CheckResult` per check to ``results``."""

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> None:
        adapter = self.build("factory")
        if adapter is None:
            return
        self.adapter_name = type(adapter).__name__
        self.redact = redactor(adapter)
        if not self.check_shape(adapter):
            return
        ref0 = self.clean_submit(adapter)
        if ref0 is None:
            return
        self.status_repeated(ref0)
        for fault in self.plan.submit:
            self.submit_fault(f"submit, paid call: {fault.description}", fault, self.paid)
        for index, exchange in enumerate(self.sequence):
            if not self.paid_request(exchange):
                for fault in self.plan.free:
                    name = f"submit, free call {exchange.route} (request {index + 1}): {fault.description}"
                    self.submit_fault(name, fault, nth(index))
        for fault in self.plan.status:
            self.status_fault(fault, ref0)
        lost = self.lost_submit_checks()
        self.refused_checks(ref0, lost)

    def check_shape(self, adapter: PaidProvider) -> bool:
        caps = getattr(adapter, "capabilities", None)
        missing = [m for m in ("submit", "status") if not callable(getattr(adapter, m, None))]
        if isinstance(caps, ProviderCapabilities) and caps.lookup and not callable(getattr(adapter, "find", None)):
            missing.append("find (it declares lookup)")
        if not isinstance(caps, ProviderCapabilities) or missing:
            why = f"missing {', '.join(missing)}" if missing else f"capabilities is {caps!r}, not ProviderCapabilities"
            self.fail("the PaidProvider port", why)
            return False
        self.caps = caps
        self.ok("the PaidProvider port", f"idempotent tokens: {caps.idempotent_tokens}, lookup: {caps.lookup}")
        return True

    def clean_submit(self, adapter: PaidProvider) -> str | None:
        name = "submit, no fault"
        token = new_token()
        outcome, exchanges, _ = self.through_proxy(None, None, adapter.submit, self.request, token)
        said = outcome.text(self.redact)
        if outcome.error is not None or outcome.timed_out:
            self.fail(name, f"{said}; nothing else can be checked (the sample request must be one the API accepts)")
            return None
        if ref_problem(outcome.value):
            self.fail(name, f"{said}: the ledger cannot keep that reference ({ref_problem(outcome.value)})")
            return None
        paid = [e for e in exchanges if self.paid_request(e)]
        if not exchanges:
            self.fail(name, f"{said} without a request through the proxy: does factory use the base_url it is given?")
            return None
        if len(paid) != 1:
            count = "no request" if not paid else f"{len(paid)} requests"
            self.fail(
                name,
                f"{said}, but sent {count} the kit counts as paid ({self.paid.describe()}) "
                f"among {describe_routes(exchanges)}: "
                "name the one request that creates the billable job with paid=[...]",
            )
            return None
        self.refs[token] = outcome.value
        self.sequence = exchanges
        marked = ", ".join(f"{e.route} -> {e.upstream_status}{' (paid)' if e in paid else ''}" for e in exchanges)
        self.ok(name, f"{said} after {marked}")
        return str(outcome.value)

    # -- submit under faults ---------------------------------------------------------------------
    def submit_fault(self, name: str, fault: Fault, when: RouteMatcher) -> None:
        adapter = self.build(name)
        if adapter is None:
            return
        token = new_token()
        outcome, exchanges, fired = self.through_proxy(fault, when, adapter.submit, self.request, token)
        problem = self.fault_problem(fault, outcome, exchanges, fired)
        if problem:
            self.fail(name, problem)
            return
        self.judge_submit(name, fault, outcome, exchanges, token)

    def judge_submit(self, name: str, fault: Fault, outcome: Outcome, exchanges: list[Exchange], token: str) -> None:
        said = outcome.text(self.redact)
        sent = [e for e in exchanges if self.paid_request(e) and e.forwarded]
        created = [e for e in sent if 200 <= (e.upstream_status or 0) < 300]
        faulted = next(e for e in exchanges if e.fault)
        expected, why = expected_submit(fault, faulted, exchanges, self.paid)
        unsafe = unsafe_submit(outcome, sent, created, self.caps)
        if unsafe:
            self.fail(name, f"{said}, expected {class_names(expected)}: UNSAFE: {unsafe}")
            return
        if outcome.error is None:
            self.judge_ref(name, outcome.value, token, said)
            return
        if isinstance(outcome.error, expected):
            self.ok(name, said)
        else:
            self.fail(name, f"{said}, expected {class_names(expected)}: {why}")

    def judge_ref(self, name: str, ref: Any, token: str, said: str) -> None:
        """A submit that returned despite its fault: fine if it recovered the job of its own token."""
        if ref_problem(ref):
            self.fail(name, f"{said}: the ledger cannot keep that reference ({ref_problem(ref)})")
            return
        theirs = [t for t, r in self.refs.items() if r == ref and t != token]
        if theirs:
            self.fail(name, f"{said}: UNSAFE: that is the job of another token (another run's job)")
            return
        adapter = self.build(name)
        if adapter is None:
            return
        check, _, _ = self.through_proxy(None, None, adapter.status, ref)
        if not isinstance(check.value, RemoteStatus):
            self.fail(name, f"{said}, but status({ref!r}) {check.text(self.redact)}: no such job")
            return
        self.refs[token] = ref
        self.ok(name, f"{said}: recovered (status finds the job: {check.value.state.value})")

    # -- status ----------------------------------------------------------------------------------
    def status_repeated(self, ref: str) -> None:
        name = f"status, {REPEATS} calls in a row"
        adapter = self.build(name)
        if adapter is None:
            return
        states: list[RemoteStatus] = []
        mark = self.proxy.mark()
        for attempt in range(1, REPEATS + 1):
            outcome = call(adapter.status, ref, timeout=self.call_timeout)
            if not isinstance(outcome.value, RemoteStatus):
                self.fail(name, f"call {attempt} {outcome.text(self.redact)}, expected a RemoteStatus")
                return
            states.append(outcome.value)
        words = ", ".join(s.state.value for s in states)
        paid = [e for e in self.proxy.exchanges(mark) if self.paid_request(e)]
        if paid:
            self.fail(name, f"status sent {paid[0].route}, a paid request: a read must never create a job")
            return
        for before, after in itertools.pairwise(states):
            if _RANK[after.state] < _RANK[before.state]:
                self.fail(name, f"the answers went {words}: a job's state never goes back")
                return
            if before.state.terminal and not same_status(before, after):
                self.fail(name, f"a finished job's answer changed between calls ({before} then {after})")
                return
        self.ok(name, words)

    def status_fault(self, fault: Fault, ref: str) -> None:
        name = f"status: {fault.description}"
        adapter = self.build(name)
        if adapter is None:
            return
        outcome, exchanges, fired = self.through_proxy(fault, None, adapter.status, ref)
        problem = self.fault_problem(fault, outcome, exchanges, fired)
        if problem:
            self.fail(name, problem)
            return
        said = outcome.text(self.redact)
        if outcome.error is None:
            if not isinstance(outcome.value, RemoteStatus):
                self.fail(name, f"{said}, not a RemoteStatus")
            elif any(e.delivered for e in exchanges):
                self.ok(name, f"{said}: recovered (a retry read the API's own answer)")
            else:
                self.fail(
                    name,
                    f"{said} although no answer of the API reached it: the {fault.name} fault became the job's state; "
                    f"expected {class_names(expected_read(fault))}: {why_read(expected_read(fault))}",
                )
            return
        expected = expected_read(fault)
        if isinstance(outcome.error, expected):
            self.ok(name, said)
        else:
            self.fail(name, f"{said}, expected {class_names(expected)}: {why_read(expected)}")

    # -- refused connections ---------------------------------------------------------------------
    def refused_checks(self, ref: str, lost: Lost | None) -> None:
        prefix = self.proxy.base_url[len(self.proxy.url) :]
        with refusing_url() as dead:
            adapter = self.build("connection refused", dead + prefix)
            if adapter is None:
                return
            outcome = call(adapter.submit, self.request, new_token(), timeout=self.call_timeout)
            self.judge_plain("submit, connection refused", outcome, UNAVAILABLE, WHY_REFUSED)
            outcome = call(adapter.status, ref, timeout=self.call_timeout)
            self.judge_plain("status, connection refused", outcome, TRY_AGAIN, WHY_READ)
            if self.caps.lookup and lost is not None:
                outcome = call(adapter.find, lost.token, timeout=self.call_timeout)
                if outcome.error is None and not outcome.timed_out:
                    self.fail("find, connection refused", f"{outcome.text(self.redact)}: UNSAFE: {WHY_NO_JOB}")
                else:
                    self.judge_plain("find, connection refused", outcome, TRY_AGAIN, WHY_READ)
