"""A process that runs one effect of an episode, and can die by SIGKILL at a step of the write order.

Usage: ``python -m tests.effects.effect_child STORE EPISODE NAME SINK [--kill STEP] [--capability C]
[--started FILE --release FILE]``. The body appends its token to SINK (opened with O_APPEND); with
``--capability idempotent_key`` or ``lookup`` the sink is a target that honours the token: it
appends only a token it has not seen. STEP: ``after-intent`` (the body starts and dies before the
sink), ``after-sink`` (the sink has the line, the outcome is not recorded), ``after-done`` (the
outcome is recorded, the caller never hears of it). The last line printed is the outcome as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.effects import EffectLedger, Happened
from airflow_idempotent_jobs.errors import IdempotentJobsError

#: How long a held body waits for its release file (guards a hang, not a timing).
HOLD_DEADLINE = 60.0


def sink_lines(sink: Path) -> list[str]:
    return sink.read_text().splitlines() if sink.exists() else []


def append(sink: Path, line: str) -> None:
    fd = os.open(sink, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("store")
    p.add_argument("episode_id")
    p.add_argument("name")
    p.add_argument("sink", type=Path)
    p.add_argument("--kill", choices=["after-intent", "after-sink", "after-done"])
    p.add_argument("--capability", default="none")
    p.add_argument("--started", type=Path)
    p.add_argument("--release", type=Path)
    args = p.parse_args()
    honours = args.capability != "none"

    def body(token: str) -> Any:
        if args.started is not None:
            args.started.write_text(str(os.getpid()))
        if args.release is not None:
            give_up = time.monotonic() + HOLD_DEADLINE
            while not args.release.exists():
                if time.monotonic() > give_up:
                    raise TimeoutError("never released")
                time.sleep(0.01)
        if args.kill == "after-intent":
            os.kill(os.getpid(), signal.SIGKILL)
        if not (honours and token in sink_lines(args.sink)):
            append(args.sink, token)
        if args.kill == "after-sink":
            os.kill(os.getpid(), signal.SIGKILL)
        return {"ref": f"line-{sink_lines(args.sink).index(token)}"}

    def lookup(token: str) -> Happened | None:
        lines = sink_lines(args.sink)
        return Happened({"ref": f"line-{lines.index(token)}"}) if token in lines else None

    with open_store(args.store) as store:
        ledger = EffectLedger(store)
        try:
            run = ledger.run(args.episode_id, args.name, body, capability=args.capability, lookup=lookup)
        except IdempotentJobsError as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
            return
        if args.kill == "after-done":
            os.kill(os.getpid(), signal.SIGKILL)
        print(json.dumps({"ran": run.ran, "result": run.result, "state": run.effect.state.value}))


if __name__ == "__main__":
    main()
