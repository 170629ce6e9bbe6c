"""Paid execution that never pays twice, against the local provider server (a separate process).

Each paid step runs as its own worker process, as an Airflow task would. The walkthrough kills one
with SIGKILL while the provider holds its job, retries, reconciles, and counts the provider's jobs.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent / ".demo"
STORE = ROOT / "paid-store"
TOKEN = "demo-provider-secret"
CLI = [str(Path(sys.executable).with_name("idempotent-jobs")), "--store", str(STORE)]
ENV = {**os.environ, "IDEMPOTENT_JOBS_PROVIDER_TOKEN": TOKEN, "PROVIDER_SERVER_TOKEN": TOKEN}


def cli(*args: str, expect: int = 0) -> str:
    print(f"$ idempotent-jobs {shlex.join(args)}", flush=True)
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=ENV, timeout=60)
    sys.stdout.write(done.stdout)
    sys.stdout.write("".join(f"  (stderr) {line}\n" for line in done.stderr.splitlines()))
    print(f"  (exit {done.returncode})\n", flush=True)
    if done.returncode != expect:
        sys.exit(f"demo: expected exit {expect}, got {done.returncode}")
    return done.stdout.strip()


def worker(
    url: str, episode_id: str, tokens: bool, budget: float | None = None, estimate: float | None = None
) -> subprocess.Popen[str]:
    spec = {"url": url, "episode": episode_id, "tokens": tokens, "budget": budget, "estimate": estimate}
    return subprocess.Popen(
        [sys.executable, __file__, "--worker", json.dumps(spec)], stdout=subprocess.PIPE, text=True, env=ENV
    )


def run_worker(label: str, *args: Any, **kwargs: Any) -> str:
    print(f"# worker: {label}", flush=True)
    out, _ = worker(*args, **kwargs).communicate(timeout=60)
    print(f"  {out.strip()}\n", flush=True)
    return out


def admin(url: str, method: str, path: str, body: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    return httpx.request(method, url + path, json=body, headers=headers, timeout=10).json()


def show_submission(episode_id: str) -> None:
    done = subprocess.run([*CLI, "show", episode_id], capture_output=True, text=True, env=ENV, timeout=60)
    sub = json.loads(done.stdout)["submission"]
    print(f"  ledger: {sub['state']}, remote_ref={sub['remote_ref']}, cost={sub['cost']}\n", flush=True)


def main() -> None:
    shutil.rmtree(STORE, ignore_errors=True)
    state_file = ROOT / "provider-state.json"
    state_file.unlink(missing_ok=True)
    server_cmd = [sys.executable, "-m", "airflow_idempotent_jobs.testing.server", "--port", "0"]
    server = subprocess.Popen(
        [*server_cmd, "--ignore-tokens", "--no-lookup", "--polls-to-finish", "2", "--state-file", str(state_file)],
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        print(f"Provider server at {url}: it ignores idempotency tokens and offers no lookup (capability c)\n")
        walk(url)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


def walk(url: str) -> None:
    first = cli("allocate", "--week", "2026-W32", "--key", "weekly:scheduled__2026-08-03")

    print("1. The provider accepts the job, then the worker is SIGKILLed before it reads the answer:")
    admin(url, "POST", "/_admin/config", {"fault": "slow", "fault_times": 1, "slow_seconds": 30})
    victim = worker(url, first, tokens=False)
    deadline = time.monotonic() + 30
    while admin(url, "GET", "/_admin/stats")["accepted"] < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    print(f"  worker killed (exit {victim.returncode}); the provider holds 1 job", flush=True)
    show_submission(first)

    print("2. Airflow retries: the ledger finds `submitting`, and with neither tokens nor lookup it refuses:")
    run_worker("retry", url, first, tokens=False)
    print(f"  provider jobs: {admin(url, 'GET', '/_admin/stats')['accepted']}\n")

    print("3. The operator settles it. The provider can look tokens up now, so reconcile asks it:")
    admin(url, "POST", "/_admin/config", {"lookup": True})
    no_job = ["--no-job-status", "404", "--no-job-path", "error.code", "--no-job-value", "no_job"]
    cli("reconcile", first, "--provider-url", url, "--ref-path", "job.id", *no_job, "--by", "oncall@demo")

    print("4. The retry resumes the original job and polls it to the end; a further retry calls nothing:")
    run_worker("retry", url, first, tokens=False)
    before = admin(url, "GET", "/_admin/stats")
    run_worker("retry after succeeded", url, first, tokens=False)
    after = admin(url, "GET", "/_admin/stats")
    assert (after["submissions"], after["status_calls"]) == (before["submissions"], before["status_calls"])

    second = cli("allocate", "--week", "2026-W32", "--key", "weekly:manual__2026-08-05")
    print("5. A provider that honours tokens (capability a) answers 500 after accepting: the retry resubmits")
    print("   with the same token and gets the same job back:")
    admin(url, "POST", "/_admin/config", {"honour_tokens": True, "fault": "5xx_after_accept", "fault_times": 1})
    run_worker("first try", url, second, tokens=True)
    run_worker("retry", url, second, tokens=True)

    third = cli("allocate", "--week", "2026-W32", "--key", "weekly:manual__2026-08-07")
    print("6. A weekly budget of 6.00: 5.00 is spent, a submission estimated at 2.00 is refused, nothing sent:")
    sent = admin(url, "GET", "/_admin/stats")["submissions"]
    run_worker("budgeted", url, third, tokens=True, budget=6.0, estimate=2.0)
    assert admin(url, "GET", "/_admin/stats")["submissions"] == sent

    cli("list")
    stats = admin(url, "GET", "/_admin/stats")
    print("Closing note, from the provider's own counters:")
    per_token = stats["submissions_per_token"]
    print(f"  cases 1-4: {first} was sent once by the killed worker, refused on retry, adopted by reconcile,")
    print("             then polled to `succeeded`; the retry after that made no call")
    print(f"  case 5: {second} was sent twice with one token; the provider kept one job")
    print(f"  case 6: {third} was refused by the budget and never sent")
    print(f"  submit calls per episode token: {sorted(per_token.values())}")
    print(f"  jobs per episode token: {sorted(stats['accepted_per_token'].values())} (never more than one)")
    assert all(count == 1 for count in stats["accepted_per_token"].values())


def _worker_main(spec: dict[str, Any]) -> int:
    from airflow_idempotent_jobs import BudgetExceeded, SubmissionStateUnknown, open_store
    from airflow_idempotent_jobs.paid import ProviderOutcomeUnknown, SubmissionLedger, wait_for_terminal
    from airflow_idempotent_jobs.paid.http import HttpPaidProvider
    from airflow_idempotent_jobs.testing.server import server_provider_config

    config = server_provider_config(spec["url"], tokens_honoured=spec["tokens"], lookup_path=None)
    provider = HttpPaidProvider(config, auth_header="Authorization", auth_value=f"Bearer {TOKEN}")
    ledger = SubmissionLedger(open_store(STORE), weekly_budget=spec["budget"])
    try:
        ledger.submit(
            spec["episode"], provider, {"prompt": "weekly video", "units": 2}, estimated_cost=spec["estimate"]
        )
        done = wait_for_terminal(ledger, spec["episode"], provider, timeout=30, initial_delay=0.05, max_delay=0.5)
    except (SubmissionStateUnknown, ProviderOutcomeUnknown, BudgetExceeded) as exc:
        print(f"{type(exc).__name__}: {exc}")
        return 1
    sub = done.submission
    print(f"{sub.state.value}: remote_ref={sub.remote_ref} cost={sub.cost} submit calls={sub.attempts}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(_worker_main(json.loads(sys.argv[2])))
    main()
