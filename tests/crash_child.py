"""Child process for the crash tests: allocate once, SIGKILLed just before its K-th file-system step.

Usage: ``python crash_child.py ROOT WEEK KEY K``. K = 0 never kills and prints every step taken
(one per line, ``name<TAB>argument``) and then the result; otherwise the process dies by SIGKILL
right before step K runs, with no chance to clean up, as on a power cut of the process.
No production hook is involved: the steps are counted by wrapping the ``os`` functions.

``python crash_child.py --after WEEK KEY STORE...`` is the fresh process that comes after the
crashes (of any store: each STORE is a path or a URL): for each it runs ``idempotent-jobs check``
(the CLI's ``main``), looks the key up, then retries it, and prints ``STORE<TAB>check exit
code<TAB>whether the key was held<TAB>episode id<TAB>reused``.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from airflow_idempotent_jobs import FileEpisodeStore, open_store
from airflow_idempotent_jobs.cli import main as cli_main

#: Every ``os`` call the file store uses to change or persist the tree (its lock included).
STEPS = (
    "open",
    "write",
    "pwrite",
    "ftruncate",
    "fsync",
    "fdatasync",
    "close",
    "mkdir",
    "rename",
    "replace",
    "link",
    "unlink",
    "rmdir",
)


def after_the_crashes(week: str, key: str, stores: list[str]) -> None:
    for where in stores:
        checked = cli_main(["--store", where, "check"])
        with open_store(where, lock_timeout=10) as store:
            held = store.find(key) is not None
            episode = store.allocate(week, key)
        print(f"{where}\t{checked}\t{held}\t{episode.episode_id}\t{episode.reused}", flush=True)


def main() -> None:
    if sys.argv[1] == "--after":
        after_the_crashes(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    root, week, key, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = FileEpisodeStore(root, lock_timeout=10)
    taken: list[str] = []

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(real)
        def step(*args: Any, **kwargs: Any) -> Any:
            taken.append(f"{name}\t{args[0] if args and not isinstance(args[0], int) else ''}")
            if len(taken) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)

        return step

    for name in STEPS:
        setattr(os, name, counted(name, getattr(os, name)))
    episode = store.allocate(week, key)
    for line in taken:
        print(line)
    print(f"result\t{episode.episode_id}\t{episode.reused}")


if __name__ == "__main__":
    main()
