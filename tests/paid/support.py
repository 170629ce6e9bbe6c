"""Helpers for the paid-layer tests: a real store, the real provider server, real child processes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_idempotent_jobs import Episode, EpisodeStore, SubmissionState
from airflow_idempotent_jobs.paid import (
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
    idempotency_token,
)
from airflow_idempotent_jobs.paid.http import HttpPaidProvider
from airflow_idempotent_jobs.testing.server import ProviderServer

CHILD = Path(__file__).with_name("_child.py")
REPO = Path(__file__).resolve().parents[2]
#: Exit codes of `_child.py`.
CHILD_OK, CHILD_UNKNOWN, CHILD_IN_PROGRESS = 0, 3, 75
PROCESS_TIMEOUT = 60.0

#: Server switches per provider capability: (a) tokens honoured, (b) lookup only, (c) neither.
CAPABILITIES: dict[str, dict[str, Any]] = {
    "a-tokens": {"honour_tokens": True, "lookup": False},
    "b-lookup": {"honour_tokens": False, "lookup": True},
    "c-neither": {"honour_tokens": False, "lookup": False},
}

#: The example adapters' paid call (``example_adapters._client``) under each fault of the example APIs:
#: (fault, error raised, paid jobs the API holds afterwards).
PAID_CALL_FAULTS: list[tuple[str, type[Exception], int]] = [
    ("4xx", ProviderRejected, 0),
    ("429", ProviderUnavailable, 0),
    ("5xx", ProviderOutcomeUnknown, 0),  # a 5xx does not say whether it created the job
    ("5xx_after_accept", ProviderOutcomeUnknown, 1),
    ("409_after_accept", ProviderOutcomeUnknown, 1),
    ("drop_after_accept", ProviderOutcomeUnknown, 1),
    ("slow", ProviderOutcomeUnknown, 1),  # past the read timeout
]


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


def finish(process: subprocess.Popen[str] | ForkedChild) -> tuple[int, dict[str, Any], str]:
    out, err = process.communicate(timeout=PROCESS_TIMEOUT)
    line = out.strip().splitlines()[-1] if out.strip() else "{}"
    assert process.returncode is not None
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


def start_adapter_child(
    api: Any, kind: str, store_path: Path, episode_id: str, *, lookup: bool, **options: Any
) -> subprocess.Popen[str]:
    """`start_child` for an example adapter (``kind``: prediction or batch) against ``api`` (its local server)."""
    spec = {
        "store": str(store_path),
        "episode": episode_id,
        "adapter": {"kind": kind, "base_url": api.url, "lookup": lookup},
        **options,
    }
    env = {k: v for k, v in os.environ.items() if k != "IDEMPOTENT_JOBS_STORE"}
    env["PAID_TEST_TOKEN"] = api.auth_token
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))  # example_adapters
    return subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


class ForkedChild:
    """A paid step forked by `Zygote`: the parts of ``subprocess.Popen`` that `finish` and the tests use."""

    def __init__(self, zygote: Zygote, request_id: int, out: Path, err: Path) -> None:
        self._zygote, self._id, self._out, self._err = zygote, request_id, out, err
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        return self._zygote.wait_for(("pid", self._id))

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.returncode = self._zygote.wait_for(("code", self.pid), timeout or PROCESS_TIMEOUT)
        return self._out.read_text(), self._err.read_text()


class Zygote:
    """``_child.py --zygote``: one interpreter that imported everything forks each paid step (see its docstring).

    ``with Zygote(tmp) as z: z.start(spec, env)`` gives a `ForkedChild`; ``z.start_child(...)`` and
    ``z.start_adapter_child(...)`` take the arguments of `start_child` / `start_adapter_child`.
    """

    def __init__(self, work: Path) -> None:
        self._work = work
        env = {k: v for k, v in os.environ.items() if k != "IDEMPOTENT_JOBS_STORE"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        self._proc = subprocess.Popen(
            [sys.executable, str(CHILD), "--zygote"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        self._reports: dict[tuple[str, int], int] = {}
        self._changed = threading.Condition()
        self._next = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            report = json.loads(line)
            key = ("pid", report["id"]) if "id" in report else ("code", report["pid"])
            with self._changed:
                self._reports[key] = report["pid"] if "id" in report else report["code"]
                self._changed.notify_all()

    def wait_for(self, key: tuple[str, int], timeout: float = PROCESS_TIMEOUT) -> int:
        with self._changed:
            if not self._changed.wait_for(lambda: key in self._reports, timeout):
                raise AssertionError(f"the zygote never reported {key} within {timeout}s")
            return self._reports[key]

    def start(self, spec: dict[str, Any], env: dict[str, str]) -> ForkedChild:
        self._next += 1
        out, err = self._work / f"child-{self._next}.out", self._work / f"child-{self._next}.err"
        request = {"id": self._next, "spec": json.dumps(spec), "env": env, "out": str(out), "err": str(err)}
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps(request) + "\n").encode())
        self._proc.stdin.flush()
        return ForkedChild(self, self._next, out, err)

    def start_child(self, server: ProviderServer, store_path: Path, episode_id: str, **options: Any) -> ForkedChild:
        spec = {"store": str(store_path), "episode": episode_id, "config": server.provider_config().to_dict()}
        return self.start({**spec, **options}, {"PAID_TEST_AUTH": server.auth_value})

    def start_adapter_child(
        self,
        api: Any,
        kind: str,
        store_path: Path,
        episode_id: str,
        *,
        lookup: bool,
        tokens: bool = False,
        **options: Any,
    ) -> ForkedChild:
        adapter = {"kind": kind, "base_url": api.url, "lookup": lookup, "tokens": tokens}
        spec = {"store": str(store_path), "episode": episode_id, "adapter": adapter}
        return self.start({**spec, **options}, {"PAID_TEST_TOKEN": api.auth_token})

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()  # the zygote reaps its children and exits
        try:
            self._proc.wait(timeout=PROCESS_TIMEOUT)
        finally:
            if self._proc.poll() is None:
                self._proc.kill()
        self._reader.join(timeout=10)


def pid_just_freed() -> int:
    """A pid this PID namespace handed out and got back: nothing here holds it (pids are not reused soon)."""
    with subprocess.Popen(["true"]) as child:
        child.wait()
    return child.pid


def claim_here(pid: int, nonce: str = "0badc0de", *, pidns: str | None = None, boot: str | None = None) -> str:
    """A claim as a process of this host, boot and PID namespace writes it (`paid.claims`), read from /proc."""
    if pidns is None:
        pidns = os.readlink("/proc/self/ns/pid").removeprefix("pid:[").removesuffix("]")
    if boot is None:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return f"{socket.gethostname()}:{pid}:{nonce}:pidns={pidns}:boot={boot}"


def left_submitting(store: EpisodeStore, claim: str, at: dt.datetime) -> str:
    """A fresh episode left ``submitting`` under ``claim`` at ``at``, as a writer that stopped there; its id."""
    eid = store.allocate("2026-W32", "k").episode_id
    token = idempotency_token(store.identity, eid)

    def claimed(episode: Episode) -> Episode:
        sub = episode.submission.moved_to(
            SubmissionState.SUBMITTING,
            episode_id=eid,
            token=token,
            attempts=1,
            claimed_by=claim,
            claimed_at=at.isoformat(),
        )
        return dataclasses.replace(episode, submission=sub)

    store.update(eid, claimed)
    return eid
