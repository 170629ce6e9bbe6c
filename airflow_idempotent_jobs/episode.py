"""The episode model: one durable job, and the record of its paid submission."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .effect import Effect, effects_from_record, effects_to_record
from .errors import IllegalTransition, InvalidIdentifier, StoreCorrupted
from .identity import EpisodeId, validate_allocation_key, validate_fingerprint
from .owner import OWNER_KEY, Owner
from .record_values import OmittedResult, is_count, utc_now

__all__ = [
    "APPROVAL_EVENTS",
    "SCHEMA_VERSION",
    "Approval",
    "Decision",
    "Episode",
    "EpisodeStatus",
    "OmittedResult",
    "Submission",
    "SubmissionState",
    "TRANSITIONS",
    "amount_problem",
    "cost_problem",
    "is_negative_zero",
    "utc_now",
]

#: Version of every record this package writes; readers refuse any other.
SCHEMA_VERSION: Final = 1


class EpisodeStatus(str, enum.Enum):
    """Where the job as a whole stands; the submission record says where the paid call stands."""

    ALLOCATED = "allocated"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: A person said no before anything was spent (`approval`); final.
    REJECTED = "rejected"


class SubmissionState(str, enum.Enum):
    """The paid-submission ledger: ``none -> submitting -> accepted -> succeeded | failed``."""

    NONE = "none"
    SUBMITTING = "submitting"
    ACCEPTED = "accepted"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        return self in (SubmissionState.SUCCEEDED, SubmissionState.FAILED)


_S = SubmissionState
#: Every legal move of the ledger. ``submitting -> submitting`` is a resubmission with the same
#: idempotency token; ``submitting|unknown -> none`` is an operator's word that nothing was sent.
TRANSITIONS: Final[Mapping[SubmissionState, frozenset[SubmissionState]]] = {
    _S.NONE: frozenset({_S.SUBMITTING}),
    _S.SUBMITTING: frozenset({_S.SUBMITTING, _S.ACCEPTED, _S.FAILED, _S.UNKNOWN, _S.NONE}),
    _S.UNKNOWN: frozenset({_S.SUBMITTING, _S.ACCEPTED, _S.FAILED, _S.NONE}),
    _S.ACCEPTED: frozenset({_S.ACCEPTED, _S.SUCCEEDED, _S.FAILED}),
    _S.SUCCEEDED: frozenset(),
    _S.FAILED: frozenset(),
}


def cost_problem(value: object) -> str | None:
    """Why ``value`` is not a cost, or None if it is one: a cost is a finite number >= 0.

    NaN compares false with every budget and a negative cost lowers the week's spend: both would
    let submissions through a budget, so neither is ever recorded as a cost.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"not a number ({type(value).__name__})"
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return "not a finite number"
    if not math.isfinite(number):
        return "not a finite number"
    if number < 0:
        return "negative"
    return None


def amount_problem(value: object) -> str | None:
    """Why a budget or an estimate a person gave is refused, or None: a cost's rule, and no negative zero.

    ``-0.0`` passes every comparison a zero passes, so `cost_problem` takes it, and it came back as
    "-0.00". A provider's reported cost keeps `cost_problem` alone: it is the provider's word, and
    -0.0 counts as 0 in every budget sum; a person who typed the minus sign meant something else.
    """
    problem = cost_problem(value)
    if problem is None and is_negative_zero(value):
        return "a negative zero"
    return problem


def is_negative_zero(value: object) -> bool:
    """``-0.0`` (a float zero with its sign bit set); never an int, which has no negative zero."""
    return isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0


