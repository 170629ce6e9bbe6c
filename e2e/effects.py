"""``make e2e-effects``: the effects ledger under a real scheduler, counted through the REST API.

Starts (on 127.0.0.1) the LocalExecutor deployment of e2e/hitl_deployment.py with the DAGs of
e2e/dags_effects/ and the embedded file store, then, in parallel:

a. ``ij_effects_producer`` triggered once and its run cleared three times (``clearTaskInstances``),
   each waited for -> one line in the publish sink, one event on ``idempotent_jobs_e2e_episodes``
   (``GET /api/v2/assets/events``), one ``ij_effects_digest`` run, whose sink holds the episode once;
b. ``ij_effects_kill_none``: publish's process SIGKILLed after its sink answered -> try 2 fails naming
   ``idempotent-jobs reconcile <episode> --effect publish`` without calling the body again, the effect
   is ``unknown`` in the store, one sink line, no event;
c. ``ij_effects_kill_key``: the same with ``effect_capability="idempotent_key"`` and a sink that
   drops a token it has seen -> try 2 calls the body again with the same token and succeeds, one
   sink line, one event;
d. ``ij_effects_weekly``: its scheduled run, then a backfill of that run's date with
   ``reprocess_behavior=completed`` (``POST /api/v2/backfills``; Airflow 3.3 clears the existing run
   in place, keeping its run_id, and makes it a backfill run) -> the same episode, publish's try 2
   succeeds without calling the body, one sink line, one event.

Prints a table (scenario, sink lines, asset events, digest runs). Always stops what it started;
exit 0 only if every check held. Run: ``.venv/bin/python -m e2e.effects [--keep]``.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType
from typing import Any

from airflow_idempotent_jobs import open_store
from e2e.airflow_rest import AirflowRest
from e2e.deployment import REPO, wait_for
from e2e.hitl_deployment import APPROVER, HitlDeployment
from e2e.results import Results, run_deployed

DAG_FILE = REPO / "e2e" / "dags_effects" / "ij_effects.py"
PRODUCER, DIGEST, WEEKLY = "ij_effects_producer", "ij_effects_digest", "ij_effects_weekly"
KILL_NONE, KILL_KEY = "ij_effects_kill_none", "ij_effects_kill_key"
DAG_IDS = (PRODUCER, DIGEST, WEEKLY, KILL_NONE, KILL_KEY)
EPISODES, KILLED = "idempotent_jobs_e2e_episodes", "idempotent_jobs_e2e_killed_episodes"
WEEKLY_EPISODES = "idempotent_jobs_e2e_weekly_episodes"
CLEARS = 3
WAIT = 120.0
#: How long the digest's run count must stay put once every digest run has finished (scheduler loops of 2 s).
SETTLE = 8.0


def say(text: str) -> None:
    print(f"[e2e-effects {time.strftime('%H:%M:%S')}] {text}", flush=True)


class Observer:
    """Reads what happened from outside Airflow's task code: sinks, the store, the REST API."""

    def __init__(self, deployment: HitlDeployment, rest: AirflowRest) -> None:
        self.deployment = deployment
        self.rest = rest
        self.table: list[tuple[str, int, int | str, int | str]] = []

    def sink_lines(self, name: str) -> list[str]:
        path = self.deployment.home("control") / "sinks" / name
        return path.read_text().splitlines() if path.exists() else []

    def episode_id(self, dag_id: str, run_id: str) -> str:
        """The run's episode, found in the store by the allocation key Airflow's allocate task uses."""
        key = f"airflow:{dag_id}:allocate:{run_id}"
        with open_store(str(self.deployment.file_store)) as episodes:
            owned = [e.episode_id for e in episodes.list() if e.allocation_key == key]
        if len(owned) != 1:
            raise RuntimeError(f"{len(owned)} episodes with allocation key {key}")
        return str(owned[0])

    def effect_state(self, episode_id: str) -> str | None:
        with open_store(str(self.deployment.file_store)) as episodes:
            effect = episodes.get(episode_id).effects.get("publish")
        return None if effect is None else effect.state.value

    def events_for(self, asset: str, episode_id: str) -> int | None:
        asset_id = self.rest.asset_id(asset)
        if asset_id is None:
            return None
        return sum(
            1 for e in self.rest.asset_events(asset_id) if (e.get("extra") or {}).get("episode_id") == episode_id
        )

    def digest_runs(self) -> list[dict[str, Any]]:
        return self.rest.dag_runs(DIGEST)


