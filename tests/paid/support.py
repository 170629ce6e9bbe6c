"""Helpers for the paid-layer tests: a real store, the real provider server, real child processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_idempotent_jobs.paid.http import HttpPaidProvider
from airflow_idempotent_jobs.testing.server import ProviderServer

CHILD = Path(__file__).with_name("_child.py")
#: Exit codes of `_child.py`.
CHILD_OK, CHILD_UNKNOWN, CHILD_IN_PROGRESS = 0, 3, 75
PROCESS_TIMEOUT = 60.0

#: Server switches per provider capability: (a) tokens honoured, (b) lookup only, (c) neither.
CAPABILITIES: dict[str, dict[str, Any]] = {
    "a-tokens": {"honour_tokens": True, "lookup": False},
    "b-lookup": {"honour_tokens": False, "lookup": True},
    "c-neither": {"honour_tokens": False, "lookup": False},
}


def provider_for(server: ProviderServer, **overrides: Any) -> HttpPaidProvider:
    return HttpPaidProvider(
        server.provider_config(**overrides), auth_header=server.auth_header, auth_value=server.auth_value
    )


def wait_until(condition: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def child_env(server: ProviderServer) -> dict[str, str]:
    env = dict(os.environ)
    env["PAID_TEST_AUTH"] = server.auth_value
    env.pop("IDEMPOTENT_JOBS_STORE", None)
    return env


def start_child(server: ProviderServer, store_path: Path, episode_id: str, **options: Any) -> subprocess.Popen[str]:
    """One paid step (`_child.py`) in a fresh interpreter; ``options``: kill, poll, barrier."""
    spec = {
        "store": str(store_path),
        "episode": episode_id,
        "config": server.provider_config().to_dict(),
        **options,
    }
    return subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(server),
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, dict[str, Any], str]:
    out, err = process.communicate(timeout=PROCESS_TIMEOUT)
    line = out.strip().splitlines()[-1] if out.strip() else "{}"
    return process.returncode, json.loads(line), err


def run_child(
    server: ProviderServer, store_path: Path, episode_id: str, **options: Any
) -> tuple[int, dict[str, Any], str]:
    return finish(start_child(server, store_path, episode_id, **options))


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_idempotent_jobs", *args],
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
        env=env if env is not None else {k: v for k, v in os.environ.items() if not k.startswith("IDEMPOTENT_JOBS")},
    )


def jobs_for(server: ProviderServer, token: str) -> list[str]:
    return sorted(job["id"] for job in server.stats()["jobs"].values() if job["token"] == token)
