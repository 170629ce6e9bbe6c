"""The effects ledger on both stores: each named effect of an episode runs at most once.

The sink is a file opened with O_APPEND (one line per call of the body): what the outside world saw.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.effect import MAX_EFFECTS, EffectState
from airflow_idempotent_jobs.effects import (
    EffectCapability,
    EffectInputConflict,
    EffectLedger,
    EffectNotDone,
    EffectStateUnknown,
    Happened,
    effect_token,
)
from airflow_idempotent_jobs.errors import InvalidIdentifier, InvalidRequest, NotReconcilable
from airflow_idempotent_jobs.paid.ledger import idempotency_token
from tests.backends import Backend


class Sink:
    """A file the body appends one line to per call, as an external target would record it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, line: str) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []


@pytest.fixture
def sink(tmp_path: Path) -> Sink:
    return Sink(tmp_path / "sink.log")


@pytest.fixture
def episode_id(store: EpisodeStore) -> str:
    return store.allocate("2026-W32", "airflow:weekly:allocate:scheduled__2026-08-03").episode_id


def publisher(sink: Sink, result: Any = None) -> Any:
    def body(token: str) -> Any:
        sink.append(token)
        return {"url": f"https://cdn.example/{len(sink.lines())}"} if result is None else result

    return body


def failing(sink: Sink, exc: BaseException) -> Any:
    def body(token: str) -> Any:
        sink.append(token)
        raise exc

    return body


def test_an_effect_runs_once_and_a_retry_returns_its_recorded_result(
    store: EpisodeStore, episode_id: str, sink: Sink
) -> None:
    ledger = EffectLedger(store)
    first = ledger.run(episode_id, "publish", publisher(sink), inputs={"video": "v1"})
    again = ledger.run(episode_id, "publish", publisher(sink), inputs={"video": "v1"})
    assert (first.ran, again.ran) == (True, False)
    assert first.result == again.result == {"url": "https://cdn.example/1"}
    assert sink.lines() == [ledger.token_for(episode_id, "publish")]
    effect = store.get(episode_id).effects["publish"]
    assert effect.state is EffectState.DONE and effect.attempts == 1
    assert [(h["from"], h["to"]) for h in effect.history] == [(None, "pending"), ("pending", "done")]


def test_effects_of_one_episode_are_independent(store: EpisodeStore, episode_id: str, sink: Sink) -> None:
    ledger = EffectLedger(store)
    for name in ("upload:cdn", "publish", "notify:slack", "publish[2]"):
        ledger.run(episode_id, name, publisher(sink))
    assert list(store.get(episode_id).effects) == ["notify:slack", "publish", "publish[2]", "upload:cdn"]
    tokens = sink.lines()
    assert len(set(tokens)) == 4


def test_the_token_is_stable_and_distinct_from_the_paid_token_and_other_stores(store: EpisodeStore) -> None:
    eid = "2026-W32-0"
    token = effect_token(store.identity, eid, "publish")
    assert token == effect_token(store.identity, eid, "publish")
    assert token not in {
        effect_token(store.identity, eid, "notify"),
        effect_token(store.identity + "-staging", eid, "publish"),
        effect_token(store.identity, "2026-W32-1", "publish"),
        idempotency_token(store.identity, eid),
    }
    assert token.startswith("aij-2026-W32-0-fx-") and len(token) <= 64 and token.isascii()


def test_a_body_that_raises_leaves_the_effect_unknown_and_it_is_never_run_again_blindly(
    store: EpisodeStore, episode_id: str, sink: Sink
) -> None:
    ledger = EffectLedger(store)
    with pytest.raises(EffectStateUnknown) as raised:
        ledger.run(episode_id, "notify:slack", failing(sink, ConnectionResetError("reset after sending")))
    assert "idempotent-jobs reconcile 2026-W32-0 --effect notify:slack" in str(raised.value)
    assert raised.value.exit_code == 3 and not raised.value.retryable
    for _ in range(2):
        with pytest.raises(EffectStateUnknown):
            ledger.run(episode_id, "notify:slack", publisher(sink))
    assert len(sink.lines()) == 1
    effect = store.get(episode_id).effects["notify:slack"]
    assert effect.state is EffectState.UNKNOWN and "reset after sending" in (effect.error or "")


