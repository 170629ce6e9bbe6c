"""What must hold after the distributed backfill, read from Airflow's metadata, the store and the provider."""

from __future__ import annotations

import datetime as dt
import json
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from airflow_idempotent_jobs import WeekId, open_store
from airflow_idempotent_jobs.store_check import check_store
from e2e.deployment import WORKERS, Deployment

#: The backfill's days and what the ISO calendar makes of them (2021-01-01..03 are in 2020-W53).
EXPECTED_PER_WEEK = {"2020-W52": 4, "2020-W53": 7, "2021-W01": 3}


@dataclass
class Outcome:
    """Named checks with what was seen, and a few figures for the report."""

    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)

    def expect(self, name: str, held: bool, seen: object) -> None:
        self.checks.append((name, bool(held), str(seen)))

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(held for _, held, _ in self.checks)

    def report(self) -> str:
        lines = ["", "distributed run (CeleryExecutor, 2 workers, PostgreSQL store)"]
        lines += [f"  {figure}" for figure in self.figures]
        for name, held, seen in self.checks:
            lines.append(f"  {'PASS' if held else 'FAIL'}  {name}" + ("" if held else f"  (seen: {seen})"))
        lines.append(
            f"  result: {'PASS' if self.ok else 'FAIL'} ({sum(h for _, h, _ in self.checks)}/{len(self.checks)})"
        )
        return "\n".join(lines)


def _value(raw: Any) -> Any:
    if isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw).decode()
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _provider_stats(deployment: Deployment) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{deployment.provider_url}/_admin/stats", headers={"Authorization": f"Bearer {deployment.provider_token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        stats: dict[str, Any] = json.loads(answer.read())
    return stats


def _attempts(deployment: Deployment, dag_id: str) -> dict[tuple[str, str, str], str]:
    """Which worker ran each task attempt ``(run_id, task_id, attempt)``, from the logs in its own home."""
    where = {}
    for name in WORKERS:
        for log in (deployment.home(name) / "logs" / f"dag_id={dag_id}").glob("run_id=*/task_id=*/attempt=*.log"):
            run_id = log.parent.parent.name.removeprefix("run_id=")
            where[(run_id, log.parent.name.removeprefix("task_id="), log.stem.removeprefix("attempt="))] = name
    return where


def _resumed_from_triggerer(deployment: Deployment, dag_id: str, run_id: str) -> bool:
    """Try 1 of ``generate`` logged the trigger's report (the line `execute_complete` writes)."""
    for name in WORKERS:
        task_logs = deployment.home(name) / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / "task_id=generate"
        log = task_logs / "attempt=1.log"
        if log.exists() and "the trigger reported succeeded" in log.read_text(errors="replace"):
            return True
    return False


def _most_runs_at_once(spans: list[tuple[Any, Any]]) -> int:
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans], key=lambda e: (e[0], e[1]))
    most = active = 0
    for _, step in edges:
        active += step
        most = max(most, active)
    return most


