"""Functions that run in spawned OS processes (they must be importable by the child)."""

from __future__ import annotations

import os
import time
from typing import Any

from airflow_idempotent_jobs import open_store

#: How long a child waits for the start line before giving up (guards a hang, not a timing).
START_DEADLINE = 60.0


def wait_for(path: str, deadline: float = START_DEADLINE) -> None:
    """Poll for a file: the start line every contender waits behind."""
    give_up = time.monotonic() + deadline
    while not os.path.exists(path):
        if time.monotonic() > give_up:
            raise TimeoutError(f"no start file {path}")
        time.sleep(0.001)


def allocate_all(url: str, ready: Any, start_file: str, jobs: list[tuple[str, str]], results: Any) -> None:
    """Open the store, report ready, wait for the start line, allocate every (week, key), report."""
    out = []
    try:
        with open_store(url, lock_timeout=60) as store:
            store.namespace  # noqa: B018  (opened and initialised before the start line)
            ready.put(os.getpid())
            wait_for(start_file)
            for week, key in jobs:
                episode = store.allocate(week, key)
                out.append((week, key, episode.episode_id, episode.reused))
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put(("error", os.getpid(), repr(exc)))
        raise
    results.put(("ok", os.getpid(), out))
