"""A legacy job's approval, read from its state: the decision the migrated episode keeps.

Recognised, at the top level of ``state.json`` only (each field optional; several may describe one
decision as long as they agree)::

    "approval": {"state" | "status": "approved" | "rejected" | "pending" | "none",
                 "by" | "approved_by" | "rejected_by": text,
                 "at" | "approved_at" | "rejected_at": time,
                 "comment": text}                  (or "approval": null)
    "approved_by", "approved_at"                   an approval
    "rejected_by", "rejected_at"                   a rejection
    "approved": true | false                       true: an approval (``approved_by``/``_at`` name it)
    "status": "approved" | "rejected"              must agree with the fields above
              | "pending_approval" | "awaiting_approval"   (no decision); other statuses say nothing

A time is ISO 8601 date and time with a UTC offset or ``Z`` (``2026-08-01T10:00:00+02:00``), kept as
written. ``approved``/``rejected`` become the decision; ``pending``, ``none``, ``approved: false`` and
no field at all are "no decision"; a field that is null says nothing. Anything else is refused, never
guessed: an unknown value or field inside ``approval``; any other field, at any depth of the state or
of the week's ``history.json`` entry, whose name looks like a decision (`looks_like_a_decision`:
``rejectedBy``, ``Rejected By``, ``review.rejected_by``, ``needs_approval``), since it would be read as
nothing and a rejection lost; a status that speaks of another decision (``not approved``); fields
that contradict each other; a decision without who or when; an approver that is not text; a time
without a date, a time of day and an offset (``yesterday``, a naive ``2026-08-01 10:00``); and a
rejection of a job that shows spending (a remote reference, a cost record, a completion): each is
`LegacyApprovalError` naming the field as an RFC 6901 pointer.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .. import _moved
from ..approval import validate_actor, validate_comment
from ..episode import Decision
from ..errors import InvalidIdentifier, LegacyApprovalError

__all__ = [
    "LegacyDecision",
    "json_pointer",
    "looks_like_a_decision",
    "read_legacy_approval",
    "refuse_history_decisions",
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
_READ_AS: Final = "approval, approved, approved_by/_at or rejected_by/_at at the top level of state.json"
#: What a field's name holds, once reduced to lower-case letters and digits, when it speaks of a decision.
_DECISION_WORDS: Final = ("approv", "reject", "decision", "decided")
#: A top-level ``status`` that speaks of a decision: the decisions it allows (reduced as names are).
_STATUSES: Final = {
    "approved": frozenset({Decision.APPROVED}),
    "rejected": frozenset({Decision.REJECTED}),
    "pendingapproval": frozenset({None}),
    "awaitingapproval": frozenset({None}),
}
#: Top-level objects whose keys are data (artifact paths), not field names; their values are fields.
_KEYED_BY_DATA: Final = frozenset({"artifacts"})
#: Longest legacy timestamp text taken over (kept as written once it is proved a time).
_MAX_AT: Final = 64
#: ISO 8601: a calendar or week date, a time of day, then ``Z`` or an offset in hours and minutes.
#: `datetime.fromisoformat` proves the values; alone it takes a naive time, any separator, offset seconds.
_TIME_SHAPE: Final = re.compile(r"[0-9W-]{8,10}[Tt ][0-9:.,]+(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)", re.ASCII)


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
    _refuse_lookalikes(state)
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
    _check_time(at_pointer, at)
    text = None
    if comment is not None:
        try:
            text = validate_comment(comment[1])
        except InvalidIdentifier as exc:
            raise LegacyApprovalError(comment[0], exc.reason) from None
    return LegacyDecision(decision, by, at, text)


def looks_like_a_decision(name: str) -> bool:
    """Whether a field's name speaks of a decision, whatever its case, blanks, punctuation or width."""
    return any(word in _reduced(name) for word in _DECISION_WORDS)


def json_pointer(parent: str, key: object) -> str:
    """``parent`` extended by one member name, escaped as RFC 6901 says (``~0``, ``~1``)."""
    return f"{parent}/{str(key).replace('~', '~0').replace('/', '~1')}"


