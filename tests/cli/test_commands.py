"""The ``idempotent-jobs`` command as an operator uses it, each call in its own process."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_idempotent_jobs import Episode, FileEpisodeStore
from tests.clirun import CHILD_TIMEOUT, run_cli

EPISODE_FIELDS = {f.name for f in dataclasses.fields(Episode)}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


def allocate(root: Path, *args: str) -> str:
    done = run_cli("--store", str(root), "allocate", *args)
    assert done.code == 0, done.stderr
    return done.stdout


def test_allocate_prints_only_the_episode_id(root: Path) -> None:
    done = run_cli("--store", str(root), "allocate", "--week", "2026-W32", "--key", "job-a")
    assert (done.code, done.stdout) == (0, "2026-W32-0\n")
    assert "allocated 2026-W32-0" in done.stderr
    again = run_cli("--store", str(root), "allocate", "--week", "2026-W32", "--key", "job-a")
    assert (again.code, again.stdout) == (0, "2026-W32-0\n")
    assert "reused 2026-W32-0" in again.stderr
    assert allocate(root, "--week", "2026-W32", "--key", "job-b", "--fingerprint", "sha256:f") == "2026-W32-1\n"


@pytest.mark.parametrize(
    ("date", "tz", "week"),
    [
        ("2026-08-03", None, "2026-W32"),
        ("2024-12-30", None, "2025-W01"),
        ("2027-01-01", None, "2026-W53"),
        ("2026-08-02T22:30:00+00:00", None, "2026-W31"),
        ("2026-08-02T22:30:00+00:00", "Europe/Berlin", "2026-W32"),
        ("2026-08-02T22:30:00Z", "UTC", "2026-W31"),
    ],
)
def test_allocate_by_date_uses_the_iso_week_in_the_time_zone(root: Path, date: str, tz: str | None, week: str) -> None:
    extra = ["--tz", tz] if tz else []
    assert allocate(root, "--date", date, *extra, "--key", "job-a") == f"{week}-0\n"


def test_show_prints_the_episode_with_its_field_names(root: Path) -> None:
    allocate(root, "--week", "2026-W32", "--key", "job-a", "--fingerprint", "sha256:f")
    done = run_cli("--store", str(root), "show", "2026-W32-0")
    assert done.code == 0, done.stderr
    shown = json.loads(done.stdout)
    assert set(shown) == EPISODE_FIELDS
    assert shown["sequence"] == 0
    assert isinstance(shown["sequence"], int)
    assert shown["episode_id"] == "2026-W32-0"
    assert shown["week_id"] == "2026-W32"
    assert shown["allocation_key"] == "job-a"
    assert shown["fingerprint"] == "sha256:f"
    assert shown["status"] == "allocated"
    assert shown["submission"]["state"] == "none"


def test_list_prints_a_table_or_json_lines(root: Path) -> None:
    for week, key in [("2026-W33", "job-c"), ("2026-W32", "job-a"), ("2026-W32", "job-b")]:
        allocate(root, "--week", week, "--key", key)
    table = run_cli("--store", str(root), "list")
    assert table.code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["EPISODE", "STATUS", "DECISION", "SUBMISSION", "COST", "CREATED", "KEY"]
    assert [line.split()[0] for line in lines[1:-1]] == ["2026-W32-0", "2026-W32-1", "2026-W33-0"]
    assert lines[1].split()[-1] == "job-a"
    assert lines[-1] == "3 episodes"

    as_json = run_cli("--store", str(root), "list", "--json", "--week", "2026-W32")
    assert as_json.code == 0, as_json.stderr
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(r["episode_id"], r["sequence"], r["allocation_key"]) for r in rows] == [
        ("2026-W32-0", 0, "job-a"),
        ("2026-W32-1", 1, "job-b"),
    ]
    assert all(set(r) == EPISODE_FIELDS for r in rows)

    empty = run_cli("--store", str(root), "list", "--week", "2027-W01")
    assert (empty.code, empty.stdout.splitlines()[-1]) == (0, "0 episodes")


def test_check_accepts_a_healthy_store_and_names_missing_episodes(root: Path) -> None:
    allocate(root, "--week", "2026-W32", "--key", "job-a")
    allocate(root, "--week", "2026-W33", "--key", "job-b")
    whole = run_cli("--store", str(root), "check")
    assert (whole.code, whole.stdout) == (0, "")
    assert "0 problems" in whole.stderr
    some = run_cli("--store", str(root), "check", "2026-W32-0", "2026-W33-0")
    assert some.code == 0, some.stdout
    missing = run_cli("--store", str(root), "check", "--json", "2026-W32-5")
    assert missing.code == 1
    problems = [json.loads(line) for line in missing.stdout.splitlines()]
    assert any("2026-W32-5" in p["where"] for p in problems)


def test_rebuild_index_restores_a_deleted_index(root: Path) -> None:
    allocate(root, "--week", "2026-W32", "--key", "job-a")
    allocate(root, "--week", "2026-W32", "--key", "job-b")
    allocate(root, "--week", "2026-W33", "--key", "job-c")
    shutil.rmtree(root / "index")
    (root / "episodes" / "2026-W32" / "history.jsonl").unlink()
    rebuilt = run_cli("--store", str(root), "rebuild-index")
    assert rebuilt.code == 0, rebuilt.stderr
    assert "3 episodes" in rebuilt.stderr
    assert (root / "index" / "meta.json").is_file()
    check = run_cli("--store", str(root), "check")
    assert check.code == 0, check.stdout
    # The rebuilt index answers retries, and the rebuilt history keeps the sequence going.
    assert allocate(root, "--week", "2026-W33", "--key", "job-c") == "2026-W33-0\n"
    assert allocate(root, "--week", "2026-W32", "--key", "job-d") == "2026-W32-2\n"
    assert FileEpisodeStore(root).find("job-b") is not None


def test_the_store_comes_from_the_environment_when_not_given(root: Path) -> None:
    done = run_cli("allocate", "--week", "2026-W32", "--key", "job-a", env={"IDEMPOTENT_JOBS_STORE": str(root)})
    assert (done.code, done.stdout) == (0, "2026-W32-0\n")
    via_url = run_cli("--store", f"file://{root}", "show", "2026-W32-0")
    assert via_url.code == 0, via_url.stderr


def test_no_store_at_all_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli("list")
    assert done.code == 2
    assert "--store" in done.error_line()
    assert done.stdout == ""


def test_the_console_script_and_the_module_are_the_same_command(root: Path) -> None:
    script = Path(sys.executable).with_name("idempotent-jobs")
    done = subprocess.run(
        [str(script), "--store", str(root), "allocate", "--week", "2026-W32", "--key", "job-a"],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "2026-W32-0\n")
    module = run_cli("--help")
    assert module.code == 0
    for command in ("allocate", "show", "list", "check", "rebuild-index"):
        assert command in module.stdout
