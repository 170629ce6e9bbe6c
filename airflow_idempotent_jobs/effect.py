"""The effects ledger's records: what happened after the payment (publish, notify, upload), per episode.

An effect is named (``publish``, ``notify:slack``, ``publish[3]`` for a mapped one) and moves
``pending -> done | failed | unknown``; see docs/design.md, "Effects after the payment". A ``done``
effect is never run again; ``failed`` means known not done (a retry may run it again); ``unknown``
means it may have happened, and only the effect's own capability or a person settles it.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .errors import IllegalTransition, InvalidIdentifier
from .record_values import OmittedResult, utc_now

__all__ = [
    "EFFECT_NAME_PATTERN",
    "EFFECT_TRANSITIONS",
    "MAX_EFFECTS",
    "Effect",
    "EffectState",
    "effects_from_record",
    "effects_kept",
    "effects_to_record",
    "validate_effect_name",
]

#: An effect's name: a word, then words joined by ``. _ : / - @ +``, then an optional ``[N]`` map index.
EFFECT_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,119}(\[[0-9]{1,6}\])?")
#: The most effects one episode holds: each update rewrites the whole record, so the bound keeps a
#: record (and every write of it) small; a mapped task over more items needs ``effect_per_map_index=False``.
MAX_EFFECTS: Final = 1000


class EffectState(str, enum.Enum):
    """Where one effect stands."""

    #: The intent is written; the body may be running (or its runner died).
    PENDING = "pending"
    #: It happened; ``result`` is what the body returned (or what a person or a lookup said).
    DONE = "done"
    #: Known not to have happened: a retry may run it again.
    FAILED = "failed"
    #: It may have happened: never run again blindly.
    UNKNOWN = "unknown"


_E = EffectState
#: Every legal move. ``pending -> pending`` is a run again with the same token (the target honours it);
#: ``unknown -> done|failed`` is a lookup's or a person's answer.
EFFECT_TRANSITIONS: Final[Mapping[EffectState | None, frozenset[EffectState]]] = {
    None: frozenset({_E.PENDING}),
    _E.PENDING: frozenset({_E.PENDING, _E.DONE, _E.FAILED, _E.UNKNOWN}),
    _E.FAILED: frozenset({_E.PENDING}),
    _E.UNKNOWN: frozenset({_E.PENDING, _E.DONE, _E.FAILED}),
    _E.DONE: frozenset(),
}

_TEXT_FIELDS: Final = (
    "token",
    "input_fingerprint",
    "error",
    "claimed_by",
    "claimed_at",
    "settled_by",
    "settled_at",
    "settled_how",
    "updated_at",
)


def validate_effect_name(name: object) -> str:
    """``name`` if it is an effect's name (`EFFECT_NAME_PATTERN`), else `InvalidIdentifier`."""
    if not isinstance(name, str) or not EFFECT_NAME_PATTERN.fullmatch(name):
        raise InvalidIdentifier(
            "effect name", name, "must be a letter or digit, then up to 119 of A-Z a-z 0-9 . _ : / @ + -, then [N]"
        )
    return name