def case_cleared(obs: Observer, out: Results) -> None:
    rest = obs.rest
    run_id = rest.trigger(PRODUCER)
    states = [rest.wait_for_run(PRODUCER, run_id, WAIT)]
    for _ in range(CLEARS):
        rest.clear_run(PRODUCER, run_id)
        wait_for(
            f"{PRODUCER} to leave success after a clear", lambda: rest.run_state(PRODUCER, run_id) != "success", 30, 0.3
        )
        states.append(rest.wait_for_run(PRODUCER, run_id, WAIT))
    episode = obs.episode_id(PRODUCER, run_id)
    publish_try = rest.task_instance(PRODUCER, run_id, "publish").get("try_number")
    wait_for("a digest run", lambda: len(obs.digest_runs()) >= 1, WAIT, 0.5)
    wait_for(
        "every digest run to finish",
        lambda: all(r["state"] in ("success", "failed") for r in obs.digest_runs()),
        WAIT,
        0.5,
    )
    time.sleep(SETTLE)  # a second run would have been queued by now
    runs = obs.digest_runs()
    events = obs.events_for(EPISODES, episode)
    publish_sink = obs.sink_lines("publish.sink")
    digest_sink = obs.sink_lines("digest.sink")
    obs.table.append((f"a. producer run + {CLEARS} clears", len(publish_sink), events or 0, len(runs)))
    out.expect(
        f"a. one run cleared {CLEARS} times -> 1 publish line, 1 asset event, 1 digest run naming the episode once",
        states == ["success"] * (CLEARS + 1)
        and publish_try == CLEARS + 1
        and len(publish_sink) == 1
        and events == 1
        and len(runs) == 1
        and runs[0]["state"] == "success"
        and digest_sink == [episode]
        and obs.effect_state(episode) == "done",
        {
            "episode": episode,
            "run states": states,
            "publish try": publish_try,
            "publish sink": publish_sink,
            "asset events": events,
            "digest runs": [(r["dag_run_id"], r["state"]) for r in runs],
            "digest sink": digest_sink,
        },
    )


def case_backfilled(obs: Observer, out: Results) -> None:
    rest = obs.rest
    wait_for(f"{WEEKLY}'s scheduled run", lambda: len(rest.dag_runs(WEEKLY)) >= 1, WAIT, 0.5)
    first = rest.dag_runs(WEEKLY)[0]
    run_id, logical_date = str(first["dag_run_id"]), str(first["logical_date"])
    states = [rest.wait_for_run(WEEKLY, run_id, WAIT)]
    backfill = rest.backfill(WEEKLY, logical_date, logical_date, "completed")
    wait_for("the backfill to queue the run again", lambda: rest.run_state(WEEKLY, run_id) != "success", 30, 0.3)
    states.append(rest.wait_for_run(WEEKLY, run_id, WAIT))
    runs = rest.dag_runs(WEEKLY)
    episode = obs.episode_id(WEEKLY, run_id)
    publish_try = rest.task_instance(WEEKLY, run_id, "publish").get("try_number")
    sink = obs.sink_lines("weekly.sink")
    events = obs.events_for(WEEKLY_EPISODES, episode) or 0
    obs.table.append(("d. scheduled run + backfill (completed)", len(sink), events, "-"))
    out.expect(
        "d. a backfill over an existing run's date (reprocess completed) -> the same run and episode,"
        " publish try 2 without the body, 1 sink line, 1 event",
        states == ["success", "success"]
        and [(r["dag_run_id"], r["run_type"]) for r in runs] == [(run_id, "backfill")]
        and publish_try == 2
        and len(sink) == 1
        and events == 1
        and obs.effect_state(episode) == "done",
        {
            "episode": episode,
            "backfill": backfill.get("id"),
            "run states": states,
            "runs": [(r["dag_run_id"], r["run_type"], r["state"]) for r in runs],
            "publish try": publish_try,
            "sink": sink,
            "asset events": events,
        },
    )


