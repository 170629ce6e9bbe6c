"""The effects ledger: each named effect of an episode happens at most once, whatever crashes in between.

Write order of one run, and what a retry finds after a crash at each point::

    1. lock; no effect (or `failed`); write `pending` (token, claim, inputs' fingerprint); unlock
                                  crash before: retry finds nothing (or `failed`) and runs normally
    2. body(token)                crash before/during/after: retry finds `pending`, its runner gone
    3. lock; write `done(result)`, or `failed` (`EffectNotDone`), or `unknown`; unlock

A retry that finds `done` returns the recorded result and runs nothing. One that finds `pending`
whose runner is gone records `unknown`; `unknown` is settled by what the caller declares the target
can do (`EffectCapability`): run again with the same token, look the token up, or neither (then
`EffectStateUnknown` and only ``idempotent-jobs reconcile ID --effect NAME`` settles it). Decisions
and writes run inside ``store.update`` (the store's lock); the body and the lookup run outside it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..effect import MAX_EFFECTS, Effect, EffectState, validate_effect_name
from ..episode import Episode
from ..errors import (
    EffectInProgress,
    EffectInputConflict,
    EffectNotDone,
    EffectStateUnknown,
    InvalidConfiguration,
    InvalidRequest,
    NotReconcilable,
    StoreCorrupted,
)
from ..identity import EpisodeId
from ..paid import claims
from ..paid.claims import DEFAULT_CLAIM_LEASE
from ..paid.fingerprint import request_fingerprint
from ..paid.results import DEFAULT_RESULT_LIMIT, MAX_REF_CHARS, bound_result, clean_text, redactor
from ..stores.base import EpisodeLike, EpisodeStore

__all__ = ["EffectCapability", "EffectLedger", "EffectRun", "Happened", "effect_token"]

_E = EffectState
#: Attempts at a decision whose compare-and-set lost a race before giving up (retry later).
_RACES: Final = 3


class EffectCapability(str, enum.Enum):
    """What the effect's target can do about a repeated token; decides what a retry of ``unknown`` does."""

    #: The target honours the token as an idempotency key: running again with it is harmless.
    IDEMPOTENT_KEY = "idempotent_key"
    #: ``lookup(token)`` tells whether the effect happened (and its result).
    LOOKUP = "lookup"
    #: Neither: ``unknown`` waits for ``idempotent-jobs reconcile ID --effect NAME``.
    NONE = "none"


@dataclass(frozen=True)
class Happened:
    """A lookup's answer that the effect did happen, with the result to record."""

    result: Any = None


#: Looks an effect's token up at its target: `Happened` or None (it certainly did not happen).
#: Anything it raises leaves the effect ``unknown``.
Lookup = Callable[[str], "Happened | None"]


@dataclass(frozen=True)
class EffectRun:
    """The outcome of `EffectLedger.run`: the episode as committed, and whether the body ran in this call."""

    episode: Episode
    name: str
    ran: bool

    @property
    def effect(self) -> Effect:
        return self.episode.effects[self.name]

    @property
    def result(self) -> Any:
        return self.effect.result


def effect_token(store_identity: str, episode_id: str, name: str) -> str:
    """The token handed to the body of ``name`` for ``episode_id``: stable across tries, hosts and processes.

    Distinct from the episode's paid token and from every other effect's, and from every other
    store's (`EpisodeStore.identity`); short and plain so that any target takes it as a key.
    """
    eid = str(EpisodeId.parse(episode_id))
    digest = hashlib.sha256(f"{store_identity}\x00{eid}\x00effect\x00{name}".encode()).hexdigest()[:32]
    return f"aij-{eid}-fx-{digest}"