@dataclass(frozen=True)
class Effect:
    """One effect of an episode. Its intent is written before the body runs, its outcome right after."""

    state: EffectState
    #: Handed to the body to pass to the target: stable across tries, hosts and processes.
    token: str
    #: ``sha256:<hex>`` of the inputs the effect ran with; a run with other inputs is refused.
    input_fingerprint: str | None = None
    #: What the body returned (or a lookup or a person said), bounded like a provider's result.
    result: Any = None
    result_omitted: OmittedResult | None = None
    #: The last error (the body's exception, a lookup's), redacted and bounded.
    error: str | None = None
    #: How many times the body was started.
    attempts: int = 0
    #: The runner that wrote the ``pending`` intent (`paid.claims`) and when.
    claimed_by: str | None = None
    claimed_at: str | None = None
    #: Who settled an ``unknown`` effect, when and how (reconcile).
    settled_by: str | None = None
    settled_at: str | None = None
    settled_how: str | None = None
    updated_at: str | None = None
    #: Every transition, oldest first: ``{"from", "to", "at", "note"}`` (``from`` is None at first).
    history: tuple[Mapping[str, Any], ...] = ()

    def moved_to(self, state: EffectState, *, episode_id: str, name: str, note: str = "", **changes: Any) -> Effect:
        """A copy in ``state``; `IllegalTransition` for a move the ledger forbids."""
        return _moved(self.state, self, state, episode_id=episode_id, name=name, note=note, **changes)

    @classmethod
    def begun(cls, token: str, *, episode_id: str, name: str, note: str, **changes: Any) -> Effect:
        """A new effect's ``pending`` intent."""
        first = cls(state=EffectState.PENDING, token=token)
        return _moved(None, first, EffectState.PENDING, episode_id=episode_id, name=name, note=note, **changes)

    def to_dict(self) -> dict[str, Any]:
        # Field by field, not `dataclasses.asdict`: its deep copy of every result and history entry
        # made writing an episode with hundreds of effects cost tens of milliseconds per effect.
        data = {f.name: getattr(self, f.name) for f in _FIELDS}
        data["state"] = self.state.value
        data["history"] = [dict(item) for item in self.history]
        data["result_omitted"] = None if self.result_omitted is None else self.result_omitted.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: object) -> Effect:
        """The inverse of `to_dict`; anything else is `ValueError`."""
        if not isinstance(data, Mapping):
            raise ValueError("an effect is not a JSON object")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"an effect has unknown fields {sorted(unknown)}")
        values = dict(data)
        values["state"] = EffectState(values.get("state"))
        if not isinstance(values.get("token"), str):
            raise ValueError("an effect's token must be text")
        for name in _TEXT_FIELDS:
            if values.get(name) is not None and not isinstance(values[name], str):
                raise ValueError(f"an effect's {name} must be text or null, not {type(values[name]).__name__}")
        attempts = values.get("attempts", 0)
        if type(attempts) is not int or attempts < 0:
            raise ValueError(f"an effect's attempts must be a whole number >= 0, not {attempts!r:.60}")
        history = values.get("history", ())
        if not isinstance(history, (list, tuple)) or not all(isinstance(item, Mapping) for item in history):
            raise ValueError("an effect's history must be a list of objects")
        values["history"] = tuple(dict(item) for item in history)
        if values.get("result_omitted") is not None:
            values["result_omitted"] = OmittedResult.from_dict(values["result_omitted"])
        return cls(**values)


_FIELDS: Final = dataclasses.fields(Effect)


def _moved(
    current: EffectState | None,
    effect: Effect,
    state: EffectState,
    *,
    episode_id: str,
    name: str,
    note: str,
    **changes: Any,
) -> Effect:
    if state not in EFFECT_TRANSITIONS[current]:
        was = "absent" if current is None else current.value
        raise IllegalTransition(episode_id, was, state.value, what=f"effect {name}")
    now = utc_now()
    entry = {"from": None if current is None else current.value, "to": state.value, "at": now, "note": note}
    return dataclasses.replace(effect, state=state, updated_at=now, history=(*effect.history, entry), **changes)


def effects_to_record(effects: Mapping[str, Effect]) -> dict[str, Any]:
    """The record's ``effects`` object, sorted by name (both stores keep JSON objects sorted)."""
    return {name: effects[name].to_dict() for name in sorted(effects)}


def effects_from_record(data: object) -> dict[str, Effect]:
    """The inverse of `effects_to_record`; anything else is `ValueError`."""
    if not isinstance(data, Mapping):
        raise ValueError("effects is not a JSON object")
    if len(data) > MAX_EFFECTS:
        raise ValueError(f"effects holds {len(data)} effects, more than {MAX_EFFECTS}")
    found: dict[str, Effect] = {}
    for name, value in sorted(data.items()):
        try:
            validate_effect_name(name)
        except InvalidIdentifier as exc:
            raise ValueError(f"effect {name!r:.80}: {exc}") from None
        try:
            found[name] = Effect.from_dict(value)
        except ValueError as exc:
            raise ValueError(f"effect {name}: {exc}") from None
    return found


def effects_kept(episode_id: str, before: Mapping[str, Effect], after: Mapping[str, Effect]) -> None:
    """`IllegalTransition` unless ``after`` keeps every effect of ``before``, every ``done`` one as it
    was, and each history as its start: every store's updates obey it (PostgreSQL's guard trigger
    says the same to writers that bypass this code)."""
    for name, old in before.items():
        new = after.get(name)
        what = f"effect {name}"
        if new is None:
            raise IllegalTransition(episode_id, old.state.value, "absent (an effect is never removed)", what=what)
        if old.state is EffectState.DONE and new != old:
            wanted = f"{new.state.value} (a done effect never changes)"
            raise IllegalTransition(episode_id, "done", wanted, what=what)
        if new.history[: len(old.history)] != old.history:
            wanted = f"{new.state.value} (an effect's history only grows)"
            raise IllegalTransition(episode_id, old.state.value, wanted, what=what)
