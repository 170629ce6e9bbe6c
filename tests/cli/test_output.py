"""What the command writes: no terminal control taken from stored data, and output failures as one line.

Stored text (a remote reference, an error, metadata) may hold ESC sequences, C1 controls (U+009B
is a CSI on some terminals), bidi overrides and line separators: written raw, `list` or `show`
would recolour, clear or retitle the operator's terminal, or reorder what they read. The data is
planted under the store (a state.json edited, a row updated) and the real command runs in a child
process; its exact bytes are checked.

A full disk, a closed pipe or an encoding without a character on stdout is one line and exit 5
(never Python's "Exception ignored" report and exit 120, nor a traceback), and an allocation
stays committed (the same command prints it again).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_idempotent_jobs import EpisodeStore
from tests.backends import Backend, FileBackend
from tests.clirun import CHILD_TIMEOUT, RawResult, run_cli, run_cli_raw

#: What a terminal obeys or what reorders text: ESC sequences (colour, title), BEL, C1 CSI, bidi
#: override, line separator, newline, carriage return, DEL, zero-width space.
HOSTILE = "\x1b[31mRED\x1b]0;pwned\x07\x9b2J\u202eevil\u2028sep\nnext\rback\x7f\u200bend"
FORBIDDEN = ["\x1b", "\x07", "\x9b", "\u202e", "\u2028", "\r", "\x7f", "\u200b"]


def plant(backend: Backend, episode_id: str, text: str) -> None:
    """Hostile text in a remote reference, an error text and metadata, written under the store."""
    if isinstance(backend, FileBackend):
        path = backend.state_path(episode_id)
        record = json.loads(path.read_text(encoding="utf-8"))
        record["submission"].update(remote_ref="ref-" + text, error=text)
        record["metadata"] = {"note": text, text: ["nested " + text]}
        path.write_text(json.dumps(record), encoding="utf-8")
        return
    import psycopg

    with psycopg.connect(backend.url, autocommit=True) as conn:
        done = conn.execute(
            "UPDATE idempotent_jobs.episodes SET submission = submission || %s::jsonb, metadata = %s::jsonb "
            "WHERE episode_id = %s",
            (
                json.dumps({"remote_ref": "ref-" + text, "error": text}),
                json.dumps({"note": text, text: ["nested " + text]}),
                episode_id,
            ),
        ).rowcount
    assert done == 1


def assert_clean(data: bytes) -> str:
    text = data.decode("utf-8")
    for char in FORBIDDEN:
        assert char not in text, (char, text)
    return text


@pytest.fixture
def planted(backend: Backend, store: EpisodeStore) -> Backend:
    store.allocate("2026-W32", "job-a")
    store.allocate("2026-W32", "job-b")
    plant(backend, "2026-W32-1", HOSTILE)
    return backend


def test_list_shows_stored_control_characters_as_escapes(planted: Backend) -> None:
    done = run_cli_raw("--store", planted.url, "list")
    assert done.code == 0, done.stderr
    assert done.stdout is not None
    lines = assert_clean(done.stdout).split("\n")
    assert lines[-1] == "" and lines[-2] == "2 episodes" and len(lines) == 5  # header, 2 rows, footer
    assert lines[2].split()[0] == "2026-W32-1"
    assert (
        "none ref-\\x1b[31mRED\\x1b]0;pwned\\x07\\x9b2J\\u202eevil\\u2028sep\\nnext\\rback\\x7f\\u200bend" in lines[2]
    )


@pytest.mark.parametrize("args", [["show", "2026-W32-1"], ["list", "--json"], ["list", "--json", "--week", "2026-W32"]])
def test_json_output_escapes_them_and_still_reads_back_exactly(planted: Backend, args: list[str]) -> None:
    done = run_cli_raw("--store", planted.url, *args)
    assert done.code == 0, done.stderr
    assert done.stdout is not None
    lines = assert_clean(done.stdout).splitlines()
    records = [json.loads(line) for line in lines]
    (hostile,) = [r for r in records if r["episode_id"] == "2026-W32-1"]
    assert hostile["submission"]["remote_ref"] == "ref-" + HOSTILE
    assert hostile["submission"]["error"] == HOSTILE
    assert hostile["metadata"] == {"note": HOSTILE, HOSTILE: ["nested " + HOSTILE]}
    assert "\\u009b" in lines[-1 if args[0] == "show" else 1]


def test_characters_outside_the_basic_plane_are_escaped_as_json_surrogate_pairs(
    backend: Backend, store: EpisodeStore
) -> None:
    store.allocate("2026-W32", "job-a")
    tag = "\U000e0041\U000e0042"  # invisible tag characters (format, not printable)
    plant(backend, "2026-W32-0", "x" + tag + "\U0001f600")
    done = run_cli_raw("--store", backend.url, "show", "2026-W32-0")
    assert done.code == 0 and done.stdout is not None
    text = assert_clean(done.stdout)
    assert "\\udb40\\udc41\\udb40\\udc42" in text and "\U0001f600" in text  # the emoji is printable: kept
    assert json.loads(text)["metadata"]["note"] == "x" + tag + "\U0001f600"


def test_an_error_line_never_carries_stored_controls(tmp_path: Path) -> None:
    """A record written before validation, with a key no reader accepts: exit 5, one escaped line."""
    backend = FileBackend(tmp_path / "store")
    with backend.open() as store:
        store.allocate("2026-W32", "job-a")
    path = backend.state_path("2026-W32-0")
    path.write_text(path.read_text().replace('"job-a"', json.dumps("job\x1b[2J\u202e\nx")), encoding="utf-8")
    for args in (["list"], ["show", "2026-W32-0"]):
        done = run_cli_raw("--store", backend.url, *args)
        assert done.code == 5 and done.stderr is not None
        err = assert_clean(done.stderr)
        assert err.count("\n") == 1 and "Traceback" not in err, err
    check = run_cli_raw("--store", backend.url, "check")
    assert check.code == 1 and check.stdout is not None
    assert "2026-W32-0" in assert_clean(check.stdout)


def test_check_reports_a_hostile_file_name_on_one_escaped_line(tmp_path: Path) -> None:
    backend = FileBackend(tmp_path / "store")
    with backend.open() as store:
        store.allocate("2026-W32", "job-a")
    (tmp_path / "store" / "episodes" / "\x1b]0;pwned\x07\nfake: line").mkdir()
    done = run_cli_raw("--store", backend.url, "check")
    assert done.code == 1 and done.stdout is not None
    lines = assert_clean(done.stdout).splitlines()
    assert len(lines) == 1 and "\\x1b]0;pwned\\x07\\nfake: line" in lines[0], lines


# --- output that cannot be written -------------------------------------------------------------


def one_error_line(done: RawResult) -> str:
    assert done.stderr is not None
    text = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in text and "Exception ignored" not in text, text
    lines = text.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_allocate_to_a_full_disk_is_one_line_exit_5_and_the_retry_gets_the_job_back(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    with open("/dev/full", "wb") as full:
        done = run_cli_raw("--store", store, "allocate", "--week", "2026-W32", "--key", "k", stdout=full)
    assert done.code == 5
    line = one_error_line(done)
    assert "stdout" in line and "No space left on device" in line and "2026-W32-0" in line, line
    again = run_cli("--store", store, "allocate", "--week", "2026-W32", "--key", "k")
    assert (again.code, again.stdout) == (0, "2026-W32-0\n")
    assert "reused 2026-W32-0" in again.stderr


@pytest.mark.parametrize("args", [["list"], ["list", "--json"], ["show", "2026-W32-0"]])
def test_output_the_locale_cannot_encode_is_one_line_exit_5(tmp_path: Path, args: list[str]) -> None:
    store = str(tmp_path / "store")
    assert run_cli("--store", store, "allocate", "--week", "2026-W32", "--key", "café").code == 0
    done = run_cli_raw("--store", store, *args, env={"PYTHONIOENCODING": "ascii"})
    assert done.code == 5
    line = one_error_line(done)
    assert "stdout" in line and "ascii" in line and "\\xe9" in line, line


@pytest.mark.parametrize(
    "args",
    [["allocate", "--week", "2026-W32", "--key", "k"], ["list"], ["show", "2026-W32-0"], ["--help"]],
)
def test_a_closed_pipe_on_stdout_is_one_line_exit_5(tmp_path: Path, args: list[str]) -> None:
    store = str(tmp_path / "store")
    assert run_cli("--store", store, "allocate", "--week", "2026-W32", "--key", "k").code == 0
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written: `| head -0`
    try:
        done = run_cli_raw("--store", store, *args, stdout=write_end)
    finally:
        os.close(write_end)
    assert done.code == 5
    assert "Broken pipe" in one_error_line(done)


def test_a_closed_stdout_descriptor_is_one_line_exit_5(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    command = [sys.executable, "-m", "airflow_idempotent_jobs", "--store", store, "allocate"]
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *command, "--week", "2026-W32", "--key", "k"],
        capture_output=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    assert done.returncode == 5
    line = one_error_line(RawResult(done.returncode, done.stdout, done.stderr))
    assert "stdout" in line and "2026-W32-0" in line, line
    assert run_cli("--store", store, "allocate", "--week", "2026-W32", "--key", "k").stdout == "2026-W32-0\n"


def test_stderr_that_cannot_be_written_leaves_the_exit_code_and_stdout_alone(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    with open("/dev/full", "wb") as full:
        ok = run_cli_raw("--store", store, "allocate", "--week", "2026-W32", "--key", "k", stderr=full)
        bad = run_cli_raw("--store", store, "allocate", "--week", "2026-W99", "--key", "k", stderr=full)
        conflict = run_cli_raw("--store", store, "allocate", "--week", "2026-W33", "--key", "k", stderr=full)
        both = run_cli_raw("--store", store, "list", stdout=full, stderr=full)
    assert (ok.code, ok.stdout) == (0, b"2026-W32-0\n")
    assert (bad.code, bad.stdout) == (2, b"")
    assert (conflict.code, conflict.stdout) == (3, b"")
    assert both.code == 5