def _utc_clock() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class EffectLedger:
    """Runs the effects of episodes in ``store``, each at most once.

    ``claim_lease``: seconds after which a ``pending`` intent's runner counts as gone; before that
    only a runner of this host, boot and PID namespace is checked, by its pid (`paid.claims`).
    ``result_limit``: largest result kept, in bytes of canonical JSON (`paid.results.bound_result`).
    """

    def __init__(
        self,
        store: EpisodeStore,
        *,
        claim_lease: float = DEFAULT_CLAIM_LEASE,
        result_limit: int = DEFAULT_RESULT_LIMIT,
        clock: Callable[[], dt.datetime] = _utc_clock,
    ) -> None:
        if type(result_limit) is not int or result_limit < 0:
            raise InvalidConfiguration("effect settings", "result_limit", "must be a whole number >= 0")
        self.store = store
        self.claim_lease = claim_lease
        self.result_limit = result_limit
        self.clock = clock

    def token_for(self, episode_id: EpisodeLike, name: str) -> str:
        return effect_token(self.store.identity, str(episode_id), validate_effect_name(name))

    # -- run -------------------------------------------------------------------------------------
    def run(
        self,
        episode_id: EpisodeLike,
        name: str,
        body: Callable[[str], Any],
        *,
        inputs: Mapping[str, Any] | None = None,
        capability: EffectCapability | str = EffectCapability.NONE,
        lookup: Lookup | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> EffectRun:
        """Run ``body(token)`` unless the effect already happened; returns the episode and whether it ran.

        ``inputs``: what the body acts on (its fingerprint is recorded; a later run with other
        inputs is `EffectInputConflict`). ``redact``: applied to every error text kept. Raises
        `EffectInProgress` (a live runner holds it: retry later), `EffectStateUnknown` (capability
        NONE and it may have happened), `EffectNotDone` re-raised from the body (recorded ``failed``),
        or the body's own exception (recorded ``unknown``: with a key or a lookup a retry settles it).
        """
        eid = str(EpisodeId.parse(episode_id))
        validate_effect_name(name)
        cap = EffectCapability(capability)
        if cap is EffectCapability.LOOKUP and lookup is None:
            raise InvalidConfiguration("effect " + name, "lookup", "capability 'lookup' needs a lookup callable")
        fingerprint = None if inputs is None else request_fingerprint(inputs)
        clean = redact or redactor(None)
        key = _claim_key(eid, name)
        try:
            for _ in range(_RACES):
                outcome = self._attempt(eid, name, body, fingerprint, cap, lookup, clean)
                if outcome is not None:
                    return outcome
            raise EffectInProgress(eid, name, "another process (the record kept changing)")
        finally:
            claims.leave(self.store.location, key)

    def _attempt(
        self,
        eid: str,
        name: str,
        body: Callable[[str], Any],
        fingerprint: str | None,
        cap: EffectCapability,
        lookup: Lookup | None,
        redact: Callable[[str], str],
    ) -> EffectRun | None:
        plan: list[str] = []
        episode = self.store.update(eid, lambda ep: self._decide(ep, name, fingerprint, cap, plan))
        if not plan:
            return EffectRun(episode, name, ran=False)
        if plan[0] == "run":
            return self._run(eid, name, body, episode, cap, redact)
        if plan[0] == "unknown":
            raise EffectStateUnknown(eid, name, episode.effects[name].error or "")
        assert lookup is not None  # plan "find": look the token up outside the lock
        seen = episode.effects[name]
        happened = _looked_up(lookup, seen.token)
        found: list[bool] = []
        episode = self.store.update(eid, lambda ep: self._after_find(ep, name, seen, happened, found))
        if not found:
            return None  # changed while we looked: decide again
        if happened is not None:
            return EffectRun(episode, name, ran=False)
        return self._run(eid, name, body, episode, cap, redact)

    def _decide(
        self, ep: Episode, name: str, fingerprint: str | None, cap: EffectCapability, plan: list[str]
    ) -> Episode:
        effect = ep.effects.get(name)
        if effect is None:
            if len(ep.effects) >= MAX_EFFECTS:
                raise InvalidRequest(
                    f"episode {ep.episode_id}: effect {name}: the episode already holds {MAX_EFFECTS} effects,"
                    " the most one episode may hold (a mapped effect over more items needs one effect in all)"
                )
            plan.append("run")
            token = self.token_for(ep.episode_id, name)
            begun = Effect.begun(
                token,
                episode_id=ep.episode_id,
                name=name,
                note="intent written before running the effect",
                input_fingerprint=fingerprint,
                attempts=1,
                **self._claim(ep.episode_id, name),
            )
            return _with(ep, name, begun)
        if effect.input_fingerprint != fingerprint:
            raise EffectInputConflict(ep.episode_id, name, str(effect.input_fingerprint), str(fingerprint))
        if effect.state is _E.DONE:
            return ep
        if effect.state is _E.PENDING and self._claim_alive(ep.episode_id, name, effect):
            raise EffectInProgress(ep.episode_id, name, effect.claimed_by)
        if effect.state is _E.FAILED:
            plan.append("run")
            return self._claimed(ep, name, effect, "known not done before: running it again")
        if effect.state is _E.PENDING:
            gone = "its runner is gone before recording an outcome: it may have happened"
            effect = self._move(ep, name, effect, _E.UNKNOWN, gone, error=gone)
        if cap is EffectCapability.IDEMPOTENT_KEY:
            plan.append("run")
            return self._claimed(ep, name, effect, "unknown: running again with the same token (the target honours it)")
        plan.append("find" if cap is EffectCapability.LOOKUP else "unknown")
        return _with(ep, name, effect)

    def _after_find(
        self, ep: Episode, name: str, seen: Effect, happened: Happened | None, found: list[bool]
    ) -> Episode:
        effect = ep.effects.get(name)
        if effect != seen:
            return ep
        found.append(True)
        if happened is not None:
            kept = bound_result(happened.result, self.result_limit)
            moved = self._move(
                ep, name, seen, _E.DONE, "found by token lookup", result=kept.value, result_omitted=kept.omitted
            )
            return _with(ep, name, moved)
        return self._claimed(ep, name, seen, "token lookup found nothing: running once with the same token")

    def _run(
        self,
        eid: str,
        name: str,
        body: Callable[[str], Any],
        claimed: Episode,
        cap: EffectCapability,
        redact: Callable[[str], str],
    ) -> EffectRun:
        effect = claimed.effects[name]
        assert effect.claimed_by is not None
        # Certainly not done now: back to `failed` if nothing could have happened before this run,
        # else to `unknown`, since an earlier run's outcome is still not known.
        earlier = effect.history[-1]["from"]
        back = _E.FAILED if earlier in (None, _E.FAILED.value) else _E.UNKNOWN
        try:
            result = body(effect.token)
        except EffectNotDone as exc:
            error = clean_text(_text(exc), redact)
            self._settle(eid, name, effect.claimed_by, back, f"not done: {error}", error=error)
            raise
        except BaseException as exc:
            error = clean_text(_text(exc), redact)
            self._settle(eid, name, effect.claimed_by, _E.UNKNOWN, "the body raised: it may have happened", error=error)
            if isinstance(exc, Exception) and cap is EffectCapability.NONE:
                raise EffectStateUnknown(eid, name, error) from (exc if error == _text(exc) else None)
            raise
        kept = bound_result(result, self.result_limit)
        episode = self._settle(
            eid, name, effect.claimed_by, _E.DONE, "done", result=kept.value, result_omitted=kept.omitted, error=None
        )
        return EffectRun(episode, name, ran=True)

    def _settle(self, eid: str, name: str, claim: str, state: EffectState, note: str, **changes: Any) -> Episode:
        """Record the outcome of our own run, if the record still carries our claim."""

        def change(ep: Episode) -> Episode:
            effect = ep.effects.get(name)
            if effect is None or effect.state is not _E.PENDING or effect.claimed_by != claim:
                now = "gone" if effect is None else effect.state.value
                raise EffectStateUnknown(eid, name, f"the record changed to {now} during the run; outcome: {note}")
            return _with(ep, name, self._move(ep, name, effect, state, note, **changes))

        return self.store.update(eid, change)

    # -- reconcile -------------------------------------------------------------------------------
    def reconcile(
        self,
        episode_id: EpisodeLike,
        name: str,
        *,
        done_ref: str | None = None,
        not_done: bool = False,
        lookup: Lookup | None = None,
        settled_by: str,
        comment: str | None = None,
    ) -> Episode:
        """Settle an ``unknown`` effect (or a ``pending`` one whose runner is gone); exactly one way.

        ``done_ref``: a person says it happened, with this reference (``done``, result ``{"ref"}``).
        ``not_done``: a person says it did not (``failed``: the next run runs it once).
        ``lookup``: look the token up (`Happened`: ``done``; None: ``failed``).
        `NotReconcilable` (exit 3) for any other state or a runner still alive.
        """
        eid = str(EpisodeId.parse(episode_id))
        validate_effect_name(name)
        if sum((done_ref is not None, not_done, lookup is not None)) != 1:
            raise ValueError("reconcile needs exactly one of done_ref, not_done, lookup")
        if done_ref is not None and (not done_ref.strip() or len(done_ref) > MAX_REF_CHARS):
            raise ValueError(f"the reference must be 1 to {MAX_REF_CHARS} characters")
        seen = self.check_reconcilable(eid, name)
        happened: Happened | None = Happened({"ref": done_ref}) if done_ref is not None else None
        how = "operator: done, reference given" if done_ref is not None else "operator: not done"
        if lookup is not None:
            happened = _looked_up(lookup, seen.token)
            how = "token lookup: " + ("it happened" if happened is not None else "nothing for the token")
        if comment:
            how = f"{how} ({clean_text(comment)})"

        def change(ep: Episode) -> Episode:
            effect = ep.effects.get(name)
            if effect != seen:
                now = "gone" if effect is None else effect.state.value
                raise NotReconcilable(eid, now, "the record changed meanwhile; run again", what=f"effect {name}")
            settled: dict[str, Any] = {
                "settled_by": settled_by,
                "settled_at": self.clock().isoformat(),
                "settled_how": how,
            }
            if effect.state is _E.PENDING:
                effect = self._move(ep, name, effect, _E.UNKNOWN, "its runner is gone", error="its runner is gone")
            if happened is not None:
                kept = bound_result(happened.result, self.result_limit)
                moved = self._move(ep, name, effect, _E.DONE, how, result=kept.value, result_omitted=kept.omitted)
            else:
                moved = self._move(ep, name, effect, _E.FAILED, how)
            return _with(ep, name, dataclasses.replace(moved, **settled))

        return self.store.update(eid, change)

    def check_reconcilable(self, episode_id: EpisodeLike, name: str) -> Effect:
        """The effect, if it may be reconciled now; else `NotReconcilable`."""
        ep = self.store.get(episode_id)
        effect = ep.effects.get(validate_effect_name(name))
        if effect is None:
            raise NotReconcilable(
                ep.episode_id, "absent", "the episode has no effect of that name", what=f"effect {name}"
            )
        if effect.state not in (_E.PENDING, _E.UNKNOWN):
            reason = "only an unknown effect (or a pending one whose runner is gone) can be settled"
            raise NotReconcilable(ep.episode_id, effect.state.value, reason, what=f"effect {name}")
        if effect.state is _E.PENDING and self._claim_alive(ep.episode_id, name, effect):
            reason = f"its runner {effect.claimed_by} is still running"
            raise NotReconcilable(ep.episode_id, "pending", reason, what=f"effect {name}")
        return effect

    # -- records ---------------------------------------------------------------------------------
    def _claim(self, eid: str, name: str) -> dict[str, Any]:
        claims.enter(self.store.location, _claim_key(eid, name))
        return {"claimed_by": claims.my_claim(), "claimed_at": self.clock().isoformat()}

    def _claimed(self, ep: Episode, name: str, effect: Effect, note: str) -> Episode:
        claim = self._claim(ep.episode_id, name)
        moved = self._move(ep, name, effect, _E.PENDING, note, attempts=effect.attempts + 1, error=None, **claim)
        return _with(ep, name, moved)

    @staticmethod
    def _move(ep: Episode, name: str, effect: Effect, state: EffectState, note: str, **changes: Any) -> Effect:
        return effect.moved_to(state, episode_id=ep.episode_id, name=name, note=note, **changes)

    def _claim_alive(self, eid: str, name: str, effect: Effect) -> bool:
        try:
            return claims.claim_alive(
                self.store.location,
                _claim_key(eid, name),
                effect.claimed_by or "",
                effect.claimed_at,
                self.clock(),
                self.claim_lease,
            )
        except (TypeError, ValueError) as exc:
            where = f"{self.store.location} (episode {eid}, effect {name})"
            raise StoreCorrupted(where, f"unreadable effect claim: {exc}") from exc


def _with(ep: Episode, name: str, effect: Effect) -> Episode:
    """The episode with ``effect`` under ``name`` (a new one last); its status is the paid call's alone."""
    return dataclasses.replace(ep, effects={**ep.effects, name: effect}, updated_at=effect.updated_at)


def _claim_key(eid: str, name: str) -> str:
    """The key `paid.claims` tracks this process's runs by: an episode's effect, never its submission."""
    return f"{eid}\x00effect\x00{name}"


def _looked_up(lookup: Lookup, token: str) -> Happened | None:
    happened = lookup(token)
    if happened is not None and not isinstance(happened, Happened):
        raise TypeError(f"an effect's lookup must return Happened or None, not {type(happened).__name__}")
    return happened


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
