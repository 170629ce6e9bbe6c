"""Hidden names in a legacy tree: inside a week they are the job's files like any other; at the top
level they are not weeks and are left alone. Nothing is lost either way, and ``check --manifest``
accounts for every file that moved. Symlinks are never followed: a week holding one is skipped whole.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from airflow_idempotent_jobs import FileEpisodeStore
from tests.clirun import run_cli
from tests.legacy_fixtures import make_legacy, tree

#: Hidden files a real legacy week picks up: Finder and editor droppings, a dot directory, and a
#: name that starts like this package's own temp files (".tmp-").
HIDDEN = {
    ".DS_Store": b"\x00\x00\x00\x01Bud1",
    "sub/.x.swp": b"b0VIM 8.2",
    ".tmp-notes": b"an editor's temp file, still the job's",
    ".git/HEAD": b"ref: refs/heads/main\n",
    "audio/.narration.mp3.part": b"ID3 partial",
}


def test_hidden_files_inside_a_week_move_with_it_and_the_manifest_accounts_for_them(tmp_path: Path) -> None:
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    week = legacy / "2026-W30"
    for relative, data in HIDDEN.items():
        (week / relative).parent.mkdir(parents=True, exist_ok=True)
        (week / relative).write_bytes(data)
    (legacy / ".DS_Store").write_bytes(b"top-level finder file")
    (legacy / ".git").mkdir()
    (legacy / ".git" / "config").write_bytes(b"[core]\n")
    (legacy / ".2026-W29-old").mkdir()  # a hidden week-like directory: not a week, left alone
    (legacy / ".2026-W29-old" / "state.json").write_text("{}")
    before = {p.relative_to(week).as_posix(): p.read_bytes() for p in week.rglob("*") if p.is_file()}
    untouched = {name: tree(legacy / name) for name in (".git", ".2026-W29-old")}

    store = tmp_path / "store"
    plan = run_cli("--store", str(store), "migrate", "--from", str(legacy))
    assert plan.code == 0, plan.stderr
    assert f"2026-W30 -> 2026-W30-0  key 'migrated:2026-W30'  unfinished  {len(before)} files" in plan.stdout

    done = run_cli("--store", str(store), "migrate", "--from", str(legacy), "--apply")
    assert (done.code, done.stderr) == (0, ""), done.stderr
    assert f"migrated 2026-W30 -> 2026-W30-0 (running): {len(before)} files moved" in done.stdout

    episode = FileEpisodeStore(store).get("2026-W30-0")
    moved = FileEpisodeStore(store).episode_dir(episode.id) / "legacy"
    after = {p.relative_to(moved).as_posix(): p.read_bytes() for p in moved.rglob("*") if p.is_file()}
    assert after == before  # every file, hidden ones included, byte for byte
    recorded = episode.metadata["migration"]["files"]
    assert recorded == {name: hashlib.sha256(data).hexdigest() for name, data in before.items()}
    (manifest,) = (store / "migrations").glob("manifest-*.json")
    (job,) = [j for j in json.loads(manifest.read_text())["jobs"] if j["legacy_week"] == "2026-W30"]
    assert {f["path"] for f in job["files"]} == set(before)
    check = run_cli("--store", str(store), "check", "--manifest", str(manifest))
    assert (check.code, check.stdout) == (0, ""), check.stdout

    # The top level's hidden entries are not weeks: not moved, not reported, not changed.
    assert not week.exists()
    assert (legacy / ".DS_Store").read_bytes() == b"top-level finder file"
    assert {name: tree(legacy / name) for name in untouched} == untouched


def test_a_hidden_file_removed_after_the_migration_is_reported_by_check(tmp_path: Path) -> None:
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    (legacy / "2026-W31" / ".DS_Store").write_bytes(b"finder")
    store = tmp_path / "store"
    assert run_cli("--store", str(store), "migrate", "--from", str(legacy), "--apply").code == 0
    (manifest,) = (store / "migrations").glob("manifest-*.json")
    lost = store / "episodes" / "2026-W31" / "2026-W31-0" / "legacy" / ".DS_Store"
    lost.unlink()
    check = run_cli("--store", str(store), "check", "--manifest", str(manifest))
    assert check.code == 1
    assert any(".DS_Store" in line and "missing" in line for line in check.stdout.splitlines()), check.stdout


def test_a_week_holding_a_symlink_anywhere_is_skipped_whole_and_left_as_it_was(tmp_path: Path) -> None:
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    secret = tmp_path / "secret.txt"
    secret.write_text("not the job's")
    os.symlink(secret, legacy / "2026-W28" / "audio" / ".link")
    os.symlink(legacy / "2026-W29", legacy / "2027-W01")  # a week directory that is itself a link
    before = {name: tree(legacy / name) for name in ("2026-W28", "2026-W29")}
    store = tmp_path / "store"
    done = run_cli("--store", str(store), "migrate", "--from", str(legacy), "--apply")
    assert done.code == 1
    skipped = sorted(line for line in done.stderr.splitlines() if line.startswith("skipped "))
    assert len(skipped) == 2, skipped
    assert "2026-W28: audio/.link is not a regular file (symlinks are not followed)" in skipped[0]
    assert "2027-W01: not a directory" in skipped[1]
    assert tree(legacy / "2026-W28") == before["2026-W28"]
    assert (legacy / "2027-W01").is_symlink() and secret.read_text() == "not the job's"
    assert not (legacy / "2026-W29").exists()  # migrated once, through its own directory
    assert [e.metadata["migration"]["legacy_week"] for e in FileEpisodeStore(store).list()] == [
        "2026-W29",
        "2026-W30",
        "2026-W31",
    ]
