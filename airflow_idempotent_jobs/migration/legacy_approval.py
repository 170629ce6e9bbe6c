"""A legacy job's approval, read from its state: the decision the migrated episode keeps.

Recognised, at the top level of ``state.json`` only (each field optional; several may describe one
decision as long as they agree)::

    "approval": {"state" | "status": "approved" | "rejected" | "pending" | "none",
                 "by" | "approved_by" | "rejected_by": text,
                 "at" | "approved_at" | "rejected_at": text,
                 "comment": text}                  (or "approval": null)
    "approved_by", "approved_at"                   an approval
    "rejected_by", "rejected_at"                   a rejection
    "approved": true | false                       true: an approval (``approved_by``/``_at`` name it)

``approved``/``rejected`` become the decision; ``pending``, ``none``, ``approved: false`` and no
field at all are "no decision"; a field that is null says nothing (``"rejected_by": null`` beside an
approval, or every field null in a job nobody decided yet). Anything else is refused, never guessed:
an unknown value or field inside ``approval``, a top-level name that differs from one above only in
case or surrounding blanks (``Rejected_By``: read as nothing, a rejection would be lost), fields that
contradict each other, a decision without who or when, an approver that is not text, and a rejection
of a job that shows spending (a remote reference, a cost record, a completion): each is
`LegacyApprovalError` naming the field as an RFC 6901 pointer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..approval import validate_actor, validate_comment
from ..episode import Decision
from ..errors import IdempotentJobsError, InvalidIdentifier

__all__ = [
    "LegacyApprovalError",
    "LegacyApprovalRefused",
    "LegacyDecision",
    "read_legacy_approval",
    "refuse_rejected_spending",
]

_STATES: Final = {"approved": Decision.APPROVED, "rejected": Decision.REJECTED, "pending": None, "none": None}
_OBJECT_FIELDS: Final = frozenset(
    {"state", "status", "by", "approved_by", "rejected_by", "at", "approved_at", "rejected_at", "comment"}
)
_WHO: Final = ("by", "approved_by", "rejected_by")
_WHEN: Final = ("at", "approved_at", "rejected_at")
#: The top-level names this module reads.
_TOP_LEVEL: Final = frozenset({"approval", "approved", "approved_by", "approved_at", "rejected_by", "rejected_at"})
#: Longest legacy timestamp text taken over (it is shown, not parsed: legacy formats vary).
_MAX_AT: Final = 64


class LegacyApprovalError(ValueError):
    """A legacy approval that cannot be read as exactly one decision (or none); ``field`` is a pointer."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"field {field}: {reason}")
        self.field = field
        self.reason = reason


class LegacyApprovalRefused(IdempotentJobsError, ValueError):
    """A legacy state's approval in doubt: the whole migration is refused (bad input, nothing changed).

    Not a skipped week: a job whose spending gate cannot be read must not be left for a later run to
    guess, and the operator fixes one field and runs the migration again.
    """

    exit_code = 2
    retryable = False

    def __init__(self, path: str, problem: LegacyApprovalError) -> None:
        self.path = path
        self.field = problem.field
        self.reason = problem.reason
        super().__init__(f"legacy approval in {path}: {problem}; nothing was migrated")


@dataclass(frozen=True)
class LegacyDecision:
    """What the migrated episode records as its decision (``via: migration``)."""

    decision: Decision
    by: str
    at: str
    comment: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision.value, "by": self.by, "at": self.at, "comment": self.comment}

    @classmethod
    def from_dict(cls, data: object) -> LegacyDecision | None:
        """The inverse of `to_dict` (None stays None); anything else is ValueError."""
        if data is None:
            return None
        if not isinstance(data, Mapping) or set(data) != {"decision", "by", "at", "comment"}:
            raise ValueError(f"approval {data!r:.120} is not a recorded decision")
        comment = data["comment"]
        if not all(isinstance(data[name], str) for name in ("by", "at")) or not isinstance(comment, (str, type(None))):
            raise ValueError("a recorded decision's by and at must be text")
        return cls(Decision(data["decision"]), data["by"], data["at"], comment)


@dataclass
class _Claims:
    """Every field's say on the decision, who and when: each must agree with all the others."""

    #: (pointer, the decisions it allows)
    decisions: list[tuple[str, frozenset[Decision | None]]]
    who: list[tuple[str, Any]]
    when: list[tuple[str, Any]]


