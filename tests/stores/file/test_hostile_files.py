"""Hostile contents and hostile file types in a file store: one line, the right exit code, no hang.

Every store file we read was written by us, but anyone with access to the directory may put
something else there: JSON nested 200 000 deep, ``1e999`` or a 5 000-digit number where an integer
belongs, or a FIFO or a character device where a file should be. Each command must end quickly
(the children are bounded by a timeout far below the suite's) with exit 5 and one line naming the
file, and ``check`` with exit 1 and a line naming it. A store path that is a regular file is said
to be one by every command.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_idempotent_jobs import FileEpisodeStore
from airflow_idempotent_jobs.stores.file import key_digest
from tests.clirun import Result

#: A child that hangs (a FIFO opened for reading) fails the test here, long before the suite's timeout.
BOUND = 20

DEEP = b"[" * 200_000 + b"]" * 200_000
HUGE_INT = b"1" + b"0" * 4_999
HEADER = b'{"schema_version":1,"week_id":"2026-W32"}\n'

ALLOCATE_NEW = ("allocate", "--week", "2026-W32", "--key", "k-new")
RETRY = ("allocate", "--week", "2026-W32", "--key", "k0")
SHOW = ("show", "2026-W32-0")
LIST = ("list",)


def cli(root: Path, *args: str) -> Result:
    done = subprocess.run(
        [sys.executable, "-m", "airflow_idempotent_jobs", "--store", str(root), *args],
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    store = FileEpisodeStore(root)
    store.allocate("2026-W32", "k0")
    store.allocate("2026-W32", "k1")
    return root


def assert_one_line(result: Result, path: Path, code: int = 5) -> None:
    assert result.code == code, (result.code, result.stdout, result.stderr[-2000:])
    assert result.stdout == ""
    assert str(path) in result.error_line()


def assert_check_reports(root: Path, path: Path) -> None:
    check = cli(root, "check")
    assert check.code == 1, (check.stdout, check.stderr[-2000:])
    assert "Traceback" not in check.stderr
    assert any(line.startswith(f"{path}: ") for line in check.stdout.splitlines()), check.stdout


# -- hostile JSON ----------------------------------------------------------------------------------

#: (file, what the commands that read it find there, the commands that read it)
CONTENTS: dict[str, tuple[str, bytes, list[tuple[str, ...]]]] = {
    "state-deep": ("episodes/2026-W32/2026-W32-0/state.json", DEEP, [RETRY, SHOW, LIST]),
    # A whole record, with only its sequence made hostile.
    "state-inf": ("episodes/2026-W32/2026-W32-0/state.json", b"1e999", [RETRY, SHOW, LIST]),
    "state-huge-int": ("episodes/2026-W32/2026-W32-0/state.json", HUGE_INT, [RETRY, SHOW, LIST]),
    "store-deep": ("store.json", DEEP, [ALLOCATE_NEW]),
    "store-inf": ("store.json", b'{"schema_version": 1e999, "namespace": "x"}', [ALLOCATE_NEW]),
    "store-huge-int": ("store.json", b'{"schema_version": ' + HUGE_INT + b', "namespace": "x"}', [ALLOCATE_NEW]),
    "meta-deep": ("index/meta.json", DEEP, [ALLOCATE_NEW]),
    "meta-inf": ("index/meta.json", b'{"schema_version": 1, "bucket_chars": 1e999}', [ALLOCATE_NEW]),
    "meta-huge-int": ("index/meta.json", b'{"schema_version": ' + HUGE_INT + b"}", [ALLOCATE_NEW]),
    # A retry reads its holder's week from the records, not from the history.
    "history-deep": ("episodes/2026-W32/history.jsonl", HEADER + DEEP + b"\n", [ALLOCATE_NEW]),
    "history-inf": (
        "episodes/2026-W32/history.jsonl",
        HEADER + b'{"allocation_key":"k9","created_at":"x","episode_id":"2026-W32-9","sequence":1e999}\n',
        [ALLOCATE_NEW],
    ),
    "history-huge-int": (
        "episodes/2026-W32/history.jsonl",
        HEADER + b'{"allocation_key":"k9","created_at":"x","episode_id":"2026-W32-9","sequence":' + HUGE_INT + b"}\n",
        [ALLOCATE_NEW],
    ),
}


@pytest.mark.parametrize("case", CONTENTS)
def test_hostile_json_in_a_store_file_is_one_line_naming_it(root: Path, case: str) -> None:
    relative, content, commands = CONTENTS[case]
    path = root / relative
    if case.startswith("state-") and case != "state-deep":
        original = path.read_bytes()
        assert b'"sequence": 0,' in original
        content = original.replace(b'"sequence": 0,', b'"sequence": ' + content + b",")
    path.write_bytes(content)
    for command in commands:
        assert_one_line(cli(root, *command), path)
    assert_check_reports(root, path)
    assert path.read_bytes() == content


# -- files that are not regular files --------------------------------------------------------------


def fifo(path: Path) -> None:
    os.mkfifo(path)


def device(numbers: os.stat_result) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        os.mknod(path, 0o600 | stat.S_IFCHR, numbers.st_rdev)

    return make


KINDS: dict[str, Callable[[Path], None]] = {
    "fifo": fifo,
    "dev-null": device(os.stat("/dev/null")),
    "dev-zero": device(os.stat("/dev/zero")),
}
PLACES: dict[str, tuple[str, list[tuple[str, ...]]]] = {
    "state": ("episodes/2026-W32/2026-W32-0/state.json", [RETRY, SHOW, LIST]),
    "store": ("store.json", [ALLOCATE_NEW, RETRY]),
    "meta": ("index/meta.json", [ALLOCATE_NEW, RETRY]),
    "history": ("episodes/2026-W32/history.jsonl", [ALLOCATE_NEW]),
    "key-log": (f"index/log/{key_digest('k0')[:2]}.log", [RETRY]),
    "lock": (".lock", [ALLOCATE_NEW, RETRY]),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("place", PLACES)
def test_a_fifo_or_a_device_in_place_of_a_store_file_never_hangs_a_command(root: Path, place: str, kind: str) -> None:
    relative, commands = PLACES[place]
    path = root / relative
    path.unlink()
    KINDS[kind](path)
    for command in commands:
        assert_one_line(cli(root, *command), path)
    if place != "lock":  # check never takes the lock, so it has no reason to look at it
        assert_check_reports(root, path)
    assert not path.is_file() and path.exists()


# -- a store path that is a regular file -----------------------------------------------------------


def test_a_store_root_that_is_a_regular_file_is_said_to_be_one_by_every_command(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.write_bytes(b"not a store\n")
    for command in [ALLOCATE_NEW, SHOW, LIST, ("rebuild-index",)]:
        result = cli(root, *command)
        assert_one_line(result, root)
        assert "not a directory" in result.stderr
    check = cli(root, "check")
    assert check.code == 1
    assert check.stdout == f"{root}: not a directory\n"
    assert root.read_bytes() == b"not a store\n"


def test_reconcile_and_migrate_say_so_too(tmp_path: Path) -> None:
    """``migrate`` names the store root's problem, never "store I/O failed at <root>/migrations/journal"."""
    root = tmp_path / "store"
    root.write_bytes(b"not a store\n")
    legacy = tmp_path / "legacy"
    (legacy / "2026-W30").mkdir(parents=True)
    (legacy / "2026-W30" / "state.json").write_text('{"status": "draft"}')
    for command in [
        ("reconcile", "2026-W32-0", "--not-submitted", "--by", "tester"),
        ("migrate", "--from", str(legacy)),
        ("migrate", "--from", str(legacy), "--apply"),
    ]:
        result = cli(root, *command)
        assert_one_line(result, root)
        assert f"{root}: not a directory" in result.stderr, result.stderr
    assert root.read_bytes() == b"not a store\n"
    assert (legacy / "2026-W30" / "state.json").is_file()