def verify(deployment: Deployment, dag_id: str) -> Outcome:
    out = Outcome()
    runs = deployment.metadata(
        "SELECT run_id, logical_date, state, run_type FROM dag_run WHERE dag_id = %s ORDER BY logical_date", dag_id
    )
    backfill = [(run_id, when, state) for run_id, when, state, kind in runs if kind == "backfill"]
    days = [when.date() for _, when, _ in backfill]
    wanted_days = [dt.date(2020, 12, 24) + dt.timedelta(days=n) for n in range(14)]
    out.expect(
        "14 backfill runs, 2020-12-24..2021-01-06, and no other run",
        days == wanted_days and len(runs) == 14,
        [(r[0], r[3]) for r in runs],
    )
    out.expect(
        "every run succeeded", all(state == "success" for _, _, state in backfill), Counter(s for *_, s in backfill)
    )

    tries = {
        (run_id, task_id): (state, try_number)
        for run_id, task_id, state, try_number in deployment.metadata(
            "SELECT run_id, task_id, state, try_number FROM task_instance WHERE dag_id = %s", dag_id
        )
    }
    allocate_tries = [tries.get((run_id, "allocate")) for run_id, _, _ in backfill]
    out.expect(
        "every allocation crashed once after allocating and succeeded on try 2",
        all(t == ("success", 2) for t in allocate_tries),
        allocate_tries,
    )
    generate_tries = {when.day: tries.get((run_id, "generate")) for run_id, when, _ in backfill}
    out.expect(
        "the paid step crashed once after paying on even days, and its retry did not pay again",
        all(t == ("success", 2 if day % 2 == 0 else 1) for day, t in generate_tries.items()),
        generate_tries,
    )
    resumed = [run_id for run_id, _, _ in backfill if _resumed_from_triggerer(deployment, dag_id, run_id)]
    out.expect(
        "every paid step was resumed by the triggerer's event on its first try",
        len(resumed) == len(backfill),
        sorted(set(r for r, _, _ in backfill) - set(resumed)),
    )
    xcoms = {
        run_id: _value(value)
        for run_id, value in deployment.metadata(
            "SELECT run_id, value FROM xcom WHERE dag_id = %s AND task_id = 'allocate' AND key = 'return_value'", dag_id
        )
    }

    with open_store(deployment.store_url) as store:
        episodes = store.list()
        problems = check_store(store)
    by_key: dict[str, list[str]] = {}
    for episode in episodes:
        by_key.setdefault(episode.allocation_key, []).append(episode.episode_id)
    owned = {run_id: by_key.get(f"airflow:{dag_id}:allocate:{run_id}", []) for run_id, _, _ in backfill}
    one_each = bool(owned) and all(len(ids) == 1 for ids in owned.values())
    out.expect("every run owns exactly one episode", one_each, owned)
    out.expect("no episode without a run", len(episodes) == len(backfill), [e.episode_id for e in episodes])
    right_week = one_each and all(
        owned[run_id][0].rsplit("-", 1)[0] == str(WeekId.from_datetime(when)) for run_id, when, _ in backfill
    )
    out.expect("each episode is in its run's ISO week", right_week, owned)
    out.expect(
        "the XCom of each run names its episode",
        one_each and all(xcoms.get(run_id) == ids[0] for run_id, ids in owned.items()),
        xcoms,
    )
    per_week = {week: sorted(e.sequence for e in episodes if e.week_id == week) for week in EXPECTED_PER_WEEK}
    contiguous = all(per_week[w] == list(range(n)) for w, n in EXPECTED_PER_WEEK.items())
    out.expect("sequences contiguous per week (4, 7, 3)", contiguous, per_week)
    out.expect("idempotent-jobs check finds no problem", not problems, problems[:5])

    stats = _provider_stats(deployment)
    refs = [e.submission.remote_ref for e in episodes]
    out.expect(
        "the provider received exactly one job per episode (tokens not deduplicated)",
        stats["submissions"] == stats["accepted"] == len(stats["jobs"]) == len(episodes) == len(set(refs))
        and set(refs) == set(stats["jobs"]),
        {k: stats[k] for k in ("submissions", "accepted")},
    )
    out.expect(
        "every episode's paid job succeeded",
        all(e.submission.state.value == "succeeded" for e in episodes),
        Counter(e.submission.state.value for e in episodes),
    )
    ran_on = _attempts(deployment, dag_id)
    attempts = Counter(ran_on.values())
    out.expect("both workers ran tasks", all(attempts[name] for name in WORKERS), dict(attempts))
    moved = sum(
        1
        for (run_id, task, n), name in ran_on.items()
        if task == "allocate" and n == "2" and ran_on.get((run_id, task, "1")) not in (None, name)
    )
    spans = deployment.metadata(
        "SELECT start_date, end_date FROM dag_run WHERE dag_id = %s AND run_type = 'backfill'", dag_id
    )
    out.figures.append(
        f"runs active at once: up to {_most_runs_at_once(spans)}; "
        f"allocations retried on the other worker: {moved} of {len(backfill)}"
    )

    out.figures.append(
        f"runs: {len(backfill)}  episodes per week: " + ", ".join(f"{w} {len(s)}" for w, s in per_week.items())
    )
    out.figures.append("task attempts per worker: " + ", ".join(f"{w} {attempts[w]}" for w in WORKERS))
    out.figures.append(f"provider: {stats['submissions']} submissions, {stats['accepted']} jobs accepted")
    return out


def verify_no_store(deployment: Deployment, dag_id: str, out: Outcome) -> None:
    """A store-less allocation on a Celery worker failed on try 1 (retries=2 unused), naming the settings."""
    tries = deployment.metadata("SELECT state, try_number FROM task_instance WHERE dag_id = %s", dag_id)
    logs = [
        log.read_text(errors="replace")
        for name in WORKERS
        for log in (deployment.home(name) / "logs" / f"dag_id={dag_id}").glob("run_id=*/task_id=allocate/*.log")
    ]
    refusal = "no episode store configured, and the executor (CeleryExecutor) may run tasks on several hosts"
    named = all(s in text for text in logs for s in (refusal, "AIRFLOW__IDEMPOTENT_JOBS__STORE"))
    default_stores = [str(p) for n in ("control", *WORKERS) if (p := deployment.home(n) / "idempotent_jobs").exists()]
    out.expect(
        "an allocation naming no store was refused on its worker's first try, naming the settings",
        tries == [("failed", 1)] and len(logs) == 1 and named and not default_stores,
        {"tries": tries, "logs": len(logs), "named": named, "default stores": default_stores},
    )


def verify_custom_provider(deployment: Deployment, dag_id: str, out: Outcome) -> None:
    """The custom-hook run: one prediction for its token although try 1 lost the answer, polled to
    the end by the real triggerer process (which imported the hook by its class path)."""
    runs = deployment.metadata("SELECT run_id, state FROM dag_run WHERE dag_id = %s", dag_id)
    tries = dict(deployment.metadata("SELECT task_id, try_number FROM task_instance WHERE dag_id = %s", dag_id))
    stats = deployment.prediction_admin("GET", "/_admin/stats")
    per_token = stats.get("jobs_per_token", {})
    resumed = [
        log
        for name in WORKERS
        for log in (deployment.home(name) / "logs" / f"dag_id={dag_id}").glob("run_id=*/task_id=generate/attempt=*.log")
        if "the trigger reported succeeded" in log.read_text(errors="replace")
    ]
    triggerer_log = (deployment.workdir / "triggerer.log").read_text(errors="replace")
    out.expect(
        "a custom provider hook paid once after a lost answer, polled by the real triggerer",
        [state for _, state in runs] == ["success"]
        and tries.get("generate") == 2
        and list(per_token.values()) == [1]
        and len(resumed) == 1
        and "Traceback" not in triggerer_log,
        {"runs": runs, "tries": tries, "jobs per token": per_token, "resumed": len(resumed)},
    )
