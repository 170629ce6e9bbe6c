"""A submitter in another PID namespace, on the same host and file store, is never taken for dead.

Two real processes share one file store and one host name but not a PID namespace (containers on
one node with a shared volume). The holder runs under ``unshare --pid --fork --mount-proc`` with
a pid this namespace just gave back, so here that pid is dead while the holder lives; it writes
its claim and blocks inside ``provider.submit`` before anything is sent. The retry, in this
namespace or in a third one, must be refused (`SubmissionInProgress`, retryable) and send nothing:
the provider server sees exactly one submission. A retry that cannot read its own namespace (a
container with /proc hidden) cannot prove a claim is from its namespace either: only the lease
decides for it. Needs root and util-linux ``unshare``; skipped with the reason otherwise.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from airflow_idempotent_jobs import SubmissionState, open_store
from airflow_idempotent_jobs.paid import idempotency_token
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.paid.support import (
    CAPABILITIES,
    CHILD,
    CHILD_IN_PROGRESS,
    CHILD_OK,
    PROCESS_TIMEOUT,
    child_env,
    claim_here,
    finish,
    jobs_for,
    left_submitting,
    pid_just_freed,
    wait_until,
)

UNSHARE = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
#: Runs as pid 1 of the new namespace: the next pid it hands out is argv[1] + 1, then runs argv[2:].
LAUNCHER = (
    "import subprocess, sys\n"
    "with open('/proc/sys/kernel/ns_last_pid', 'w') as f: f.write(sys.argv[1])\n"
    "sys.exit(subprocess.call(sys.argv[2:]))\n"
)


@pytest.fixture(scope="module")
def unshare_works() -> None:
    """Skip, with the reason, where a PID namespace cannot be made or its next pid cannot be chosen."""
    if shutil.which("unshare") is None:
        pytest.skip("util-linux `unshare` is not installed")
    probe = subprocess.run(
        [*UNSHARE, sys.executable, "-c", LAUNCHER, "41", sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
    )
    if probe.returncode != 0 or probe.stdout.strip() != "42":
        pytest.skip(f"cannot run in a new PID namespace here (needs root): {probe.stderr.strip()[-200:]}")


def _dead_here(pid: int) -> bool:
    return not psutil.pid_exists(pid)


def _child(server: ProviderServer, store: Path, eid: str, **options: object) -> list[str]:
    """The command line of one paid step (`_child.py`) for ``eid``."""
    spec = {"store": str(store), "episode": eid, "config": server.provider_config().to_dict(), **options}
    return [sys.executable, str(CHILD), json.dumps(spec)]


def _in_new_pid_namespace(command: list[str], pid: int | None = None) -> list[str]:
    """``command`` in a new PID namespace, as pid ``pid`` there (else as whatever pid comes next)."""
    return [*UNSHARE, sys.executable, "-c", LAUNCHER, str(pid - 1), *command] if pid else [*UNSHARE, *command]


def _start(server: ProviderServer, command: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(server))


RETRIES = [
    *[(capability, "this namespace") for capability in CAPABILITIES],
    ("b-lookup", "a third namespace"),
]


@pytest.mark.usefixtures("unshare_works")
@pytest.mark.parametrize(("capability", "retry_in"), RETRIES)
def test_a_live_submitter_in_another_pid_namespace_is_never_raced(
    tmp_path: Path, capability: str, retry_in: str
) -> None:
    store_path, released = tmp_path / "store", tmp_path / "release"
    store = open_store(store_path)
    eid = store.allocate("2026-W32", "shared-volume").episode_id
    token = idempotency_token(store.identity, eid)
    with ProviderServer(polls_to_finish=1, **CAPABILITIES[capability]) as server:
        pid = pid_just_freed()
        holder = _start(server, _in_new_pid_namespace(_child(server, store_path, eid, hold=str(released)), pid))
        try:
            entered = released.with_name(released.name + ".entered")
            wait_until(entered.exists, PROCESS_TIMEOUT, "the holder to enter provider.submit")
            claim = store.get(eid).submission
            assert claim.state is SubmissionState.SUBMITTING
            assert claim.claimed_by is not None and f":{pid}:" in claim.claimed_by, claim.claimed_by
            assert _dead_here(pid), f"pid {pid} came back to life here: the scenario needs it dead"
            retry = _child(server, store_path, eid)
            retry_code, retry_out, retry_err = finish(
                _start(server, retry if retry_in == "this namespace" else _in_new_pid_namespace(retry))
            )
            sent_during_hold = server.submissions()
        finally:
            released.touch()
            holder_code, holder_out, holder_err = finish(holder)

        assert (sent_during_hold, len(jobs_for(server, token))) == (0, 1), (retry_out, retry_err, holder_err)
        assert server.submissions() == 1, "the retry submitted while the holder was in flight"
        assert retry_code == CHILD_IN_PROGRESS, (retry_code, retry_out, retry_err)
        assert retry_out["error"] == "SubmissionInProgress" and claim.claimed_by in retry_out["message"]
        assert holder_code == CHILD_OK, (holder_out, holder_err)
        assert store.get(eid).submission.remote_ref == holder_out["remote_ref"] == jobs_for(server, token)[0]


@pytest.mark.usefixtures("unshare_works")
def test_a_retry_that_cannot_read_its_namespace_waits_for_the_lease(tmp_path: Path) -> None:
    """The claim is from this host, boot and namespace, its pid gone; a retry with /proc hidden
    cannot tell, and is refused; the same retry with /proc takes it over at once."""
    store_path = tmp_path / "store"
    store = open_store(store_path)
    eid = left_submitting(store, claim_here(pid_just_freed()), dt.datetime.now(dt.timezone.utc))
    with ProviderServer(polls_to_finish=1, **CAPABILITIES["b-lookup"]) as server:
        child = _child(server, store_path, eid)
        hidden = ["unshare", "--mount", "sh", "-c", 'mount -t tmpfs none /proc && exec "$@"', "sh", *child]
        code, out, err = finish(_start(server, hidden))
        assert (code, server.submissions()) == (CHILD_IN_PROGRESS, 0), (out, err)
        code, out, err = finish(_start(server, child))
        assert (code, out.get("state")) == (CHILD_OK, "accepted"), err
        assert server.accepted() == 1