@pytest.mark.parametrize("relative", ["episodes", "index"])
def test_an_episodes_or_index_path_that_is_a_regular_file_is_named_by_every_command(root: Path, relative: str) -> None:
    path = root / relative
    os.rename(path, root.parent / "moved")
    path.write_bytes(b"not a directory\n")
    commands = [ALLOCATE_NEW, RETRY] + ([SHOW, LIST] if relative == "episodes" else [])
    for command in commands:
        result = cli(root, *command)
        assert_one_line(result, path)
        assert "not a directory" in result.stderr
    assert_check_reports(root, path)
    assert path.read_bytes() == b"not a directory\n"


# -- files written in place that have another name -------------------------------------------------

HARD_LINKED: dict[str, tuple[str, list[tuple[str, ...]]]] = {
    "history": ("episodes/2026-W32/history.jsonl", [ALLOCATE_NEW]),
    "key-log": (f"index/log/{key_digest('k-new')[:2]}.log", [ALLOCATE_NEW]),
    "lock": (".lock", [ALLOCATE_NEW, RETRY]),
}


@pytest.mark.parametrize("place", HARD_LINKED)
def test_a_file_written_in_place_with_a_second_name_outside_is_refused_before_any_write(
    root: Path, tmp_path: Path, place: str
) -> None:
    """A hard link is no symlink, but appending to it writes to its other name: refused before the commit."""
    relative, commands = HARD_LINKED[place]
    path = root / relative
    outside = tmp_path / "outside-name"
    os.link(path, outside)
    before, listed = outside.read_bytes(), sorted(p.name for p in (root / "episodes" / "2026-W32").iterdir())
    for command in commands:
        result = cli(root, *command)
        assert_one_line(result, path)
        assert "hard links" in result.stderr
    assert outside.read_bytes() == before
    assert sorted(p.name for p in (root / "episodes" / "2026-W32").iterdir()) == listed
    assert_check_reports(root, path)
