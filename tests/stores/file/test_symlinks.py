"""No command reads or writes through a symbolic link inside the file store; `check` reports every one.

Each case moves one part of a populated store out of it and leaves a symlink in its place, as a
misguided "move it to the bigger disk" would. Every command that would touch that part must stop
with `StoreCorrupted` (exit 5, one line naming the link), the directory outside must stay exactly
as it was, and ``idempotent-jobs check`` must name the link. A store root given as a symlink is
resolved once when the store is opened: that is an ordinary way to name a directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_idempotent_jobs import FileEpisodeStore, StoreCorrupted
from airflow_idempotent_jobs.episode import Episode, SubmissionState
from airflow_idempotent_jobs.stores.file import key_digest
from tests.clirun import Result, run_cli, run_main

BUCKET = key_digest("k0")[:2]

ALLOCATE_NEW = ("allocate", "--week", "2026-W32", "--key", "k-new")
RETRY = ("allocate", "--week", "2026-W32", "--key", "k0")
SHOW = ("show", "2026-W32-0")
LIST = ("list",)
RECONCILE = ("reconcile", "2026-W32-0", "--not-submitted", "--by", "tester")
REBUILD = ("rebuild-index",)
READS_AND_WRITES = [ALLOCATE_NEW, RETRY, SHOW, LIST, RECONCILE]

#: The part replaced by a symlink, and the commands that must refuse to go through it.
CASES: dict[str, list[tuple[str, ...]]] = {
    "episodes": [*READS_AND_WRITES, REBUILD],
    "episodes/2026-W32": [*READS_AND_WRITES, REBUILD],
    "episodes/2026-W32/2026-W32-0": [RETRY, SHOW, LIST, RECONCILE, REBUILD],
    "episodes/2026-W32/2026-W32-0/state.json": [RETRY, SHOW, LIST, RECONCILE, REBUILD],
    "episodes/2026-W32/history.jsonl": [ALLOCATE_NEW],
    "index": [ALLOCATE_NEW, RETRY, REBUILD],
    "index/keys": [ALLOCATE_NEW, RETRY, REBUILD],
    f"index/keys/{BUCKET}": [RETRY],
    "index/log": [ALLOCATE_NEW, RETRY, REBUILD],
    f"index/log/{BUCKET}.log": [RETRY],
    "index/meta.json": [ALLOCATE_NEW, RETRY, RECONCILE],
    "store.json": [ALLOCATE_NEW, RETRY, RECONCILE],
    ".lock": [ALLOCATE_NEW, RETRY, RECONCILE, REBUILD],
}


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed) with its content hash or kind."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            if path.is_symlink():
                found[str(path.relative_to(root))] = "-> " + os.readlink(path)
            elif path.is_dir():
                found[str(path.relative_to(root)) + "/"] = "dir"
            else:
                found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def unknown_submission(store: FileEpisodeStore, episode_id: str) -> None:
    """Leave ``episode_id`` with a submission in ``unknown``, the state ``reconcile`` settles."""

    def change(episode: Episode) -> Episode:
        sub = episode.submission.moved_to(SubmissionState.SUBMITTING, episode_id=episode_id, token="t-1")
        sub = sub.moved_to(SubmissionState.UNKNOWN, episode_id=episode_id)
        return dataclasses.replace(episode, submission=sub)

    store.update(episode_id, change)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    store = FileEpisodeStore(root)
    store.allocate("2026-W32", "k0")
    store.allocate("2026-W32", "k1")
    store.allocate("2026-W33", "k2")
    unknown_submission(store, "2026-W32-0")
    return root


def link_out(root: Path, relative: str) -> tuple[Path, Path]:
    """Move ``relative`` out of the store and put a symlink to it in its place."""
    inside = root / relative
    outside = root.parent / "outside" / relative.replace("/", "_")
    outside.parent.mkdir(exist_ok=True)
    shutil.move(str(inside), str(outside))
    inside.symlink_to(outside, target_is_directory=outside.is_dir())
    return inside, outside


def assert_refused(result: Result, link: Path) -> None:
    assert result.code == 5, (result.code, result.stdout, result.stderr)
    assert result.stdout == ""
    line = result.error_line()
    assert str(link) in line, line
    assert "symbolic link" in line, line


@pytest.mark.parametrize("relative", CASES)
def test_no_command_goes_through_a_symlink_and_check_reports_it(root: Path, relative: str) -> None:
    link, outside = link_out(root, relative)
    before_outside, before_store = tree(outside.parent), tree(root)
    for command in CASES[relative]:
        assert_refused(run_main("--store", str(root), *command), link)
    assert tree(outside.parent) == before_outside
    assert tree(root) == before_store
    check = run_main("--store", str(root), "check")
    assert check.code == 1, (check.stdout, check.stderr)
    assert any(line.startswith(f"{link}: ") and "symbolic link" in line for line in check.stdout.splitlines()), (
        check.stdout
    )


def test_the_store_api_raises_store_corrupted_for_a_symlinked_week(root: Path) -> None:
    link, outside = link_out(root, "episodes/2026-W32")
    before = tree(outside.parent)
    store = FileEpisodeStore(root)
    calls: list[Callable[[], object]] = [
        lambda: store.allocate("2026-W32", "k-new"),
        lambda: store.allocate("2026-W32", "k0"),
        lambda: store.get("2026-W32-0"),
        lambda: store.find("k0"),
        store.list,
        lambda: store.update("2026-W32-0", lambda e: dataclasses.replace(e, metadata={"x": 1})),
    ]
    for call in calls:
        with pytest.raises(StoreCorrupted) as caught:
            call()
        assert caught.value.where == str(link)
    assert tree(outside.parent) == before


@pytest.mark.parametrize("relative", ["episodes/2026-W32", "episodes/2026-W32/2026-W32-0"])
def test_reconcile_in_its_own_process_never_rewrites_a_record_outside_the_store(root: Path, relative: str) -> None:
    link, outside = link_out(root, relative)
    before = tree(outside.parent)
    assert_refused(run_cli("--store", str(root), *RECONCILE), link)
    if relative == "episodes/2026-W32":
        assert_refused(run_cli("--store", str(root), *ALLOCATE_NEW), link)
    assert tree(outside.parent) == before


def test_a_symlink_to_a_place_inside_the_store_is_refused_too(root: Path) -> None:
    """Even a link that stays inside the root is refused: the store never follows links at all."""
    week = root / "episodes" / "2026-W32"
    shutil.move(str(week), str(root / "elsewhere"))
    week.symlink_to(root / "elsewhere", target_is_directory=True)
    assert_refused(run_main("--store", str(root), *SHOW), week)


def test_a_root_given_as_a_symlink_is_resolved_once_and_works(root: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    store = FileEpisodeStore(alias)
    assert store.root == root
    assert store.allocate("2026-W32", "k0").reused
    assert store.allocate("2026-W32", "k-new").episode_id == "2026-W32-2"
    done = run_cli("--store", str(alias), "allocate", "--week", "2026-W32", "--key", "k-new")
    assert (done.code, done.stdout) == (0, "2026-W32-2\n")
    check = run_cli("--store", str(alias), "check")
    assert check.code == 0, check.stdout


def test_check_reports_every_symlink_even_where_no_command_looks(root: Path) -> None:
    extra = [root / "episodes" / "2026-W33" / "2026-W33-0" / "notes.txt", root / "index" / "stray"]
    for path in extra:
        path.symlink_to("/etc/hostname")
    check = run_main("--store", str(root), "check")
    assert check.code == 1
    for path in extra:
        assert f"{path}: " in check.stdout