def test_with_a_key_the_target_honours_an_unknown_effect_runs_again_with_the_same_token(
    store: EpisodeStore, episode_id: str, sink: Sink
) -> None:
    ledger = EffectLedger(store)
    with pytest.raises(ConnectionResetError):  # the body's own error: a retry settles it
        ledger.run(episode_id, "upload:cdn", failing(sink, ConnectionResetError()), capability="idempotent_key")
    run = ledger.run(episode_id, "upload:cdn", publisher(sink), capability=EffectCapability.IDEMPOTENT_KEY)
    assert run.ran and run.effect.attempts == 2
    first, second = sink.lines()
    assert first == second == ledger.token_for(episode_id, "upload:cdn")


def test_with_a_lookup_an_unknown_effect_is_adopted_or_run_once(
    store: EpisodeStore, episode_id: str, sink: Sink
) -> None:
    ledger = EffectLedger(store)
    seen: list[str] = []

    def found(token: str) -> Happened | None:
        seen.append(token)
        return Happened({"message_id": "m-1"}) if token in sink.lines() else None

    with pytest.raises(TimeoutError):
        body = failing(sink, TimeoutError("read timed out"))
        ledger.run(episode_id, "notify", body, capability="lookup", lookup=found)
    adopted = ledger.run(episode_id, "notify", publisher(sink), capability="lookup", lookup=found)
    assert not adopted.ran and adopted.result == {"message_id": "m-1"} and len(sink.lines()) == 1

    def never_sent(token: str) -> None:
        raise ConnectionRefusedError("refused before sending")

    with pytest.raises(TimeoutError):
        ledger.run(episode_id, "mail", failing(sink, TimeoutError()), capability="lookup", lookup=found)
    sink.path.write_text("")  # the target lost it: the lookup proves it did not happen
    ran = ledger.run(episode_id, "mail", publisher(sink), capability="lookup", lookup=found)
    assert ran.ran and sink.lines() == [ledger.token_for(episode_id, "mail")]
    assert seen.count(ledger.token_for(episode_id, "mail")) == 1
    with pytest.raises(OSError):
        ledger.run(episode_id, "x", failing(sink, OSError()), capability="lookup", lookup=never_sent)
    with pytest.raises(ConnectionRefusedError):  # a lookup that fails leaves it unknown
        ledger.run(episode_id, "x", publisher(sink), capability="lookup", lookup=never_sent)
    assert store.get(episode_id).effects["x"].state is EffectState.UNKNOWN


def test_a_body_that_says_not_done_is_failed_and_a_retry_runs_it_again(
    store: EpisodeStore, episode_id: str, sink: Sink
) -> None:
    ledger = EffectLedger(store)
    with pytest.raises(EffectNotDone):
        ledger.run(episode_id, "publish", failing(sink, EffectNotDone("503 before anything was stored")))
    assert store.get(episode_id).effects["publish"].state is EffectState.FAILED
    run = ledger.run(episode_id, "publish", publisher(sink))
    assert run.ran and run.effect.state is EffectState.DONE and run.effect.attempts == 2
    assert len(sink.lines()) == 2


def test_not_done_after_an_unknown_run_stays_unknown(store: EpisodeStore, episode_id: str, sink: Sink) -> None:
    """A run that certainly did nothing says nothing of the earlier run whose outcome was lost."""
    ledger = EffectLedger(store)
    with pytest.raises(OSError):
        ledger.run(episode_id, "publish", failing(sink, OSError()), capability="idempotent_key")
    with pytest.raises(EffectNotDone):
        ledger.run(episode_id, "publish", failing(sink, EffectNotDone()), capability="idempotent_key")
    assert store.get(episode_id).effects["publish"].state is EffectState.UNKNOWN


