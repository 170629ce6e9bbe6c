"""One paid step through `ReplicatePredictionProvider` in its own process, killed (SIGKILL, by itself) at a point.

`run` is the target of a process forked by a forkserver that imported this module once (the SDK's
import is most of a fresh interpreter's start); ``python _child.py SPEC`` runs one step alone, the
API token in ``$REPLICATE_TEST_TOKEN``. SPEC: ``{"store", "episode", "base_url", "kill": POINT, "poll"}``.
Points: ``before_intent`` (the store's first write), ``after_intent`` (entering ``submit``),
``after_answer`` (``submit`` returned, nothing saved), ``after_saved`` (``ledger.submit``
returned). Prints the final submission as one JSON line; exit 0, or 3 when it is still unknown.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.errors import ProviderOutcomeUnknown, SubmissionStateUnknown
from airflow_idempotent_jobs.paid import SubmissionLedger, wait_for_terminal
from airflow_idempotent_jobs.vendors.replicate.provider import ReplicatePredictionProvider
from tests.paid._child import arm_kill_point, die
from tests.vendors.forked_steps import run_forked
from tests.vendors.replicate.support import PRICES, REQUEST


def main(spec: dict[str, Any]) -> int:
    kill = spec.get("kill")
    store = open_store(spec["store"])
    provider = ReplicatePredictionProvider(
        api_token=os.environ["REPLICATE_TEST_TOKEN"], base_url=spec["base_url"], prices=PRICES, timeout=30.0
    )
    arm_kill_point(kill, store, provider)
    ledger = SubmissionLedger(store)
    try:
        episode = ledger.submit(spec["episode"], provider, REQUEST, estimated_cost=0.85)
        if kill == "after_saved":
            die()
        if spec.get("poll"):
            episode = wait_for_terminal(
                ledger, spec["episode"], provider, timeout=30, initial_delay=0.01, max_delay=0.2
            )
    except (ProviderOutcomeUnknown, SubmissionStateUnknown) as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        return 3
    sub = episode.submission
    print(json.dumps({"state": sub.state.value, "remote_ref": sub.remote_ref, "cost": sub.cost}))
    return 0


def run(spec: dict[str, Any], env: dict[str, str], out: str) -> None:
    """The forked process's target (`forked_steps.run_forked`)."""
    run_forked(main, spec, env, out)


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
