"""``make e2e-distributed``: a real CeleryExecutor deployment allocates over the turn of 2020/2021.

Starts (on 127.0.0.1) Airflow's api-server, scheduler, dag-processor and triggerer, two Celery
workers with their own homes, the local provider server and a prediction-style API; backfills
``ij_distributed`` from 2020-12-24 to 2021-01-06 (14 daily runs: 4 in 2020-W52, 7 in 2020-W53, 3 in
2021-W01, up to 7 at a time), whose allocation crashes on its first try; triggers ``ij_no_store``
once, whose store-less allocation must be refused on a worker; and triggers ``ij_custom_provider``
once, which pays through a custom provider hook (an example adapter) whose first answer is lost,
polled by the real triggerer. Then checks that every run owns exactly one episode, sequences are
contiguous per week, and each provider received exactly one job per episode.
Always stops what it started; prints a short report; exit 0 only if every check held.

Run: ``.venv/bin/python -m e2e.distributed [--keep]`` (``--keep`` leaves the work dir and databases).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from e2e.deployment import REPO, Deployment, wait_for
from e2e.verify import Outcome, verify, verify_custom_provider, verify_no_store

DAG_ID = "ij_distributed"
NO_STORE_DAG_ID = "ij_no_store"
CUSTOM_DAG_ID = "ij_custom_provider"
#: The runs triggered once each, besides the backfill.
ONE_OFF_DAG_IDS = (NO_STORE_DAG_ID, CUSTOM_DAG_ID)
FROM_DATE, TO_DATE = "2020-12-24", "2021-01-06"
EXPECTED_RUNS = 14
MAX_ACTIVE_RUNS = 7


def say(text: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {text}", flush=True)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(deployment: Deployment) -> Outcome:
    deployment.start(say)
    started = time.monotonic()
    deployment.airflow(
        "backfill",
        "create",
        "--dag-id",
        DAG_ID,
        "--from-date",
        FROM_DATE,
        "--to-date",
        TO_DATE,
        "--max-active-runs",
        str(MAX_ACTIVE_RUNS),
    )
    for dag_id in ONE_OFF_DAG_IDS:
        deployment.airflow("dags", "trigger", dag_id)
    say(f"backfill {FROM_DATE}..{TO_DATE} created, {', '.join(ONE_OFF_DAG_IDS)} triggered; waiting for their runs")

    def finished() -> bool:
        states = deployment.metadata("SELECT state FROM dag_run WHERE dag_id = %s AND run_type = 'backfill'", DAG_ID)
        one_off = deployment.metadata("SELECT state FROM dag_run WHERE dag_id = ANY(%s)", list(ONE_OFF_DAG_IDS))
        done = [s for (s,) in states + one_off if s in ("success", "failed")]
        expected = EXPECTED_RUNS + len(ONE_OFF_DAG_IDS)
        return len(states) == EXPECTED_RUNS and len(one_off) == len(ONE_OFF_DAG_IDS) and len(done) == expected

    wait_for(f"{EXPECTED_RUNS} backfill runs to finish", finished, timeout=600, every=2.0)
    say(f"all runs finished in {time.monotonic() - started:.0f}s")
    outcome = verify(deployment, DAG_ID)
    verify_no_store(deployment, NO_STORE_DAG_ID, outcome)
    verify_custom_provider(deployment, CUSTOM_DAG_ID, outcome)
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the work dir, logs and databases")
    parser.add_argument("--workdir", type=Path, default=REPO / ".e2e" / "distributed")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _terminate)
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    deployment = Deployment(args.workdir)
    outcome: Outcome | None = None
    try:
        outcome = run(deployment)
    except (Exception, KeyboardInterrupt) as exc:
        say(f"FAILED: {type(exc).__name__}: {exc}")
    finally:
        say("stopping the deployment")
        for problem in deployment.stop(keep_databases=args.keep):
            say(f"stop: {problem}")
        if not args.keep and outcome is not None and outcome.ok:
            shutil.rmtree(args.workdir, ignore_errors=True)
    if outcome is None:
        say(f"logs kept in {args.workdir}")
        return 1
    print(outcome.report(), flush=True)
    if not outcome.ok:
        say(f"logs kept in {args.workdir}")
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