def test_other_inputs_on_a_retry_are_refused_and_nothing_runs(
    backend: Backend, store: EpisodeStore, episode_id: str, sink: Sink
) -> None:
    ledger = EffectLedger(store)
    ledger.run(episode_id, "publish", publisher(sink), inputs={"video": "v1"})
    before = backend.snapshot()
    for other in ({"video": "v2"}, None):
        with pytest.raises(EffectInputConflict) as raised:
            ledger.run(episode_id, "publish", publisher(sink), inputs=other)
        assert raised.value.exit_code == 3
    assert backend.snapshot() == before and len(sink.lines()) == 1


@pytest.mark.parametrize(
    "name", ["", "publish\n", "pub\x00lish", "notify slack", "../publish", "-x", "a" * 121, "p[1", "p[1234567]", "é"]
)
def test_hostile_effect_names_are_refused_before_anything_is_written(
    backend: Backend, store: EpisodeStore, episode_id: str, sink: Sink, name: str
) -> None:
    before = backend.snapshot()
    with pytest.raises(InvalidIdentifier) as raised:
        EffectLedger(store).run(episode_id, name, publisher(sink))
    assert "\n" not in str(raised.value) and "\x00" not in str(raised.value)
    assert backend.snapshot() == before and sink.lines() == []


def test_an_episode_holds_at_most_max_effects_and_the_next_is_refused_without_a_write(
    backend: Backend, store: EpisodeStore, episode_id: str
) -> None:
    ledger = EffectLedger(store)
    full = store.update(episode_id, lambda ep: ep)  # fill the record in one write, as 1 000 runs would
    from airflow_idempotent_jobs.effect import Effect

    filled = {
        f"publish[{i}]": Effect.begun(
            ledger.token_for(episode_id, f"publish[{i}]"), episode_id=episode_id, name=f"publish[{i}]", note="t"
        ).moved_to(EffectState.DONE, episode_id=episode_id, name=f"publish[{i}]", result={"i": i})
        for i in range(MAX_EFFECTS)
    }
    import dataclasses

    store.update(episode_id, lambda ep: dataclasses.replace(full, effects=filled, updated_at=ep.updated_at))
    assert len(store.get(episode_id).effects) == MAX_EFFECTS
    again = ledger.run(episode_id, "publish[7]", lambda token: {"ran": True})
    assert not again.ran and again.result == {"i": 7}
    before = backend.snapshot()
    with pytest.raises(InvalidRequest, match=f"already holds {MAX_EFFECTS} effects"):
        ledger.run(episode_id, f"publish[{MAX_EFFECTS}]", lambda token: None)
    assert backend.snapshot() == before


def test_a_huge_result_is_left_out_and_identified(store: EpisodeStore, episode_id: str) -> None:
    ledger = EffectLedger(store, result_limit=1024)
    run = ledger.run(episode_id, "upload", lambda token: {"blob": "x" * 5000})
    assert run.effect.state is EffectState.DONE and run.result is None
    omitted = run.effect.result_omitted
    assert omitted is not None and omitted.limit == 1024 and omitted.size is not None and omitted.size > 5000
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    for n, odd in enumerate((float("inf"), float("nan"), object(), deep)):

        def body(token: str, odd: Any = odd) -> Any:
            return odd

        done = ledger.run(episode_id, f"odd:{n}", body)
        assert done.result is None and done.effect.result_omitted is not None
    assert store.get(episode_id).effects["upload"].result_omitted == omitted


