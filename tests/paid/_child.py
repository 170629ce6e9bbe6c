"""One paid step in its own process, killed (SIGKILL, by itself) at an exact point if asked.

Usage: ``python _child.py '{"store": ..., "episode": ..., "config": {...}, "kill": POINT, "poll": bool}'``,
credential in ``$PAID_TEST_AUTH``: the HTTP provider. With ``"adapter": {"kind": "prediction" | "batch",
"base_url": ..., "lookup": bool}`` instead of ``config``: that example adapter, its API token in
``$PAID_TEST_TOKEN``; kind ``custom`` (with ``"tokens": bool``) is the custom provider of
``test_custom_provider.py`` (its own client, no `HttpProviderConfig`) against the provider server.
Kill points wrap the real objects of this process only:
``before_intent`` (the store's first write), ``after_intent`` (entering ``provider.submit``),
``between_calls`` (the batch adapter: its upload returned, entering the paid batch call),
``after_answer`` (``provider.submit`` returned, nothing saved yet), ``after_saved`` (after
``ledger.submit`` returned). ``"hold": PATH`` blocks inside ``provider.submit``, before anything is
sent: it creates ``PATH.entered``, then waits for ``PATH`` to exist. Prints the final submission as
one JSON line.
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
from airflow_idempotent_jobs.paid import PaidProvider, SubmissionInProgress, SubmissionLedger, wait_for_terminal
from airflow_idempotent_jobs.paid.http import HttpPaidProvider, HttpProviderConfig


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def wait_for_file(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.002)


def arm_kill_point(kill: str | None, store: Any, provider: PaidProvider) -> None:
    """Wrap this process's store and provider to SIGKILL it ``before_intent`` (the store's first write),
    ``after_intent`` (entering ``provider.submit``) or ``after_answer`` (``submit`` returned)."""
    if kill == "before_intent":
        real_update = store.update_in_week

        def update_in_week(*args: Any, **kwargs: Any) -> Any:
            die()
            return real_update(*args, **kwargs)

        store.update_in_week = update_in_week
    if kill in ("after_intent", "after_answer"):
        real_submit = provider.submit

        def submit(request: Any, token: str) -> str:
            if kill == "after_intent":
                die()
            ref = real_submit(request, token)
            die()
            return ref

        setattr(provider, "submit", submit)  # noqa: B010 (the port is a Protocol: no method to assign)


def build_provider(spec: dict[str, Any]) -> PaidProvider:
    adapter = spec.get("adapter")
    if adapter is None:
        return HttpPaidProvider(
            HttpProviderConfig.from_dict(spec["config"]),
            auth_header="Authorization",
            auth_value=os.environ["PAID_TEST_AUTH"],
        )
    from example_adapters.batch_style import BatchStyleProvider
    from example_adapters.prediction_style import PredictionStyleProvider

    args = (adapter["base_url"], os.environ["PAID_TEST_TOKEN"])
    if adapter["kind"] == "custom":
        from tests.paid.test_custom_provider import JobClientProvider

        return JobClientProvider(*args, tokens=adapter["tokens"], lookup=adapter["lookup"])
    options: dict[str, Any] = {"lookup": adapter["lookup"], "read_timeout": 10.0, "backoff_initial": 0.05}
    if adapter["kind"] == "batch":
        return BatchStyleProvider(*args, **options)
    return PredictionStyleProvider(*args, **options)


def main(spec_text: str) -> int:
    spec = json.loads(spec_text)
    kill = spec.get("kill")
    store = open_store(spec["store"])
    provider = build_provider(spec)
    arm_kill_point(kill, store, provider)
    if kill == "between_calls":

        def create_batch(*args: Any) -> str:
            die()
            return ""

        setattr(provider, "create_batch", create_batch)  # noqa: B010 (only the batch adapter has it)
    if spec.get("hold"):
        held, held_submit = Path(spec["hold"]), provider.submit

        def holding_submit(request: Any, token: str) -> str:
            held.with_name(held.name + ".entered").touch()
            wait_for_file(held, 60)
            return held_submit(request, token)

        setattr(provider, "submit", holding_submit)  # noqa: B010 (as above)
    if spec.get("barrier"):
        wait_for_file(Path(spec["barrier"]), 30)
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


def zygote() -> int:
    """``_child.py --zygote``: fork one paid step per request line on stdin, with its modules imported once.

    Interpreter start-up and imports are most of a child's time; a fork of this process is a new
    OS process all the same (its own pid, claim and store handle; SIGKILL is as real), started in
    milliseconds. Request: ``{"id", "spec", "env", "out", "err"}`` (the spec as `main` takes it, the
    child's stdout and stderr files). Reports, one JSON line each on stdout: ``{"id", "pid"}`` once
    forked, ``{"pid", "code"}`` once reaped (``code`` negative for a signal, as in subprocess).
    Single-threaded on purpose: a fork must never copy a lock another thread holds.
    """
    import importlib
    import select

    for module in (
        "example_adapters.batch_style",
        "example_adapters.prediction_style",
        "tests.paid.test_custom_provider",
    ):
        importlib.import_module(module)  # once, for every fork

    pending = b""
    children = 0
    stdin_open = True
    while stdin_open or children:
        ready, _, _ = select.select([0] if stdin_open else [], [], [], 0.005)
        if ready:
            chunk = os.read(0, 1 << 16)
            stdin_open = bool(chunk)
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _forked(request)
                children += 1
                os.write(1, (json.dumps({"id": request["id"], "pid": pid}) + "\n").encode())
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children -= 1
            os.write(1, (json.dumps({"pid": pid, "code": os.waitstatus_to_exitcode(status)}) + "\n").encode())
    return 0


def _forked(request: dict[str, Any]) -> None:
    """In the forked child: its own stdin, stdout, stderr and environment, then `main`; never returns."""
    code = 70
    try:
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, path in ((1, request["out"]), (2, request["err"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        os.environ.update(request["env"])
        code = main(request["spec"])
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    sys.exit(zygote() if sys.argv[1:] == ["--zygote"] else main(sys.argv[1]))
