"""A week of episodes with effects in every state, made by the real effects ledger on a real store.

Shared by the read model's tests and the ``show``/``report`` commands'. Where only time can make a
state (a ``pending`` intent written by a runner on another host, hours ago), the record is moved by
a store update that follows the ledger's own transition (`Effect.begun`), as that runner did.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.effect import Effect
from airflow_idempotent_jobs.effects import EffectLedger, EffectNotDone, EffectStateUnknown
from airflow_idempotent_jobs.episode import Episode, EpisodeStatus, SubmissionState

WEEK = "2026-W32"
#: The claim a runner on another host wrote (an earlier release's form: alive until the lease ends).
ELSEWHERE = "worker-7.example:4242:abcd1234"


@dataclass(frozen=True)
class EffectsScenario:
    """Episode ids by what their effects show."""

    plain: str  # no effect at all
    settled: str  # ``publish`` done, ``notify:slack`` failed (its body said not done)
    unknown: str  # ``publish`` unknown (its body raised)
    stale: str  # ``publish[3]`` pending, claimed elsewhere two hours ago; its submission too
    fresh: str  # ``publish`` pending, claimed elsewhere a minute ago
    garbled: str  # ``publish`` pending with a claim time nobody can read


def pending_elsewhere(store: EpisodeStore, eid: str, name: str, claimed_at: str) -> None:
    token = EffectLedger(store).token_for(eid, name)

    def change(ep: Episode) -> Episode:
        effect = Effect.begun(
            token,
            episode_id=eid,
            name=name,
            note="intent written before running the effect",
            attempts=1,
            claimed_by=ELSEWHERE,
            claimed_at=claimed_at,
        )
        return dataclasses.replace(ep, effects={**ep.effects, name: effect}, updated_at=effect.updated_at)

    store.update(eid, change)


def _submitting_elsewhere(store: EpisodeStore, eid: str, at: dt.datetime) -> None:
    def change(ep: Episode) -> Episode:
        sub = ep.submission.moved_to(
            SubmissionState.SUBMITTING,
            episode_id=eid,
            note="intent written before calling the provider",
            token="tok-" + eid,
            attempts=1,
            claimed_by=ELSEWHERE,
            claimed_at=at.isoformat(),
        )
        return dataclasses.replace(ep, submission=sub, status=EpisodeStatus.RUNNING, updated_at=sub.updated_at)

    store.update(eid, change)


def build_effects(store: EpisodeStore, now: dt.datetime) -> EffectsScenario:
    ledger = EffectLedger(store)

    def alloc(key: str) -> str:
        return store.allocate(WEEK, key).episode_id

    def lost(token: str) -> None:
        raise RuntimeError("the target's answer was lost")

    def refused(token: str) -> None:
        raise EffectNotDone("the target said 400")

    plain = alloc("plain")
    settled = alloc("settled")
    ledger.run(settled, "publish", lambda token: {"ref": "post-1", "url": "https://example.invalid/1"})
    with pytest.raises(EffectNotDone):
        ledger.run(settled, "notify:slack", refused)
    unknown = alloc("unknown")
    with pytest.raises(EffectStateUnknown):
        ledger.run(unknown, "publish", lost)
    stale = alloc("stale")
    _submitting_elsewhere(store, stale, now - dt.timedelta(hours=2))
    pending_elsewhere(store, stale, "publish[3]", (now - dt.timedelta(hours=2)).isoformat())
    fresh = alloc("fresh")
    pending_elsewhere(store, fresh, "publish", (now - dt.timedelta(minutes=1)).isoformat())
    garbled = alloc("garbled")
    pending_elsewhere(store, garbled, "publish", "last tuesday")
    return EffectsScenario(plain, settled, unknown, stale, fresh, garbled)
