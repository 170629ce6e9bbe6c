"""Real processes, real SIGKILL: an effect's runner dies at each step of the write order, or two run it at once.

Each case kills a child running the effect (tests/effects/effect_child.py), then runs the same
effect again in a fresh process, and reads what the sink (the outside world) recorded.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.effect import EffectState
from tests.backends import Backend
from tests.clirun import CHILD_TIMEOUT
from tests.effects.effect_child import sink_lines

REPO = Path(__file__).resolve().parents[2]
NAME = "publish:cdn"


def child(backend: Backend, eid: str, sink: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.effects.effect_child", backend.url, eid, NAME, str(sink), *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def outcome(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=CHILD_TIMEOUT)
    assert process.returncode == 0, err[-3000:]
    answer: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return answer


def killed(process: subprocess.Popen[str]) -> None:
    _, err = process.communicate(timeout=CHILD_TIMEOUT)
    assert process.returncode == -signal.SIGKILL, err[-3000:]


@pytest.fixture
def eid(backend: Backend) -> str:
    with backend.open() as store:
        return store.allocate("2026-W53", "airflow:weekly:allocate:scheduled__2026-12-28").episode_id


#: (kill step, capability) -> (the retry's outcome, lines in the sink after the retry).
CASES = {
    ("after-intent", "none"): ("EffectStateUnknown", 0),
    ("after-sink", "none"): ("EffectStateUnknown", 1),
    ("after-done", "none"): ("returned", 1),
    ("after-intent", "idempotent_key"): ("ran", 1),
    ("after-sink", "idempotent_key"): ("ran", 1),
    ("after-done", "idempotent_key"): ("returned", 1),
    ("after-intent", "lookup"): ("ran", 1),
    ("after-sink", "lookup"): ("returned", 1),
    ("after-done", "lookup"): ("returned", 1),
}


@pytest.mark.parametrize(("step", "capability"), sorted(CASES))
def test_a_sigkill_at_each_step_never_runs_the_effect_twice(
    backend: Backend, eid: str, tmp_path: Path, step: str, capability: str
) -> None:
    sink = tmp_path / "sink.log"
    killed(child(backend, eid, sink, "--kill", step, "--capability", capability))
    retry = outcome(child(backend, eid, sink, "--capability", capability))
    want, lines = CASES[(step, capability)]
    got = retry.get("error") or ("ran" if retry["ran"] else "returned")
    assert got == want, retry
    assert len(sink_lines(sink)) == lines
    with backend.open() as store:
        effect = store.get(eid).effects[NAME]
    if want == "EffectStateUnknown":
        assert f"idempotent-jobs reconcile {eid} --effect {NAME}" in retry["message"]
        assert effect.state is EffectState.UNKNOWN
    else:
        assert effect.state is EffectState.DONE
        assert retry.get("result") == {"ref": "line-0"} == effect.result
    # And once more: whatever the retry settled stays settled.
    again = outcome(child(backend, eid, sink, "--capability", capability))
    assert again.get("error", "returned" if not again.get("ran") else "ran") == (
        "EffectStateUnknown" if want == "EffectStateUnknown" else "returned"
    )
    assert len(sink_lines(sink)) == lines


def test_two_processes_running_one_effect_at_once_run_it_once(backend: Backend, eid: str, tmp_path: Path) -> None:
    sink, started, release = tmp_path / "sink.log", tmp_path / "started", tmp_path / "release"
    first = child(backend, eid, sink, "--started", str(started), "--release", str(release))
    give_up = time.monotonic() + CHILD_TIMEOUT
    while not started.exists():  # the first holds the effect, inside its body
        assert first.poll() is None and time.monotonic() < give_up
        time.sleep(0.01)
    second = outcome(child(backend, eid, sink))
    assert second["error"] == "EffectInProgress", second
    assert sink_lines(sink) == []
    release.write_text("go")
    assert outcome(first) == {"ran": True, "result": {"ref": "line-0"}, "state": "done"}
    assert len(sink_lines(sink)) == 1
    third = outcome(child(backend, eid, sink))
    assert third == {"ran": False, "result": {"ref": "line-0"}, "state": "done"}
