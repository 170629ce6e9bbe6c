"""What the vendors' crash matrices share: the points a paid step is killed at, what each leaves behind,
and the step itself as a fresh OS process forked by a forkserver that imported the vendor's child
module once (the SDK's import is most of a fresh interpreter's start).

The child module's ``main(spec) -> int`` runs one step and prints its result as the last JSON line;
`run_forked` is the process's target, `start` and `finish` the parent's side.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_idempotent_jobs import SubmissionState

__all__ = ["ACCEPTED_POINTS", "LEFT_BEHIND", "POINTS", "Child", "finish", "preload", "run_forked", "start"]

POINTS = ["before_intent", "after_intent", "in_flight", "after_answer", "after_saved"]
#: The points at which the API has made the job.
ACCEPTED_POINTS = {"in_flight", "after_answer", "after_saved"}
LEFT_BEHIND = {
    "before_intent": SubmissionState.NONE,
    "after_intent": SubmissionState.SUBMITTING,
    "in_flight": SubmissionState.SUBMITTING,
    "after_answer": SubmissionState.SUBMITTING,
    "after_saved": SubmissionState.ACCEPTED,
}

FORKS = multiprocessing.get_context("forkserver")


def preload(module: str) -> None:
    """Have the forkserver import ``module`` (the vendor's child module) once, before its first fork."""
    FORKS.set_forkserver_preload([module])


@dataclass
class Child:
    process: Any
    out: Path

    def kill(self, sig: int) -> None:
        assert self.process.pid is not None
        os.kill(self.process.pid, sig)


def start(target: Callable[..., None], spec: dict[str, Any], store: Path, **env: str) -> Child:
    """``target(spec, env, out)`` in a forked process; its stdout goes to a file beside ``store``."""
    out = store.with_name(f"child-{time.monotonic_ns()}.out")
    process = FORKS.Process(target=target, args=(spec, env, str(out)))
    process.start()
    return Child(process, out)


def finish(child: Child, timeout: float = 60) -> tuple[int, dict[str, Any], str]:
    """The child's exit code, its last JSON line and all it printed."""
    child.process.join(timeout=timeout)
    lines = child.out.read_text().strip().splitlines() if child.out.exists() else []
    return int(child.process.exitcode), json.loads(lines[-1]) if lines else {}, "\n".join(lines)


def run_forked(main: Callable[[dict[str, Any]], int], spec: dict[str, Any], env: dict[str, str], out: str) -> None:
    """In the forked process: stdout to ``out``, ``env`` (a key) in the environment, ``main(spec)``; exits
    with its code (70 when it raised)."""
    code = 70
    try:
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
        os.environ.update(env)
        code = main(spec)
    finally:
        sys.stdout.flush()
        os._exit(code)
