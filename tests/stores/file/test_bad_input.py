"""File-store-only bad input: a root that cannot be written, and damaged derived or meta files.

Tests run as root, which ignores permission bits, so "cannot be written" is made real in two ways
root cannot bypass: a root path under a regular file, and an immutable (``chattr +i``) directory.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import AllocationConflict, FileEpisodeStore, StoreCorrupted, StoreUnavailable
from tests.backends import FileBackend
from tests.clirun import Result, run_cli


def assert_refused(result: Result, code: int) -> str:
    assert result.code == code, (result.code, result.stderr)
    assert result.stdout == ""
    return result.error_line()


@pytest.fixture
def backend(tmp_path: Path) -> FileBackend:
    backend = FileBackend(tmp_path / "store")
    with backend.open() as store:
        store.allocate("2026-W32", "job-a")
        store.allocate("2026-W32", "job-b")
    return backend


def test_a_root_under_a_regular_file_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"a regular file\n")
    root = blocker / "store"
    with pytest.raises(StoreUnavailable, match="not-a-directory"):
        FileEpisodeStore(root).allocate("2026-W32", "job-a")
    line = assert_refused(run_cli("--store", str(root), "allocate", "--week", "2026-W32", "--key", "job-a"), 5)
    assert str(blocker) in line
    assert blocker.read_bytes() == b"a regular file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-directory"]


@pytest.fixture
def immutable(backend: FileBackend) -> Iterator[Path]:
    """The store's episode tree made immutable: not even root may add an entry to it."""
    target = backend.root / "episodes" / "2026-W32"
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    made = subprocess.run(["chattr", "+i", str(target)], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not permitted here: {made.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["chattr", "-i", str(target)], check=True)


def test_an_unwritable_store_is_a_store_error_and_changes_nothing(backend: FileBackend, immutable: Path) -> None:
    before = backend.snapshot()
    with pytest.raises(StoreUnavailable, match="2026-W32"):
        backend.open().allocate("2026-W32", "job-c")
    line = assert_refused(run_cli("--store", backend.url, "allocate", "--week", "2026-W32", "--key", "job-c"), 5)
    assert str(immutable) in line
    # A retry of an existing key needs no write, so it still answers.
    retry = run_cli("--store", backend.url, "allocate", "--week", "2026-W32", "--key", "job-a")
    assert (retry.code, retry.stdout) == (0, "2026-W32-0\n")
    assert backend.snapshot() == before


HEADER = b'{"schema_version":1,"week_id":"2026-W32"}\n'


@pytest.mark.parametrize(
    ("relative", "damage"),
    [
        ("episodes/2026-W32/history.jsonl", HEADER + b'{"allocation_key":"job-a","created_at":\n'),
        (
            "episodes/2026-W32/history.jsonl",
            HEADER + b'{"allocation_key":"job-a","created_at":"x","episode_id":"2026-W32-0","sequence":1}\n',
        ),
        ("episodes/2026-W32/history.jsonl", b'{"schema_version": 7, "week_id": "2026-W32"}\n'),
        ("store.json", b'{"schema_version": 2, "namespace": "x"}'),
        ("store.json", b'{"schema_version": 1}'),
        ("index/meta.json", b"\xff\xfe"),
    ],
    ids=[
        "history-bad-line",
        "history-bad-entry",
        "history-unknown-version",
        "store-unknown-version",
        "store-no-namespace",
        "index-meta",
    ],
)
def test_a_damaged_store_file_stops_allocation_and_check_reports_it(
    backend: FileBackend, relative: str, damage: bytes
) -> None:
    path = backend.root / relative
    path.write_bytes(damage)
    before = backend.snapshot()
    with pytest.raises(StoreCorrupted) as caught:
        backend.open().allocate("2026-W32", "job-c")
    assert caught.value.where == str(path)
    line = assert_refused(run_cli("--store", backend.url, "allocate", "--week", "2026-W32", "--key", "job-c"), 5)
    assert str(path) in line
    check = run_cli("--store", backend.url, "check")
    assert check.code == 1, check.stderr
    assert str(path) in check.stdout
    assert backend.snapshot() == before


def test_an_episode_record_turned_directory_is_a_store_error_for_every_reader(backend: FileBackend) -> None:
    """Unlocked reads (get, find, list) meet the file system's errors too: exit 5, not a traceback."""
    path = backend.state_path("2026-W32-0")
    path.unlink()
    path.mkdir()
    before = backend.snapshot()
    store = backend.open()
    for read in (lambda: store.get("2026-W32-0"), lambda: store.find("job-a"), store.list):
        with pytest.raises(StoreUnavailable, match=re.escape(str(path))):
            read()
    for args in (["show", "2026-W32-0"], ["list"], ["allocate", "--week", "2026-W32", "--key", "job-a"]):
        line = assert_refused(run_cli("--store", backend.url, *args), 5)
        assert str(path) in line
    check = run_cli("--store", backend.url, "check")
    assert check.code == 1, check.stderr
    assert str(path) in check.stdout
    assert backend.snapshot() == before


def test_a_key_held_by_two_episodes_fails_closed_for_allocate_and_find(backend: FileBackend) -> None:
    """Only a hand-made copy can do this; no rule could say which job the caller owns, so none is guessed."""
    source, copy = backend.state_path("2026-W32-0").parent, backend.state_path("2026-W32-2").parent
    shutil.copytree(source, copy)
    record = json.loads((copy / "state.json").read_text())
    record.update(episode_id="2026-W32-2", sequence=2)
    (copy / "state.json").write_text(json.dumps(record))
    FileEpisodeStore(backend.root).rebuild_index()  # the copy gets its key marker, as a real second holder would have
    before = backend.snapshot()
    store = backend.open()
    for call in (lambda: store.allocate("2026-W32", "job-a"), lambda: store.find("job-a")):
        with pytest.raises(AllocationConflict, match="several episodes") as caught:
            call()
        assert caught.value.episode_ids == ("2026-W32-0", "2026-W32-2")
    line = assert_refused(run_cli("--store", backend.url, "allocate", "--week", "2026-W32", "--key", "job-a"), 3)
    assert "2026-W32-0, 2026-W32-2" in line
    assert backend.snapshot() == before


@pytest.mark.parametrize("relative", ["episodes", "episodes/2026-W32"])
def test_check_reports_a_directory_turned_regular_file_and_does_not_stop(backend: FileBackend, relative: str) -> None:
    path = backend.root / relative
    shutil.rmtree(path)
    path.write_bytes(b"not a directory\n")
    before = backend.snapshot()
    for args in (["check"], ["check", "2026-W32-0"]):
        check = run_cli("--store", backend.url, *args)
        assert check.code == 1, check.stderr
        # Named episodes are looked for in their week directory, which lies under ``path``.
        assert any(
            line.startswith(str(path)) and line.endswith(": unreadable: Not a directory")
            for line in check.stdout.splitlines()
        ), check.stdout
        assert "Traceback" not in check.stderr
    assert backend.snapshot() == before
