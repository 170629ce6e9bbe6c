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
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..paid.provider import (
    PaidProvider,
    ProviderCapabilities,
    RemoteState,
    RemoteStatus,
)
from ..paid.results import clean_text, redactor, ref_problem
from ._calls import Outcome, call, class_names
from ._plan import FaultPlan, PaidRoutes
from ._report import CheckResult
from ._verdicts import (
    TRY_AGAIN,
    UNAVAILABLE,
    WHY_NO_JOB,
    WHY_READ,
    WHY_REFUSED,
    Classes,
    describe_routes,
    expected_read,
    expected_submit,
    same_status,
    unsafe_submit,
    why_read,
)
from .fault_proxy import Exchange, Fault, FaultProxy, RouteMatcher, refusing_url

__all__ = ["Kit"]

#: Calls made on the API through the proxy in "status, repeated".
REPEATS: Final = 3
_RANK: Final = {RemoteState.PENDING: 0, RemoteState.RUNNING: 1, RemoteState.SUCCEEDED: 2, RemoteState.FAILED: 2}


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


def _nth(index: int) -> RouteMatcher:
    """Matches the ``index``-th request after arming (0 = the first)."""
    seen = itertools.count()
    return lambda method, path: next(seen) == index


class Kit:
    """One run over one adapter; `run` appends a `CheckResult` per check to ``results``."""

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
                    self.submit_fault(name, fault, _nth(index))
        for fault in self.plan.status:
            self.status_fault(fault, ref0)
        lost = self.lost_submit()
        if lost is not None and self.caps.lookup:
            lost = self.find_checks(lost)
        if lost is not None and self.caps.idempotent_tokens:
            self.resubmit_check(lost)
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

    # -- find and resubmission -------------------------------------------------------------------
    def lost_submit(self) -> Lost | None:
        """A job the API created for a submit whose answer the proxy dropped (for find and resubmit)."""
        if not (self.caps.lookup or self.caps.idempotent_tokens):
            return None
        name = "a lost submit (for find and resubmission)"
        adapter = self.build(name)
        if adapter is None:
            return None
        token = new_token()
        outcome, exchanges, fired = self.through_proxy(Fault.drop(), self.paid, adapter.submit, self.request, token)
        dropped = [e for e in exchanges if e.fault and e.forwarded and 200 <= (e.upstream_status or 0) < 300]
        if not fired or not dropped:
            self.fail(name, f"the API created no job for the dropped paid call ({describe_routes(exchanges)})")
            return None
        ref = outcome.value if outcome.error is None and isinstance(outcome.value, str) else None
        return Lost(token, dropped[0].upstream_body.decode("utf-8", "replace"), ref)

    def find_checks(self, lost: Lost) -> Lost:
        adapter = self.build("find")
        if adapter is None:
            return lost
        name = "find, a token never used"
        outcome = call(adapter.find, new_token(), timeout=self.call_timeout)
        said = outcome.text(self.redact)
        if outcome.timed_out:
            self.fail(name, said)
        elif outcome.error is None and outcome.value is not None:
            self.fail(name, f"{said}: UNSAFE: a job for a token nobody used; a retry would adopt another run's job")
        elif outcome.error is None:
            self.ok(name, said)
        else:
            self.ok(name, f"{said}: it never proves 'no job' (safe: a lost submit stays unknown until reconciled)")

        name = "find, the token of a lost submit"
        outcome = call(adapter.find, lost.token, timeout=self.call_timeout)
        said, shown = outcome.text(self.redact), self.quote(lost.answer)
        if outcome.error is None and outcome.value is None:
            self.fail(name, f"{said}: UNSAFE: {WHY_NO_JOB}")
        elif outcome.error is not None or outcome.timed_out:
            self.fail(name, f"{said}, expected the job the lost call created (its answer: {shown})")
        elif not isinstance(outcome.value, str) or outcome.value not in lost.answer:
            self.fail(name, f"{said}, which is not the job the lost call created (its answer: {shown})")
        else:
            lost = Lost(lost.token, lost.answer, outcome.value)
            self.refs[lost.token] = outcome.value
            self.ok(name, said)
        for fault in self.plan.find:
            self.find_fault(fault, lost)
        return lost

    def find_fault(self, fault: Fault, lost: Lost) -> None:
        name = f"find: {fault.description}"
        adapter = self.build(name)
        if adapter is None:
            return
        outcome, exchanges, fired = self.through_proxy(fault, None, adapter.find, lost.token)
        problem = self.fault_problem(fault, outcome, exchanges, fired)
        if problem:
            self.fail(name, problem)
            return
        said = outcome.text(self.redact)
        expected = expected_read(fault)
        if outcome.error is None and outcome.value is None:
            self.fail(name, f"{said}, expected {class_names(expected)}: UNSAFE: {WHY_NO_JOB}")
        elif outcome.error is None:
            if outcome.value == lost.ref and any(e.delivered for e in exchanges):
                self.ok(name, f"{said}: recovered (a retry read the API's own answer)")
            else:
                self.fail(name, f"{said}, expected {class_names(expected)}: no answer of the API named that job")
        elif isinstance(outcome.error, expected):
            self.ok(name, said)
        else:
            self.fail(name, f"{said}, expected {class_names(expected)}: {why_read(expected)}")

    def resubmit_check(self, lost: Lost) -> None:
        name = "submit again with the token of a lost submit (idempotent tokens)"
        adapter = self.build(name)
        if adapter is None:
            return
        outcome, _, _ = self.through_proxy(None, None, adapter.submit, self.request, lost.token)
        said, shown = outcome.text(self.redact), self.quote(lost.answer)
        same = isinstance(outcome.value, str) and (
            outcome.value == lost.ref or (lost.ref is None and outcome.value in lost.answer)
        )
        if outcome.error is not None or outcome.timed_out:
            self.fail(name, f"{said}, expected the job the lost call created (its answer: {shown})")
        elif not same:
            self.fail(
                name,
                f"{said}: UNSAFE: the adapter declares idempotent tokens, but the API made another job for a token "
                f"it had seen (the lost call's answer: {shown}): each retry after a lost answer pays again",
            )
        else:
            self.ok(name, f"{said}: the same job")

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

    def judge_plain(self, name: str, outcome: Outcome, expected: Classes, why: str) -> None:
        said = outcome.text(self.redact)
        if outcome.error is not None and isinstance(outcome.error, expected):
            self.ok(name, said)
        else:
            self.fail(name, f"{said}, expected {class_names(expected)}: {why}")
