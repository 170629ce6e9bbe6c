"""A local HTTP server module in its own OS process, for tests that need a real process boundary.

Every server the project runs this way (``airflow_idempotent_jobs.testing.server`` and the example
APIs) takes ``--port 0``, prints its URL as the first stdout line and exits 0 on SIGTERM.
Standard library only: the Airflow scenario process imports it before Airflow.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class ServerProcess:
    #: The server's origin, as it printed it.
    url: str
    #: Its exit code once the ``with`` block ended (SIGTERM was sent); None while it runs.
    returncode: int | None = None


@contextlib.contextmanager
def server_process(module: str, *args: str) -> Iterator[ServerProcess]:
    """``python -m <module> --port 0 <args>`` from the repository root, SIGTERM when the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()  # the server prints its URL first
        assert url.startswith("http://127.0.0.1:"), url
        running = ServerProcess(url)
        yield running
    finally:
        proc.terminate()
        returncode = proc.wait(timeout=10)
    running.returncode = returncode