def read_legacy_approval(state: Mapping[str, Any]) -> LegacyDecision | None:
    """The decision ``state`` records, or None; `LegacyApprovalError` for any shape in doubt."""
    claims = _Claims([], [], [])
    comment: tuple[str, Any] | None = None
    if "approval" in state and state["approval"] is not None:
        comment = _object_claims(state["approval"], claims)
    _top_level_claims(state, claims)
    decision = _one_decision(claims)
    if decision is None:
        return None
    who = _agreed(claims.who, "who decided")
    when = _agreed(claims.when, "when it was decided")
    if who is None or when is None:
        missing = "who decided" if who is None else "when"
        raise LegacyApprovalError(claims.decisions[0][0], f"{decision.value}, but the state does not say {missing}")
    (by_pointer, by), (at_pointer, at) = who, when
    if not isinstance(by, str):
        raise LegacyApprovalError(by_pointer, f"the approver must be text, not {type(by).__name__}")
    try:
        validate_actor(by, by_pointer)
    except InvalidIdentifier as exc:
        raise LegacyApprovalError(by_pointer, exc.reason) from None
    if not isinstance(at, str) or not at.strip() or len(at) > _MAX_AT or not at.isprintable():
        raise LegacyApprovalError(at_pointer, f"must be a printable timestamp of at most {_MAX_AT} characters")
    text = None
    if comment is not None:
        try:
            text = validate_comment(comment[1])
        except InvalidIdentifier as exc:
            raise LegacyApprovalError(comment[0], exc.reason) from None
    return LegacyDecision(decision, by, at, text)


def refuse_rejected_spending(decision: LegacyDecision | None, spending: list[str]) -> None:
    """A rejected job that shows spending contradicts itself: `LegacyApprovalError` naming both."""
    if decision is not None and decision.decision is Decision.REJECTED and spending:
        raise LegacyApprovalError(
            "/approval",
            f"rejected by {decision.by}, yet the state shows spending ({', '.join(spending)}): "
            "a rejection means nothing was spent",
        )


def _object_claims(value: Any, claims: _Claims) -> tuple[str, Any] | None:
    if not isinstance(value, Mapping):
        raise LegacyApprovalError("/approval", f"expected an object or null, not {type(value).__name__}")
    unknown = sorted(set(value) - _OBJECT_FIELDS)
    if unknown:
        raise LegacyApprovalError(f"/approval/{unknown[0]}", f"not a recognised approval field ({_known()})")
    said = [name for name in ("state", "status") if name in value]
    if not said:
        raise LegacyApprovalError("/approval", "has neither state nor status")
    for name in said:
        word = value[name]
        if not isinstance(word, str) or word not in _STATES:
            raise LegacyApprovalError(
                f"/approval/{name}", f"{word!r:.60} is not one of approved, rejected, pending, none"
            )
        claims.decisions.append((f"/approval/{name}", frozenset({_STATES[word]})))
    _named_claims(value, "/approval/", claims)
    return ("/approval/comment", value["comment"]) if "comment" in value else None


def _top_level_claims(state: Mapping[str, Any], claims: _Claims) -> None:
    for name in state:
        plain = name.strip().lower() if isinstance(name, str) else name
        if plain in _TOP_LEVEL and plain != name:
            pointer = "/" + name.replace("~", "~0").replace("/", "~1")
            raise LegacyApprovalError(pointer, f"looks like {plain} but is not spelled so: rename it or remove it")
    if "approved" in state:
        flag = state["approved"]
        if not isinstance(flag, bool):
            raise LegacyApprovalError("/approved", f"must be true or false, not {flag!r:.60}")
        allowed = {Decision.APPROVED} if flag else {None, Decision.REJECTED}
        claims.decisions.append(("/approved", frozenset(allowed)))
    _named_claims({k: v for k, v in state.items() if k.startswith(("approved_", "rejected_"))}, "/", claims)


def _named_claims(fields: Mapping[str, Any], prefix: str, claims: _Claims) -> None:
    """``by``/``at`` and their ``approved_``/``rejected_`` forms, which also say which decision it was."""
    for name, value in fields.items():
        if value is None:  # JSON's "not set": claims no decision, no one and no time
            continue
        if name in ("approved_by", "approved_at"):
            claims.decisions.append((prefix + name, frozenset({Decision.APPROVED})))
        elif name in ("rejected_by", "rejected_at"):
            claims.decisions.append((prefix + name, frozenset({Decision.REJECTED})))
        if name in _WHO:
            claims.who.append((prefix + name, value))
        elif name in _WHEN:
            claims.when.append((prefix + name, value))


def _one_decision(claims: _Claims) -> Decision | None:
    allowed: frozenset[Decision | None] = frozenset({None, *Decision})
    agreed: list[str] = []
    for pointer, says in claims.decisions:
        if not allowed & says:
            raise LegacyApprovalError(pointer, f"contradicts {', '.join(agreed)}")
        allowed &= says
        agreed.append(pointer)
    return None if None in allowed else next(iter(allowed))


def _agreed(values: list[tuple[str, Any]], what: str) -> tuple[str, Any] | None:
    """(pointer, value): the one value several fields give (None when none does); fields that differ are refused."""
    present = [(pointer, value) for pointer, value in values if value is not None]
    if not present:
        return None
    first_pointer, first = present[0]
    for pointer, value in present[1:]:
        if value != first:
            raise LegacyApprovalError(pointer, f"says {what} differently from {first_pointer}")
    return present[0]


def _known() -> str:
    return ", ".join(sorted(_OBJECT_FIELDS))
