"""Run the real ``idempotent-jobs`` command in a child process, as an operator or a script would."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_idempotent_jobs.cli import main

#: Every child is bounded: a hang fails the test instead of stalling the suite.
CHILD_TIMEOUT = 60


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    def error_line(self) -> str:
        """The single stderr line of an expected error (asserts there is exactly one, and no traceback)."""
        lines = self.stderr.splitlines()
        assert len(lines) == 1, f"expected one stderr line, got {lines!r}"
        assert "Traceback" not in self.stderr
        return lines[0]


@dataclass(frozen=True)
class RawResult:
    """A child's exit code and the exact bytes it wrote (None for a stream not captured)."""

    code: int
    stdout: bytes | None
    stderr: bytes | None


def _child_env(env: Mapping[str, str] | None) -> dict[str, str]:
    child_env = {k: v for k, v in os.environ.items() if k != "IDEMPOTENT_JOBS_STORE"}
    child_env.update(env or {})
    return child_env


def run_cli(*args: str, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None) -> Result:
    """``python -m airflow_idempotent_jobs ARGS``; ``IDEMPOTENT_JOBS_STORE`` is unset unless ``env`` sets it."""
    done = subprocess.run(
        [sys.executable, "-m", "airflow_idempotent_jobs", *args],
        capture_output=True,
        text=True,
        env=_child_env(env),
        cwd=cwd,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def run_cli_raw(
    *args: str | bytes,
    env: Mapping[str, str] | None = None,
    stdout: Any = subprocess.PIPE,
    stderr: Any = subprocess.PIPE,
) -> RawResult:
    """The command with the streams a test chooses (``/dev/full``, a closed pipe); output kept as bytes."""
    done = subprocess.run(
        [sys.executable, "-m", "airflow_idempotent_jobs", *args],
        stdout=stdout,
        stderr=stderr,
        env=_child_env(env),
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    return RawResult(done.returncode, done.stdout, done.stderr)


def run_python(code: str, *args: str) -> Result:
    """``python -c CODE ARGS``: another process using the library directly."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def run_main(*args: str) -> Result:
    """The same command run in this process (``cli.main``): for the many small bad-input cases.

    A few cases of each kind still go through `run_cli`, so the process boundary is covered too.
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse reports usage errors by exiting
            code = exc.code if isinstance(exc.code, int) else 2
    return Result(code, out.getvalue(), err.getvalue())
