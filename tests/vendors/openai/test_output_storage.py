"""A batch's output goes to storage, never into XCom or the record: `OpenAIBatchHook.write_output`.

Streamed to an `ObjectStoragePath` through a temporary sibling renamed into place: the file holds
exactly the API's output; a write that fails (here a real file-size limit, as a full disk fails it)
leaves the earlier file as it was and no partial one; a link, a FIFO or a directory at the
destination is refused, never written through.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
from pathlib import Path

import pytest

from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.testing.openai_api import OpenAIApi
from airflow_idempotent_jobs.vendors.openai import OpenAIBatchHook
from tests.vendors.openai.support import PRICES, chat_request, download, provider

pytestmark = pytest.mark.airflow


def finished_batch(api: OpenAIApi, monkeypatch: pytest.MonkeyPatch) -> tuple[str, bytes]:
    """A completed batch of 40 requests, the hook's connection pointing at the double, and its output's bytes."""
    connection = {"conn_type": "openai", "host": api.base_url, "password": api.api_key}
    monkeypatch.setenv("AIRFLOW_CONN_OPENAI_DEFAULT", json.dumps({**connection, "extra": {"batch_prices": PRICES}}))
    paid = provider(api)
    ref = paid.submit(chat_request(40), "tok-storage")
    done = paid.status(ref)
    output = download(api, done.result["output_file_id"])
    assert output.count(b"\n") == 40
    return ref, output


def test_the_output_lands_whole_at_the_destination(
    api: OpenAIApi, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ref, output = finished_batch(api, monkeypatch)
    target = tmp_path / "week" / "2026-W32.jsonl"
    target.parent.mkdir()
    assert OpenAIBatchHook().write_output(ref, f"file://{target}") == len(output)
    assert target.read_bytes() == output
    assert sorted(os.listdir(target.parent)) == ["2026-W32.jsonl"]  # no partial file left
    target.write_bytes(b"last week's")  # written again: replaced whole
    assert OpenAIBatchHook().write_output(ref, str(target)) == len(output)
    assert target.read_bytes() == output


def write_under_a_size_limit(ref: str, target: Path) -> int | None:
    """``write_output`` in a forked child whose files may not pass 4 KiB (a write past it fails with EFBIG,
    as one fails on a full disk); the errno it met, or None."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report the errno on the pipe, never return into pytest
        code = 1
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
            OpenAIBatchHook().write_output(ref, str(target))
            code = 0
        except OSError as exc:
            os.write(write, str(exc.errno).encode())
            code = 5
        finally:
            os._exit(code)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    seen = os.read(read, 64).decode()
    os.close(read)
    assert os.waitstatus_to_exitcode(status) in (0, 5), status
    return int(seen) if seen else None


def test_a_write_that_fails_midway_leaves_the_earlier_file_and_no_partial_one(
    api: OpenAIApi, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ref, output = finished_batch(api, monkeypatch)
    assert len(output) > 4096
    target = tmp_path / "2026-W32.jsonl"
    target.write_bytes(b"last week's output\n")
    assert write_under_a_size_limit(ref, target) == errno.EFBIG
    assert target.read_bytes() == b"last week's output\n"
    assert os.listdir(tmp_path) == ["2026-W32.jsonl"]


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_a_destination_that_is_no_regular_file_is_refused(
    api: OpenAIApi, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str
) -> None:
    ref, _ = finished_batch(api, monkeypatch)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not yours\n")
    target = tmp_path / "out.jsonl"
    if kind == "symlink":
        target.symlink_to(elsewhere)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    with pytest.raises(InvalidConfiguration, match="destination") as refused:
        OpenAIBatchHook().write_output(ref, str(target))
    assert "\n" not in str(refused.value)
    assert elsewhere.read_text() == "not yours\n"
    assert sorted(os.listdir(tmp_path)) == ["elsewhere.txt", "out.jsonl"]