def refuse_history_decisions(week: str, entry: Any) -> None:
    """`LegacyApprovalError` for a field of a week's history entry that looks like a decision.

    The entry is kept with the episode but no decision is read from it: one there would be lost.
    """
    for pointer, name in _field_names(entry, json_pointer("", week)):
        if looks_like_a_decision(name):
            raise LegacyApprovalError(pointer, _not_read())


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


def _reduced(text: str) -> str:
    """Lower-case letters and digits only: ``Rejected-By``, ``rejectedBy`` and a full-width spelling are one name."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


_SPELLINGS: Final = {_reduced(name): name for name in _TOP_LEVEL}


def _not_read() -> str:
    return (
        f"looks like a decision, which the migration reads only as {_READ_AS}: record it so, or rename it or remove it"
    )


def _field_names(value: Any, pointer: str) -> Iterator[tuple[str, str]]:
    """(pointer, name) of every member of every object under ``value``, depth first, in file order."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            child = json_pointer(pointer, key)
            yield child, str(key)
            yield from _field_names(item, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _field_names(item, f"{pointer}/{index}")


def _refuse_lookalikes(state: Mapping[str, Any]) -> None:
    """A field named like a decision outside the shapes this module reads would be read as nothing."""
    for name, value in state.items():
        pointer = json_pointer("", name)
        if name in _TOP_LEVEL:  # read as a decision; ``approval``'s members are checked by _object_claims
            continue
        if _reduced(name) in _SPELLINGS:
            spelled = _SPELLINGS[_reduced(name)]
            raise LegacyApprovalError(pointer, f"looks like {spelled} but is not spelled so: rename it or remove it")
        if looks_like_a_decision(name):
            raise LegacyApprovalError(pointer, _not_read())
        if name in _KEYED_BY_DATA and isinstance(value, Mapping):
            fields = [f for key, item in value.items() for f in _field_names(item, json_pointer(pointer, key))]
        else:
            fields = list(_field_names(value, pointer))
        for child, field in fields:
            if looks_like_a_decision(field):
                raise LegacyApprovalError(child, _not_read())


def _top_level_claims(state: Mapping[str, Any], claims: _Claims) -> None:
    if "approved" in state:
        flag = state["approved"]
        if not isinstance(flag, bool):
            raise LegacyApprovalError("/approved", f"must be true or false, not {flag!r:.60}")
        allowed = {Decision.APPROVED} if flag else {None, Decision.REJECTED}
        claims.decisions.append(("/approved", frozenset(allowed)))
    status = state.get("status")
    if isinstance(status, str) and looks_like_a_decision(status):
        if _reduced(status) not in _STATUSES:
            raise LegacyApprovalError(
                "/status",
                f"{status!r:.60} speaks of a decision the migration cannot read (it reads approved, rejected, "
                "pending_approval, awaiting_approval): say it so, or record the decision as "
                f"{_READ_AS}",
            )
        claims.decisions.append(("/status", _STATUSES[_reduced(status)]))
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


def _check_time(pointer: str, at: Any) -> None:
    """A decision time names its instant: a date, a time of day and its UTC offset, all of them real."""
    problem = (
        f"must be a printable ISO 8601 date and time with a UTC offset or Z, at most {_MAX_AT} characters "
        f"(2026-08-01T10:00:00+02:00), not {at!r:.60}"
    )
    if not isinstance(at, str) or len(at) > _MAX_AT or not _TIME_SHAPE.fullmatch(at):
        raise LegacyApprovalError(pointer, problem)
    try:
        dt.datetime.fromisoformat(at)
    except ValueError:  # 2026-02-30, 25:00, an offset past 24 h
        raise LegacyApprovalError(pointer, problem) from None


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


def __getattr__(name: str) -> object:
    return _moved.moved_name(__name__, name)  # names kept one release for old imports: CHANGELOG.md
