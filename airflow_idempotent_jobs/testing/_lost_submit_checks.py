"""The checks on lost submits: ``find`` of their tokens, and resubmitting them.

A lost submit is one whose paid answer the proxy dropped after the API created the job: the
ledger's worst case, which only ``find`` or an idempotent resubmission can settle. The kit makes
one in this process and one in another (`submit_elsewhere`), since the ledger's retry runs in a
fresh process: a lookup that answers from its own process's memory looks right in one process
and pays twice in the next.
"""

from __future__ import annotations

from typing import Final

from ..paid.provider import PaidProvider
from ._calls import call, class_names
from ._elsewhere import submit_elsewhere
from ._kit_base import KitBase, Lost, new_token
from ._verdicts import WHY_NO_JOB, WHY_NO_JOB_ELSEWHERE, WHY_STRAY, describe_routes, expected_read, why_read
from .fault_proxy import Exchange, Fault

__all__ = ["CROSS_FIND", "CROSS_RESUBMIT", "RESUBMIT", "LookupChecks"]

#: The checks on a submit another process lost, and the resubmission of a lost token.
CROSS_FIND: Final = "find, the token of a submit another process lost"
RESUBMIT: Final = "submit again with the token of a lost submit (idempotent tokens)"
CROSS_RESUBMIT: Final = "submit again with the token of a submit another process lost (idempotent tokens)"


class LookupChecks(KitBase):
    """`lost_submit` and `lost_elsewhere` make the jobs; the rest judge ``find`` and resubmission on them."""

    def lost_submit_checks(self) -> Lost | None:
        """Every check on lost submits; returns this process's lost submit (for the refused-connection find)."""
        lost = self.lost_submit()
        elsewhere = self.lost_elsewhere() if lost is not None else None
        if lost is not None and self.caps.lookup:
            lost = self.find_checks(lost)
            if elsewhere is not None:
                elsewhere = self.find_lost(CROSS_FIND, elsewhere, WHY_NO_JOB_ELSEWHERE)
        if lost is not None and self.caps.idempotent_tokens:
            self.resubmit_check(RESUBMIT, lost)
            if elsewhere is not None:
                self.resubmit_check(CROSS_RESUBMIT, elsewhere)
        return lost

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
        dropped = self.created_unseen(exchanges)
        if not fired or not dropped:
            self.fail(name, f"the API created no job for the dropped paid call ({describe_routes(exchanges)})")
            return None
        ref = outcome.value if outcome.error is None and isinstance(outcome.value, str) else None
        return Lost(token, dropped[0].upstream_body.decode("utf-8", "replace"), ref)

    def lost_elsewhere(self) -> Lost | None:
        """As `lost_submit`, by an adapter in another process that then ends (`submit_elsewhere`).

        Whatever that submit wrote into memory is gone with its process, as for the ledger's retry.
        This process asks for the token first (its answer was judged by "a token never used"), so
        that a lookup that keeps an earlier "no job" in memory shows it afterwards.
        """
        name = "a submit another process lost (for find and resubmission)"
        token = new_token()
        if self.caps.lookup and (adapter := self.build(name)) is not None:
            call(adapter.find, token, timeout=self.call_timeout)
        mark = self.proxy.mark()
        self.proxy.arm(Fault.drop(), self.paid)
        said = submit_elsewhere(self.factory, self.proxy.base_url, self.request, token, self.call_timeout)
        unfired = self.proxy.disarm() is not None
        exchanges = self.proxy.exchanges(mark)
        dropped = self.created_unseen(exchanges)
        if unfired or not dropped:
            self.fail(
                name,
                f"the submit in another process {said}, and the API created no job for a dropped paid call "
                f"({describe_routes(exchanges)})",
            )
            return None
        return Lost(token, dropped[0].upstream_body.decode("utf-8", "replace"))

    @staticmethod
    def created_unseen(exchanges: list[Exchange]) -> list[Exchange]:
        """The faulted requests the API answered with a 2xx (it created the job) that the client never got."""
        return [e for e in exchanges if e.fault and e.forwarded and 200 <= (e.upstream_status or 0) < 300]

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
        lost = self.find_lost("find, the token of a lost submit", lost, WHY_NO_JOB, adapter)
        for fault in self.plan.find:
            self.find_fault(fault, lost)
        return lost

    def find_lost(self, name: str, lost: Lost, why_none: str, adapter: PaidProvider | None = None) -> Lost:
        """``find`` of a lost submit's token must name its job; ``adapter``: a fresh one if not given."""
        adapter = adapter or self.build(name)
        if adapter is None:
            return lost
        outcome = call(adapter.find, lost.token, timeout=self.call_timeout)
        said, shown = outcome.text(self.redact), self.quote(lost.answer)
        if outcome.error is None and outcome.value is None:
            self.fail(name, f"{said}: UNSAFE: {why_none}")
        elif outcome.error is not None or outcome.timed_out:
            self.fail(name, f"{said}, expected the job the lost call created (its answer: {shown})")
        elif not isinstance(outcome.value, str) or outcome.value not in lost.answer:
            self.fail(name, f"{said}, which is not the job the lost call created (its answer: {shown})")
        else:
            self.refs[lost.token] = outcome.value
            self.ok(name, said)
            return Lost(lost.token, lost.answer, outcome.value)
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
            stray = f" ({WHY_STRAY})" if fault.action == "answer" else ""
            self.fail(name, f"{said}, expected {class_names(expected)}: UNSAFE: {WHY_NO_JOB}{stray}")
        elif outcome.error is None:
            if outcome.value == lost.ref and any(e.delivered for e in exchanges):
                self.ok(name, f"{said}: recovered (a retry read the API's own answer)")
            else:
                self.fail(name, f"{said}, expected {class_names(expected)}: no answer of the API named that job")
        elif isinstance(outcome.error, expected):
            self.ok(name, said)
        else:
            self.fail(name, f"{said}, expected {class_names(expected)}: {why_read(expected)}")

    def resubmit_check(self, name: str, lost: Lost) -> None:
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