def test_reconcile_settles_an_unknown_effect_each_way(store: EpisodeStore, episode_id: str, sink: Sink) -> None:
    ledger = EffectLedger(store)
    for name in ("a", "b", "c"):
        with pytest.raises(EffectStateUnknown):
            ledger.run(episode_id, name, failing(sink, OSError("lost")))
    done = ledger.reconcile(episode_id, "a", done_ref="msg-42", settled_by="ops@host", comment="seen in Slack")
    effect = done.effects["a"]
    assert effect.state is EffectState.DONE and effect.result == {"ref": "msg-42"}
    assert effect.settled_by == "ops@host" and "seen in Slack" in (effect.settled_how or "")
    assert not ledger.run(episode_id, "a", publisher(sink)).ran

    ledger.reconcile(episode_id, "b", not_done=True, settled_by="ops@host")
    assert ledger.run(episode_id, "b", publisher(sink)).ran

    ledger.reconcile(episode_id, "c", lookup=lambda token: Happened({"ref": "found"}), settled_by="ops@host")
    assert store.get(episode_id).effects["c"].result == {"ref": "found"}
    assert len(sink.lines()) == 4  # a, b, c once each, b once more after "not done"


def test_reconcile_refuses_what_is_not_in_doubt_and_writes_nothing(
    backend: Backend, store: EpisodeStore, episode_id: str, sink: Sink
) -> None:
    ledger = EffectLedger(store)
    ledger.run(episode_id, "publish", publisher(sink))
    before = backend.snapshot()
    for name in ("publish", "absent"):
        with pytest.raises(NotReconcilable):
            ledger.reconcile(episode_id, name, not_done=True, settled_by="ops")
    with pytest.raises(ValueError):
        ledger.reconcile(episode_id, "publish", not_done=True, done_ref="x", settled_by="ops")
    with pytest.raises(ValueError):
        ledger.reconcile(episode_id, "publish", done_ref=" ", settled_by="ops")
    assert backend.snapshot() == before


def test_a_planted_record_with_10_000_effects_is_refused_on_read_not_loaded(tmp_path: Path) -> None:
    """A record no writer of this package makes (more than MAX_EFFECTS): the store fails closed on it."""
    import json

    from airflow_idempotent_jobs import open_store
    from airflow_idempotent_jobs.errors import StoreCorrupted
    from tests.backends import FileBackend

    backend = FileBackend(tmp_path / "store")
    with backend.open() as store:
        eid = store.allocate("2026-W32", "k").episode_id
        EffectLedger(store).run(eid, "publish", lambda token: {"ref": "r"})
    path = backend.state_path(eid)
    record = json.loads(path.read_text())
    one = record["effects"]["publish"]
    record["effects"] = {f"publish[{i}]": one for i in range(10_000)}
    path.write_text(json.dumps(record))
    with open_store(backend.url) as store, pytest.raises(StoreCorrupted) as raised:
        store.get(eid)
    message = str(raised.value)
    assert "10000 effects, more than 1000" in message and "\n" not in message and len(message) < 400


@pytest.mark.parametrize("how", ["dropped", "done changed", "history rewritten"])
def test_an_update_that_drops_or_rewrites_an_effect_is_refused_on_both_stores(
    backend: Backend, store: EpisodeStore, episode_id: str, how: str
) -> None:
    """The store's own rule (PostgreSQL's trigger says the same to writers that bypass it)."""
    import dataclasses

    from airflow_idempotent_jobs.errors import IllegalTransition

    ledger = EffectLedger(store)
    ledger.run(episode_id, "publish", lambda token: {"ref": "r1"})
    with pytest.raises(EffectStateUnknown):
        ledger.run(episode_id, "notify", failing(Sink(Path(os.devnull)), OSError()))

    def change(ep: Any) -> Any:
        effects = dict(ep.effects)
        if how == "dropped":
            del effects["notify"]
        elif how == "done changed":
            effects["publish"] = dataclasses.replace(effects["publish"], result={"ref": "forged"})
        else:
            effects["notify"] = dataclasses.replace(effects["notify"], history=effects["notify"].history[1:])
        return dataclasses.replace(ep, effects=effects)

    before = backend.snapshot()
    with pytest.raises(IllegalTransition, match=r"effect (publish|notify) cannot go"):
        store.update(episode_id, change)
    assert backend.snapshot() == before
