"""A walk through the CLI on a fresh file store: what a weekly pipeline's retries look like."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

STORE = Path(__file__).resolve().parent.parent / ".demo" / "cli-store"
CLI = [str(Path(sys.executable).with_name("idempotent-jobs")), "--store", str(STORE)]


def run(*args: str, expect: int = 0) -> str:
    print(f"$ idempotent-jobs {shlex.join(args)}", flush=True)
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=os.environ, timeout=60)
    sys.stdout.write(done.stdout)
    sys.stdout.write("".join(f"  (stderr) {line}\n" for line in done.stderr.splitlines()))
    print(f"  (exit {done.returncode})\n", flush=True)
    if done.returncode != expect:
        sys.exit(f"demo: expected exit {expect}, got {done.returncode}")
    return done.stdout.strip()


def main() -> None:
    shutil.rmtree(STORE, ignore_errors=True)
    print(f"A fresh file store at {STORE}\n")
    print("Three scheduled runs in ISO week 2026-W32 each get their own job:")
    first = run("allocate", "--week", "2026-W32", "--key", "weekly:scheduled__2026-08-03")
    run("allocate", "--week", "2026-W32", "--key", "weekly:manual__2026-08-05")
    # Keys are opaque text, never paths: a "/" (here from the time zone's name) is fine.
    berlin = "weekly:manual__2026-08-02T22:30:00+00:00@Europe/Berlin"
    run("allocate", "--date", "2026-08-02T22:30:00+00:00", "--tz", "Europe/Berlin", "--key", berlin)
    print("Airflow retries the first run: same key, so it gets its original job back, not a fourth:")
    again = run("allocate", "--week", "2026-W32", "--key", "weekly:scheduled__2026-08-03")
    assert again == first, (again, first)
    print("The same key asked for in another week is refused (exit 3), and nothing is written:")
    run("allocate", "--week", "2026-W33", "--key", "weekly:scheduled__2026-08-03", expect=3)
    print("The next week starts again at 0:")
    run("allocate", "--week", "2026-W33", "--key", "weekly:scheduled__2026-08-10")
    run("list")
    run("check")


if __name__ == "__main__":
    main()
