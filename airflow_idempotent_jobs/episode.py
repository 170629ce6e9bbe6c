"""The episode model: one durable job, and the record of its paid submission."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .errors import IllegalTransition, InvalidIdentifier, StoreCorrupted
from .identity import EpisodeId, validate_allocation_key, validate_fingerprint

__all__ = [
    "SCHEMA_VERSION",
    "Episode",
    "EpisodeStatus",
    "Submission",
    "SubmissionState",
    "TRANSITIONS",
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


def utc_now() -> str:
    """An ISO-8601 UTC timestamp with microseconds, the form every record uses."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


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
    #: Which process wrote the ``submitting`` intent (``host:pid:nonce``) and when: a retry on the
    #: same host can tell a crashed submitter from one still waiting for the provider's answer.
    claimed_by: str | None = None
    claimed_at: str | None = None
    #: Who settled an uncertain submission, when, and how (reconcile).
    settled_by: str | None = None
    settled_at: str | None = None
    settled_how: str | None = None
    updated_at: str | None = None
    #: Every transition, oldest first: ``{"from", "to", "at", "note"}``.
    history: tuple[Mapping[str, Any], ...] = ()

    def moved_to(self, state: SubmissionState, *, episode_id: str, note: str = "", **changes: Any) -> Submission:
        """A copy in ``state``; raises `IllegalTransition` for a move the ledger forbids."""
        if state not in TRANSITIONS[self.state]:
            raise IllegalTransition(episode_id, self.state.value, state.value)
        now = utc_now()
        entry = {"from": self.state.value, "to": state.value, "at": now, "note": note}
        return dataclasses.replace(self, state=state, updated_at=now, history=(*self.history, entry), **changes)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["state"] = self.state.value
        data["history"] = [dict(item) for item in self.history]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Submission:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["state"] = SubmissionState(values.get("state", "none"))
        values["history"] = tuple(dict(item) for item in values.get("history", ()))
        for name in ("cost", "estimated_cost"):
            if values.get(name) is not None:
                values[name] = float(values[name])
        values["attempts"] = int(values.get("attempts", 0))
        return cls(**values)


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
    #: Free-form facts kept with the job (migration records, operator notes).
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> EpisodeId:
        return EpisodeId.parse(self.episode_id)

    def to_record(self) -> dict[str, Any]:
        """The persisted form (no ``reused``), with ``schema_version``."""
        return {
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

    def to_dict(self) -> dict[str, Any]:
        """The public JSON form: the field names of `Episode`."""
        data = self.to_record()
        del data["schema_version"]
        data["reused"] = self.reused
        return data

    @classmethod
    def from_record(cls, data: Any, where: str) -> Episode:
        """Parse and validate a persisted record; anything off is `StoreCorrupted` at ``where``."""
        if not isinstance(data, dict):
            raise StoreCorrupted(where, "record is not a JSON object")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise StoreCorrupted(where, f"unknown schema_version {version!r} (this version reads {SCHEMA_VERSION})")
        try:
            episode_id = EpisodeId.parse(data["episode_id"])
            if data["week_id"] != str(episode_id.week) or data["sequence"] != episode_id.sequence:
                raise StoreCorrupted(where, f"week_id/sequence disagree with episode_id {episode_id}")
            return cls(
                episode_id=str(episode_id),
                week_id=str(episode_id.week),
                sequence=episode_id.sequence,
                allocation_key=validate_allocation_key(data["allocation_key"]),
                fingerprint=validate_fingerprint(data.get("fingerprint")),
                status=EpisodeStatus(data["status"]),
                created_at=str(data["created_at"]),
                updated_at=data.get("updated_at"),
                submission=Submission.from_dict(data.get("submission") or {}),
                metadata=dict(data.get("metadata") or {}),
            )
        except StoreCorrupted:
            raise
        except (KeyError, TypeError, ValueError, InvalidIdentifier) as exc:
            raise StoreCorrupted(where, f"invalid episode record: {exc}") from exc
