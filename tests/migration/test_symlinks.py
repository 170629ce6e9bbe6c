"""``migrate`` writes its manifest, journal and lock under the store root: never through a symlink.

The store itself refuses links anywhere under its root (see ``test_file_store_symlinks.py``); the
migration's own directory ``migrations/`` is under the same root, so a ``migrations`` or
``migrations/journal`` moved to another disk and linked back, or a ``.lock`` linked to some other
file, must stop the command with one line naming the link (exit 5) before anything is written,
read or truncated through it: the directory outside, the legacy tree and the store stay as they were.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from airflow_idempotent_jobs import FileEpisodeStore
from tests.clirun import run_cli
from tests.legacy_fixtures import make_legacy, tree

#: (the part of ``migrations/`` replaced by a link to a place outside the store, --apply or a dry
#: run); a dry run reads the journal but takes no lock.
CASES = [
    ("migrations", True),
    ("migrations", False),
    ("migrations/journal", True),
    ("migrations/journal", False),
    ("migrations/.lock", True),
]


def _setup(tmp_path: Path, linked: str) -> tuple[Path, Path, Path, Path]:
    """(store root, legacy root, the link, the directory outside the store)."""
    root = tmp_path / "store"
    FileEpisodeStore(root).allocate("2026-W40", "before")
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    link = root / linked
    link.parent.mkdir(parents=True, exist_ok=True)
    if linked.endswith(".lock"):
        # Another file the link points at: opening it to lock must not truncate it.
        (outside / "precious.txt").write_text("not the store's\n")
        link.symlink_to(outside / "precious.txt")
    else:
        (outside / "kept.txt").write_text("mine\n")
        link.symlink_to(outside, target_is_directory=True)
    return root, legacy, link, outside


@pytest.mark.parametrize(("linked", "apply"), CASES)
def test_migrate_refuses_a_symlink_in_its_own_directory(tmp_path: Path, linked: str, apply: bool) -> None:
    root, legacy, link, outside = _setup(tmp_path, linked)
    before_outside, before_legacy = tree(outside), tree(legacy)
    episodes = [e.episode_id for e in FileEpisodeStore(root).list()]
    done = run_cli("--store", str(root), "migrate", "--from", str(legacy), *(["--apply"] if apply else []))
    assert done.code == 5, (done.code, done.stdout, done.stderr)
    line = done.error_line()
    assert str(link) in line and "symbolic link" in line, line
    assert tree(outside) == before_outside
    assert tree(legacy) == before_legacy
    assert [e.episode_id for e in FileEpisodeStore(root).list()] == episodes


def test_once_the_link_is_replaced_by_a_directory_the_migration_runs(tmp_path: Path) -> None:
    """The positive control: the same store and legacy tree migrate once ``migrations`` is real."""
    root, legacy, link, outside = _setup(tmp_path, "migrations")
    link.unlink()
    shutil.copytree(outside, link)
    done = run_cli("--store", str(root), "migrate", "--from", str(legacy), "--apply")
    assert done.code == 0, done.stderr
    assert len(FileEpisodeStore(root).list()) == 5
