"""One paid step through a Bedrock provider in its own process, killed (SIGKILL, by itself) at a point.

`run` is the target of a process forked by a forkserver that imported this module once (boto3's
import and its service model are most of a fresh interpreter's start). SPEC: ``{"store", "episode",
"url", "kill": POINT, "poll"}``; the points are tests/paid/_child.py's. boto3 keeps its default retries,
with a read timeout long enough that a held answer is still on its way when the parent kills this
process. Prints the final submission as one JSON line; exit 0, or 3 when it is still unknown.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.errors import ProviderOutcomeUnknown
from airflow_idempotent_jobs.paid import SubmissionLedger, wait_for_terminal
from airflow_idempotent_jobs.vendors.bedrock import BedrockAsyncInvokeProvider
from tests.paid._child import arm_kill_point, die
from tests.vendors.bedrock.batch_support import JOB, batch_provider_at
from tests.vendors.bedrock.support import PRICES, START, runtime_client
from tests.vendors.forked_steps import run_forked

#: A batch's price is not in its request (its records are in S3): the step gives this estimate.
BATCH_ESTIMATE = 1.0


def main(spec: dict[str, Any]) -> int:
    kill = spec.get("kill")
    store = open_store(spec["store"])
    provider: Any
    if spec.get("api") == "batch_inference":
        provider, request, estimate = batch_provider_at(spec["url"], read_timeout=60), JOB, BATCH_ESTIMATE
    else:
        provider = BedrockAsyncInvokeProvider(lambda: runtime_client(spec["url"], read_timeout=60), prices=PRICES)
        request, estimate = START, provider.worst_case(START)
    arm_kill_point(kill, store, provider)
    ledger = SubmissionLedger(store)
    try:
        episode = ledger.submit(spec["episode"], provider, request, estimated_cost=estimate)
        if kill == "after_saved":
            die()
        if spec.get("poll"):
            episode = wait_for_terminal(
                ledger, spec["episode"], provider, timeout=30, initial_delay=0.01, max_delay=0.2
            )
    except ProviderOutcomeUnknown as exc:
        print(json.dumps({"error": "ProviderOutcomeUnknown", "message": str(exc)}))
        return 3
    sub = episode.submission
    print(
        json.dumps(
            {
                "state": sub.state.value,
                "remote_ref": sub.remote_ref,
                "estimated_cost": sub.estimated_cost,
                "cost": sub.cost,
            }
        )
    )
    return 0


def run(spec: dict[str, Any], env: dict[str, str], out: str) -> None:
    """The forked process's target (`forked_steps.run_forked`)."""
    run_forked(main, spec, env, out)


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
