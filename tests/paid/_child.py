"""One paid step in its own process, killed (SIGKILL, by itself) at an exact point if asked.

Usage: ``python _child.py '{"store": ..., "episode": ..., "config": {...}, "kill": POINT, "poll": bool}'``,
credential in ``$PAID_TEST_AUTH``. Kill points wrap the real objects of this process only:
``before_intent`` (the store's first write), ``after_intent`` (entering ``provider.submit``),
``after_answer`` (``provider.submit`` returned, nothing saved yet), ``after_saved`` (after
``ledger.submit`` returned). Prints the final submission as one JSON line.
Exit codes: 0 ok, 3 SubmissionStateUnknown, 75 SubmissionInProgress.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from airflow_idempotent_jobs import SubmissionStateUnknown, open_store
from airflow_idempotent_jobs.paid import SubmissionInProgress, SubmissionLedger, wait_for_terminal
from airflow_idempotent_jobs.paid.http import HttpPaidProvider, HttpProviderConfig


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> int:
    spec = json.loads(sys.argv[1])
    kill = spec.get("kill")
    store = open_store(spec["store"])
    provider = HttpPaidProvider(
        HttpProviderConfig.from_dict(spec["config"]),
        auth_header="Authorization",
        auth_value=os.environ["PAID_TEST_AUTH"],
    )
    if kill == "before_intent":
        real_update = store.update_in_week

        def update_in_week(*args: Any, **kwargs: Any) -> Any:
            die()
            return real_update(*args, **kwargs)

        store.update_in_week = update_in_week  # type: ignore[method-assign]
    if kill in ("after_intent", "after_answer"):
        real_submit = provider.submit

        def submit(request: Any, token: str) -> str:
            if kill == "after_intent":
                die()
            ref = real_submit(request, token)
            die()
            return ref

        provider.submit = submit  # type: ignore[method-assign,assignment]
    if spec.get("barrier"):
        barrier = Path(spec["barrier"])
        deadline = time.monotonic() + 30
        while not barrier.exists() and time.monotonic() < deadline:
            time.sleep(0.002)
    ledger = SubmissionLedger(store)
    try:
        episode = ledger.submit(spec["episode"], provider, {"prompt": "weekly video", "units": 2})
        if kill == "after_saved":
            die()
        if spec.get("poll"):
            episode = wait_for_terminal(
                ledger, spec["episode"], provider, timeout=30, initial_delay=0.01, max_delay=0.2
            )
    except SubmissionStateUnknown as exc:
        print(json.dumps({"error": "SubmissionStateUnknown", "message": str(exc)}))
        return 3
    except SubmissionInProgress as exc:
        print(json.dumps({"error": "SubmissionInProgress", "message": str(exc)}))
        return 75
    sub = episode.submission
    print(
        json.dumps({"state": sub.state.value, "remote_ref": sub.remote_ref, "cost": sub.cost, "attempts": sub.attempts})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
