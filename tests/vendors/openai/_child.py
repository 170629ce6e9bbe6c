"""One paid step through `OpenAIBatchProvider` in a process of its own, SIGKILLed by itself at a point if asked.

Run by a forkserver (`conftest.forkserver`): each step is a fresh OS process (its own pid, claim,
store handle and SDK client), forked from one that imported everything once. ``spec``: ``store``,
``episode``, ``api_key``, ``base_url``, optional ``kill`` (``before_intent``: the store's first
write; ``after_intent``: entering ``submit``; ``between_calls``: the upload answered, the paid call
not made; ``after_answer``: ``submit`` returned, nothing saved; ``after_saved``: ``ledger.submit``
returned) and ``poll``. Writes the final submission as JSON to ``out``; exit 0, or 3 for an error.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.errors import IdempotentJobsError
from airflow_idempotent_jobs.paid import SubmissionLedger, wait_for_terminal
from airflow_idempotent_jobs.vendors.openai import OpenAIBatchProvider
from tests.vendors.openai.support import PRICES, chat_request

REQUEST = chat_request(2)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def run(spec: dict[str, Any], out: str) -> None:
    code = 3
    try:
        result = _step(spec)
        code = 0
    except IdempotentJobsError as exc:
        result = {"error": type(exc).__name__, "message": str(exc)}
    Path(out).write_text(json.dumps(result))
    os._exit(code)


def _step(spec: dict[str, Any]) -> dict[str, Any]:
    kill = spec.get("kill")
    store = open_store(spec["store"])
    provider = OpenAIBatchProvider(prices=PRICES, api_key=spec["api_key"], base_url=spec["base_url"], timeout=10.0)
    if kill == "before_intent":
        setattr(store, "update_in_week", lambda *args, **kwargs: die())  # noqa: B010 (the store's first write)
    real_submit, real_create = provider.submit, provider._create

    def submit(request: Any, token: str) -> str:
        if kill == "after_intent":
            die()
        ref = real_submit(request, token)
        if kill == "after_answer":
            die()
        return ref

    def create(*args: Any) -> str:
        if kill == "between_calls":
            die()
        return real_create(*args)

    setattr(provider, "submit", submit)  # noqa: B010 (wraps this process's object only)
    setattr(provider, "_create", create)  # noqa: B010
    ledger = SubmissionLedger(store)
    episode = ledger.submit(spec["episode"], provider, REQUEST)
    if kill == "after_saved":
        die()
    if spec.get("poll"):
        episode = wait_for_terminal(ledger, spec["episode"], provider, timeout=30, initial_delay=0.01, max_delay=0.1)
    sub = episode.submission
    return {"state": sub.state.value, "remote_ref": sub.remote_ref, "cost": sub.cost}
