"""The conformance report: one line per check, passed or failed and why."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CheckResult", "ConformanceReport"]


@dataclass(frozen=True)
class CheckResult:
    """One check: ``name`` says the call and the fault, ``detail`` what the adapter did (and should have)."""

    name: str
    passed: bool
    detail: str

    @property
    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {self.detail}"


@dataclass(frozen=True)
class ConformanceReport:
    """Every check the kit ran on one adapter; ``str(report)`` is the printable report."""

    #: The adapter's class name.
    adapter: str
    api_url: str
    #: Which requests the kit treated as paid (`PaidRoutes.describe`).
    paid: str
    checks: tuple[CheckResult, ...]
    #: Wall-clock time of the whole run.
    seconds: float

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(check for check in self.checks if not check.passed)

    def __str__(self) -> str:
        failed = len(self.failures)
        verdict = "conforms" if self.ok else f"does NOT conform ({failed} of {len(self.checks)} checks failed)"
        head = (
            f"{self.adapter} {verdict}: {len(self.checks)} checks in {self.seconds:.1f} s "
            f"against {self.api_url} (paid calls: {self.paid})"
        )
        return "\n".join([head, *(check.line for check in self.checks)])