@dataclass(frozen=True)
class Submission:
    """The paid call for one episode. Written before the provider is called, updated right after."""

    #: Ledger state.
    state: SubmissionState = SubmissionState.NONE
    #: Idempotency token sent to the provider; derived from namespace and episode id.
    token: str | None = None
    #: The provider's id for the job, once it is known.
    remote_ref: str | None = None
    #: Remote job state as last reported (pending, running, succeeded, failed).
    remote_state: str | None = None
    #: Cost reported by the provider, in the provider's currency unit.
    cost: float | None = None
    #: Result payload reported by the provider on success.
    result: Any = None
    #: Last error text (a rejection, a lost answer).
    error: str | None = None
    #: How many submit calls were made (a resubmission with the same token counts).
    attempts: int = 0
    #: What the caller expected to pay, counted against the weekly budget until a cost is known.
    estimated_cost: float | None = None
    #: Which process wrote the ``submitting`` intent (``host:pid:nonce:pidns=N:boot=B``, `paid.claims`)
    #: and when: a retry in its PID namespace can tell a crashed submitter from one still waiting.
    claimed_by: str | None = None
    claimed_at: str | None = None
    #: Who settled an uncertain submission, when, and how (reconcile).
    settled_by: str | None = None
    settled_at: str | None = None
    settled_how: str | None = None
    updated_at: str | None = None
    #: Every transition, oldest first: ``{"from", "to", "at", "note"}``; a person's settling adds
    #: ``by``, ``via`` and, when given, ``comment``.
    history: tuple[Mapping[str, Any], ...] = ()
    #: ``sha256:<hex>`` of the request this submission is for (`paid.fingerprint`), written with
    #: the intent; None in records written before fingerprints existed.
    request_fingerprint: str | None = None
    #: ``sha256:<hex>`` of the billing account the submission went through (the provider's
    #: ``billing_identity``: API, endpoint, account, a digest of the key), written with the intent;
    #: None for a provider that does not say, and in older records.
    billed_to: str | None = None
    #: A cost the provider reported that is not a finite number >= 0: kept as evidence, never as
    #: ``cost`` (the budget counts the estimate instead).
    cost_anomaly: str | None = None
    #: Set when the provider's result was left out of ``result`` (too large, or not strict JSON).
    result_omitted: OmittedResult | None = None

    def moved_to(
        self,
        state: SubmissionState,
        *,
        episode_id: str,
        note: str = "",
        entry_extra: Mapping[str, Any] | None = None,
        **changes: Any,
    ) -> Submission:
        """A copy in ``state``; raises `IllegalTransition` for a move the ledger forbids.

        ``entry_extra`` adds keys to the move's history entry (who settled it, how, why).
        """
        if state not in TRANSITIONS[self.state]:
            raise IllegalTransition(episode_id, self.state.value, state.value)
        now = utc_now()
        entry = {**(entry_extra or {}), "from": self.state.value, "to": state.value, "at": now, "note": note}
        return dataclasses.replace(self, state=state, updated_at=now, history=(*self.history, entry), **changes)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["state"] = self.state.value
        data["history"] = [dict(item) for item in self.history]
        data["result_omitted"] = None if self.result_omitted is None else self.result_omitted.to_dict()
        # Fields added after the first release are written only when set: a record written before
        # them reads back and writes out unchanged (the PostgreSQL store compares it whole).
        for name in _LATER_FIELDS:
            if data[name] is None:
                del data[name]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Submission:
        """The inverse of `to_dict`; a value of the wrong type or out of range is `ValueError`."""
        if not isinstance(data, Mapping):
            raise ValueError("submission is not a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["state"] = SubmissionState(values.get("state", "none"))
        history = values.get("history", ())
        if not isinstance(history, (list, tuple)) or not all(isinstance(item, Mapping) for item in history):
            raise ValueError("submission history must be a list of objects")
        values["history"] = tuple(dict(item) for item in history)
        for name in _TEXT_FIELDS:
            if values.get(name) is not None and not isinstance(values[name], str):
                raise ValueError(f"submission {name} must be text or null, not {type(values[name]).__name__}")
        for name in ("cost", "estimated_cost"):
            if values.get(name) is not None:
                problem = cost_problem(values[name])
                if problem:
                    raise ValueError(f"submission {name} {values[name]!r:.60} is {problem}, not a cost")
                values[name] = float(values[name])
        attempts = values.get("attempts", 0)
        if not is_count(attempts):
            raise ValueError(f"submission attempts must be a whole number >= 0, not {attempts!r:.60}")
        if values.get("result_omitted") is not None:
            values["result_omitted"] = OmittedResult.from_dict(values["result_omitted"])
        return cls(**values)


#: Text-or-null fields of a submission record.
_TEXT_FIELDS: Final = (
    "token",
    "remote_ref",
    "remote_state",
    "error",
    "claimed_by",
    "claimed_at",
    "settled_by",
    "settled_at",
    "settled_how",
    "updated_at",
    "request_fingerprint",
    "billed_to",
    "cost_anomaly",
)
#: Fields added after the first release: absent from older records, so omitted while unset.
_LATER_FIELDS: Final = ("request_fingerprint", "billed_to", "cost_anomaly", "result_omitted")


class Decision(str, enum.Enum):
    """A human's answer on spending for one episode; final once recorded."""

    APPROVED = "approved"
    REJECTED = "rejected"


#: Events of an approval's history: questions asked, then at most one decision.
APPROVAL_EVENTS: Final = frozenset({"asked", "approved", "rejected"})
_ENTRY_FIELDS: Final = frozenset({"event", "by", "at", "comment", "via"})


@dataclass(frozen=True)
class Approval:
    """Where an episode's gate stands: no decision yet, approved or rejected, and how it got there."""

    decision: Decision | None = None
    #: Who decided (the HITL response's user, the CLI's ``--by``, or the legacy record's approver).
    by: str | None = None
    at: str | None = None
    comment: str | None = None
    #: How the decision arrived: ``airflow`` (a HITL answer), ``cli`` or ``migration``.
    via: str | None = None
    #: Every event, oldest first: ``{"event", "by", "at", "comment", "via"}``.
    history: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["decision"] = None if self.decision is None else self.decision.value
        data["history"] = [dict(item) for item in self.history]
        return data

    @classmethod
    def from_dict(cls, data: object) -> Approval:
        """The inverse of `to_dict`; anything else is `ValueError`."""
        if not isinstance(data, Mapping):
            raise ValueError("approval is not a JSON object")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"approval has unknown fields {sorted(unknown)}")
        for name in ("by", "at", "comment", "via"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise ValueError(f"approval {name} must be text or null, not {type(data[name]).__name__}")
        history = data.get("history", [])
        if not isinstance(history, (list, tuple)):
            raise ValueError("approval history must be a list")
        for n, item in enumerate(history):
            if not isinstance(item, Mapping) or set(item) != _ENTRY_FIELDS or item["event"] not in APPROVAL_EVENTS:
                raise ValueError(f"approval history entry {n} is not an event")
            # Shown to approvers and compared with the decision: text only, never a nested value.
            for name in ("by", "at", "comment", "via"):
                if not isinstance(item[name], str) and (name in ("by", "at") or item[name] is not None):
                    raise ValueError(
                        f"approval history entry {n}: {name} must be text, not {type(item[name]).__name__}"
                    )
        decision = data.get("decision")
        approval = cls(
            decision=None if decision is None else Decision(decision),
            by=data.get("by"),
            at=data.get("at"),
            comment=data.get("comment"),
            via=data.get("via"),
            history=tuple(dict(item) for item in history),
        )
        if approval.decision is not None and (approval.by is None or approval.at is None):
            raise ValueError("a recorded decision needs by and at")
        return approval


@dataclass(frozen=True)
class Episode:
    """One job: the unique result of allocating a key in a week."""

    episode_id: str
    week_id: str
    sequence: int
    allocation_key: str
    fingerprint: str | None
    status: EpisodeStatus
    created_at: str
    #: True when `allocate` returned an existing episode; never persisted.
    reused: bool = False
    updated_at: str | None = None
    submission: Submission = field(default_factory=Submission)
    #: Free-form facts kept with the job (migration records, operator notes); ``allocated_by``
    #: is the owner recorded at allocation (`allocated_by`), which no update may change.
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: The human gate before spending (`approval`): empty until someone is asked.
    approval: Approval = field(default_factory=Approval)
    #: What happened after the payment, by effect name (`effect`); read back sorted by name.
    effects: Mapping[str, Effect] = field(default_factory=dict)

    @property
    def id(self) -> EpisodeId:
        return EpisodeId.parse(self.episode_id)

    @property
    def allocated_by(self) -> Owner | None:
        """The task instance recorded when the episode was allocated; None when none was (`owner`)."""
        return Owner.recorded(self.metadata[OWNER_KEY]) if OWNER_KEY in self.metadata else None

    def to_record(self) -> dict[str, Any]:
        """The persisted form (no ``reused``), with ``schema_version``.

        ``approval`` is written only once something was asked or decided, ``effects`` once one
        began: a record written before either existed reads back and writes out unchanged.
        """
        record = {
            "schema_version": SCHEMA_VERSION,
            "episode_id": self.episode_id,
            "week_id": self.week_id,
            "sequence": self.sequence,
            "allocation_key": self.allocation_key,
            "fingerprint": self.fingerprint,
            "status": self.status.value,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "submission": self.submission.to_dict(),
            "metadata": dict(self.metadata),
        }
        if self.approval != Approval():
            record["approval"] = self.approval.to_dict()
        if self.effects:
            record["effects"] = effects_to_record(self.effects)
        return record

    def to_dict(self) -> dict[str, Any]:
        """The public JSON form: the field names of `Episode`."""
        data = self.to_record()
        del data["schema_version"]
        data["reused"] = self.reused
        data["approval"] = self.approval.to_dict()
        data["effects"] = effects_to_record(self.effects)
        return data

    @classmethod
    def from_record(cls, data: Any, where: str) -> Episode:
        """Parse and validate a persisted record; anything off is `StoreCorrupted` at ``where``."""
        if not isinstance(data, dict):
            raise StoreCorrupted(where, "record is not a JSON object")
        version = data.get("schema_version")
        if type(version) is not int or version != SCHEMA_VERSION:  # true == 1 and 1.0 == 1 in Python
            raise StoreCorrupted(where, f"unknown schema_version {version!r} (this version reads {SCHEMA_VERSION})")
        try:
            episode_id = EpisodeId.parse(data["episode_id"])
            if type(data["sequence"]) is not int:
                raise StoreCorrupted(where, f"sequence must be an integer, not {data['sequence']!r:.60}")
            if data["week_id"] != str(episode_id.week) or data["sequence"] != episode_id.sequence:
                raise StoreCorrupted(where, f"week_id/sequence disagree with episode_id {episode_id}")
            for name in ("created_at", "updated_at"):
                if not isinstance(data.get(name), str) and (name == "created_at" or data.get(name) is not None):
                    raise StoreCorrupted(where, f"{name} must be text, not {data.get(name)!r:.60}")
            metadata = data.get("metadata")
            if metadata is not None and not isinstance(metadata, dict):
                raise StoreCorrupted(where, "metadata is not a JSON object")
            if metadata and OWNER_KEY in metadata:
                Owner.recorded(metadata[OWNER_KEY])  # who may see the episode depends on it: strict
            return cls(
                episode_id=str(episode_id),
                week_id=str(episode_id.week),
                sequence=episode_id.sequence,
                allocation_key=validate_allocation_key(data["allocation_key"]),
                fingerprint=validate_fingerprint(data.get("fingerprint")),
                status=EpisodeStatus(data["status"]),
                created_at=data["created_at"],
                updated_at=data.get("updated_at"),
                submission=Submission.from_dict({} if data.get("submission") is None else data["submission"]),
                metadata=dict(metadata or {}),
                approval=Approval() if data.get("approval") is None else Approval.from_dict(data["approval"]),
                effects={} if data.get("effects") is None else effects_from_record(data["effects"]),
            )
        except StoreCorrupted:
            raise
        except (KeyError, TypeError, ValueError, OverflowError, InvalidIdentifier) as exc:
            raise StoreCorrupted(where, f"invalid episode record: {exc}") from exc
