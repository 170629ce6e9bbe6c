"""``check`` names effects that contradict themselves, on both stores; what the ledger writes passes it.

The ledger never writes these records: each case is a record written around the store (by hand, or
by a writer that bypassed the ledger), read as it stands, and named by `record_rules.effect_problems`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.effects import EffectLedger
from airflow_idempotent_jobs.errors import EffectNotDone, EffectStateUnknown
from airflow_idempotent_jobs.store_check import check_store
from tests.backends import Backend
from tests.clirun import run_cli

W32 = "2026-W32"

Effects = dict[str, dict[str, Any]]


def _crash(token: str) -> None:
    raise RuntimeError(f"lost the answer for {token}")


def _not_done(token: str) -> None:
    raise EffectNotDone("the target said no")


def _ledger_records(store: EpisodeStore) -> tuple[Effects, dict[str, Any]]:
    """What the ledger writes: one episode with a done, a failed and a reconciled effect; and a
    ``pending`` effect as the record held it while its body ran."""
    eid = store.allocate(W32, "by-the-ledger").episode_id
    ledger = EffectLedger(store)
    seen: list[dict[str, Any]] = []

    def publish(token: str) -> str:
        seen.append(store.get(eid).effects["publish"].to_dict())
        return "posted"

    ledger.run(eid, "publish", publish)
    with pytest.raises(EffectNotDone):
        ledger.run(eid, "notify", _not_done)
    with pytest.raises(EffectStateUnknown):
        ledger.run(eid, "upload", _crash)
    ledger.reconcile(eid, "upload", not_done=True, settled_by="alice")
    effects = store.get(eid).to_record()["effects"]
    assert {name: e["state"] for name, e in effects.items()} == {
        "publish": "done",
        "notify": "failed",
        "upload": "failed",
    }
    assert effects["upload"]["settled_by"] == "alice" and seen[0]["state"] == "pending"
    return effects, seen[0]


def _set(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda effect: effect.update(fields)


def _history_ends_pending(effect: dict[str, Any]) -> None:
    effect["history"] = effect["history"][:-1]


def _last_leaves_failed(effect: dict[str, Any]) -> None:
    effect["history"][-1]["from"] = "failed"


def _unknown_state_in_history(effect: dict[str, Any]) -> None:
    effect["history"][0]["to"] = "exploded"


#: (case, which record: done ``publish``, settled ``upload`` or the ``pending`` one, the change, the findings)
CASES: list[tuple[str, str, Callable[[dict[str, Any]], None], list[str]]] = [
    ("no token", "publish", _set(token=""), ["done without a token"]),
    (
        "done whose history does not end in done",
        "publish",
        _history_ends_pending,
        ["state done disagrees with its history, which ends in pending"],
    ),
    (
        "pending without its claim",
        "pending",
        _set(claimed_by=None),
        ["pending without claimed_by and claimed_at (no one can tell whether its runner is alive)"],
    ),
    (
        "fewer attempts than runs",
        "publish",
        _set(attempts=0),
        ["attempts 0 is fewer than the 1 runs its history records"],
    ),
    (
        "a state its history does not end in",
        "pending",
        _set(state="unknown"),
        ["state unknown disagrees with its history, which ends in pending"],
    ),
    (
        "settled_* partly set",
        "upload",
        _set(settled_how=None),
        ["settled_by, settled_at and settled_how are partly set"],
    ),
    (
        "a history that leaves the wrong state",
        "publish",
        _last_leaves_failed,
        ["history leaves failed but was in pending", "history moves illegally from failed to done"],
    ),
    (
        "a history with an unknown state",
        "publish",
        _unknown_state_in_history,
        ["history entry 0 has an unknown state: from None to 'exploded'"],
    ),
]


def _expected(eid: str, findings: list[str]) -> list[str]:
    return [f"episode {eid}: effect publish: {finding}" for finding in findings]


@pytest.mark.parametrize(("case", "which", "change", "findings"), CASES, ids=[c[0] for c in CASES])
def test_check_names_each_incoherent_effect_and_nothing_in_what_the_ledger_wrote(
    backend: Backend, store: EpisodeStore, case: str, which: str, change: Callable[..., None], findings: list[str]
) -> None:
    effects, pending = _ledger_records(store)
    assert check_store(store) == []  # what the ledger wrote, done, failed and settled, is coherent
    effect = copy.deepcopy(pending if which == "pending" else effects[which])
    change(effect)
    eid = store.allocate(W32, "by-hand").episode_id
    backend.write_effects(eid, {"publish": effect})
    assert store.get(eid).effects["publish"].state.value == effect["state"]  # readable: only incoherent
    problems = check_store(store)
    assert [p.message for p in problems] == _expected(eid, findings), case
    assert all(eid in p.where for p in problems)


def test_the_check_command_names_them_all_and_exits_1(backend: Backend, store: EpisodeStore) -> None:
    effects, pending = _ledger_records(store)
    clean = store.list(W32)[0].episode_id
    wanted = []
    for n, (_case, which, change, findings) in enumerate(CASES):
        effect = copy.deepcopy(pending if which == "pending" else effects[which])
        change(effect)
        eid = store.allocate(W32, f"by-hand:{n}").episode_id
        backend.write_effects(eid, {"publish": effect})
        wanted += _expected(eid, findings)
    done = run_cli("--store", backend.url, "check")
    assert done.code == 1, (done.stdout, done.stderr)
    shown = [line for line in done.stdout.splitlines() if ": episode " in line]
    assert [line.split(": episode ", 1)[1] for line in shown] == [w.split("episode ", 1)[1] for w in wanted]
    assert clean not in done.stdout