def case_killed(obs: Observer, out: Results, dag_id: str) -> None:
    rest = obs.rest
    run_id = rest.trigger(dag_id)
    state = rest.wait_for_run(dag_id, run_id, WAIT)
    episode = obs.episode_id(dag_id, run_id)
    ti = rest.task_instance(dag_id, run_id, "publish")
    tries = (ti.get("state"), ti.get("try_number"))
    sink = obs.sink_lines(f"{dag_id}.sink")
    calls = len(obs.sink_lines(f"{dag_id}.calls"))
    events = obs.events_for(KILLED, episode) or 0
    effect = obs.effect_state(episode)
    first_log = rest.task_log(dag_id, run_id, "publish", 1)
    last_log = rest.task_log(dag_id, run_id, "publish", 2)
    command = f"idempotent-jobs reconcile {episode} --effect publish"
    killed = '"signal_name": "SIGKILL"' in first_log  # the task runner's supervisor saw try 1 die by SIGKILL
    if dag_id == KILL_NONE:
        obs.table.append(("b. SIGKILL after the sink, capability none", len(sink), events, "-"))
        out.expect(
            "b. SIGKILL after the sink answered (capability none) -> try 2 failed naming reconcile, effect unknown,"
            " 1 sink line, no event",
            state == "failed"
            and tries == ("failed", 2)
            and killed
            and command in last_log
            and effect == "unknown"
            and calls == 1
            and len(sink) == 1
            and events == 0,
            {
                "run": state,
                "publish": tries,
                "effect": effect,
                "body calls": calls,
                "sink": sink,
                "events": events,
                "try 1 SIGKILLed": killed,
                "command in try 2's log": command in last_log,
            },
        )
    else:
        obs.table.append(("c. SIGKILL after the sink, idempotent_key", len(sink), events, "-"))
        out.expect(
            "c. SIGKILL after the sink answered (idempotent_key, the sink honours the token) -> try 2 succeeded,"
            " effect done, 1 sink line, 1 event",
            state == "success"
            and tries == ("success", 2)
            and killed
            and effect == "done"
            and calls == 2
            and len(sink) == 1
            and events == 1,
            {
                "run": state,
                "publish": tries,
                "try 1 SIGKILLed": killed,
                "effect": effect,
                "body calls": calls,
                "sink": sink,
                "events": events,
            },
        )


def run(deployment: HitlDeployment, out: Results) -> None:
    deployment.start(say)
    rest = AirflowRest(deployment.api_url, APPROVER, deployment.passwords[APPROVER])
    rest.login()
    obs = Observer(deployment, rest)
    started = time.monotonic()

    def guarded(case: str, job: Callable[[], None]) -> None:
        try:
            job()
        except Exception as exc:  # one case going wrong is that case's FAIL; the others go on
            out.expect(f"{case} ran to the end", False, f"{type(exc).__name__}: {exc}")

    pool = ThreadPoolExecutor(max_workers=4)
    try:
        futures = [
            pool.submit(guarded, "a. cleared producer", lambda: case_cleared(obs, out)),
            pool.submit(guarded, "b. killed, none", lambda: case_killed(obs, out, KILL_NONE)),
            pool.submit(guarded, "c. killed, idempotent_key", lambda: case_killed(obs, out, KILL_KEY)),
            pool.submit(guarded, "d. backfilled weekly", lambda: case_backfilled(obs, out)),
        ]
        for future in futures:
            future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    say(f"cases ran in {time.monotonic() - started:.0f}s")
    say(f"{'scenario':<46} {'sink lines':>10} {'asset events':>13} {'digest runs':>12}")
    for scenario, lines, events, runs in sorted(obs.table):
        say(f"{scenario:<46} {lines:>10} {events!s:>13} {runs!s:>12}")


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the work dir, logs and databases")
    parser.add_argument("--workdir", type=Path, default=REPO / ".e2e" / "effects")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _terminate)
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    deployment = HitlDeployment(
        args.workdir, tag=f"fx{int(time.time()) % 100000}", dag_files=(DAG_FILE,), dag_ids=DAG_IDS, record_lookups=False
    )
    out = Results(say, shown=100_000)
    run_deployed(deployment, out, lambda: run(deployment, out), keep=args.keep)
    if out.ok and not args.keep:
        shutil.rmtree(args.workdir, ignore_errors=True)
    else:
        say(f"logs kept in {args.workdir}")
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(main())
