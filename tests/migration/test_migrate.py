"""`idempotent-jobs migrate`: dry run, apply, idempotence, key map, bad legacy entries, devices."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import EpisodeStatus, FileEpisodeStore, SubmissionState
from airflow_idempotent_jobs.cli import main
from airflow_idempotent_jobs.migration.manifest import load_manifest
from tests.legacy_fixtures import BAD_ENTRIES, GOOD_WEEKS, make_legacy, tree


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    return make_legacy(tmp_path / "legacy")


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A store where week 2026-W30 already has an episode, so its migrated job gets sequence 1."""
    path = tmp_path / "store"
    FileEpisodeStore(path).allocate("2026-W30", "airflow:weekly:allocate:manual__2026-07-21T10:00:00+00:00")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def manifest_of(out: str) -> Path:
    (line,) = [line for line in out.splitlines() if line.startswith("manifest: ")]
    return Path(line.removeprefix("manifest: "))


def test_dry_run_prints_the_plan_and_changes_nothing(capsys, legacy: Path, store_path: Path) -> None:
    before = tree(legacy.parent)
    code, out, err = run(capsys, "--store", str(store_path), "migrate", "--from", str(legacy))
    assert tree(legacy.parent) == before
    assert code == 1  # the bad entries are problems
    assert "2026-W28 -> 2026-W28-0  key 'migrated:2026-W28'  finished  5 files" in out
    assert "2026-W30 -> 2026-W30-1" in out  # the next free sequence, after the existing 2026-W30-0
    assert "2026-W31 -> 2026-W31-0" in out and "dry run: nothing changed" in out
    for bad in BAD_ENTRIES:
        assert f"skipped {legacy / bad}:" in err


def test_apply_migrates_every_job_and_check_passes_with_the_manifest(capsys, legacy: Path, store_path: Path) -> None:
    inodes = {p.relative_to(legacy).as_posix(): p.stat().st_ino for p in legacy.rglob("*") if p.is_file()}
    bad_before = {bad: tree(legacy / bad) for bad in BAD_ENTRIES}
    history_before = (legacy / "history.json").read_bytes()
    code, out, err = run(capsys, "--store", str(store_path), "migrate", "--from", str(legacy), "--apply")
    assert code == 1, err
    manifest_path = manifest_of(out)
    assert manifest_path.is_file() and out.index("manifest: ") < out.index("migrated 2026-W28")
    assert "migrated 2026-W30 -> 2026-W30-1 (running)" in out
    assert "done: 4 migrated, 3 skipped" in out
    # The bad entries are reported and untouched, the history file too; the good weeks are gone.
    assert {bad: tree(legacy / bad) for bad in BAD_ENTRIES} == bad_before
    assert (legacy / "history.json").read_bytes() == history_before
    assert not any((legacy / week).exists() for week in GOOD_WEEKS)
    store = FileEpisodeStore(store_path)
    by_week = {e.metadata["migration"]["legacy_week"]: e for e in store.list() if "migration" in e.metadata}
    assert sorted(by_week) == list(GOOD_WEEKS)
    # Moved, not rewritten: the same inodes, under <episode>/legacy/.
    for week, episode in by_week.items():
        base = store.episode_dir(episode.id) / "legacy"
        for rel, ino in inodes.items():
            if rel.startswith(week + "/"):
                assert (base / rel.removeprefix(week + "/")).stat().st_ino == ino
    w28 = by_week["2026-W28"]
    assert (w28.episode_id, w28.status, w28.allocation_key) == (
        "2026-W28-0",
        EpisodeStatus.SUCCEEDED,
        "migrated:2026-W28",
    )
    assert w28.submission.state is SubmissionState.SUCCEEDED and w28.submission.remote_ref == "acme-001c-render"
    assert w28.submission.cost == pytest.approx(13.25)
    assert w28.metadata["legacy_history"] == {
        "status": "published",
        "published_at": "2026-07-11T09:00:00Z",
        "views": 1840,
    }
    original = json.loads((store.episode_dir(w28.id) / "legacy" / "state.json").read_text())
    assert w28.metadata["legacy_state"] == original
    record = w28.metadata["migration"]
    assert (record["episode_id"], record["week_id"], record["sequence"]) == ("2026-W28-0", "2026-W28", 0)
    assert record["source"] == str(legacy / "2026-W28") and record["tool_version"] and record["migrated_at"]
    w30, w31 = by_week["2026-W30"], by_week["2026-W31"]
    assert (w30.episode_id, w30.status, w30.submission.state) == (
        "2026-W30-1",
        EpisodeStatus.RUNNING,
        SubmissionState.ACCEPTED,
    )
    assert (w31.status, w31.submission.state, w31.submission.cost) == (
        EpisodeStatus.ALLOCATED,
        SubmissionState.NONE,
        None,
    )
    manifest = load_manifest(manifest_path)
    assert [str(job.job.week) for job in manifest.jobs] == list(GOOD_WEEKS)
    assert sum(len(job.job.remote_refs) for job in manifest.jobs) == 5
    assert sum(len(job.job.cost_records) for job in manifest.jobs) == 6
    code, out, err = run(capsys, "--store", str(store_path), "check", "--manifest", str(manifest_path))
    assert (code, out) == (0, ""), out


def test_a_second_apply_changes_nothing(capsys, tmp_path: Path, store_path: Path) -> None:
    legacy = make_legacy(tmp_path / "clean", bad=False)
    assert run(capsys, "--store", str(store_path), "migrate", "--from", str(legacy), "--apply")[0] == 0
    before = tree(tmp_path)
    code, out, err = run(capsys, "--store", str(store_path), "migrate", "--from", str(legacy), "--apply")
    assert (code, out, err) == (0, "nothing to do\n", "")
    assert tree(tmp_path) == before
    assert run(capsys, "--store", str(store_path), "migrate", "--from", str(legacy))[:2] == (0, "nothing to do\n")


def test_key_map_lets_the_original_invocation_get_its_job_back(capsys, legacy: Path, store_path: Path) -> None:
    key = "airflow:weekly_digest:allocate:scheduled__2026-07-13T00:00:00+00:00"
    key_map = legacy.parent / "keys.json"
    key_map.write_text(json.dumps({"2026-W29": key}))
    code, out, _ = run(capsys, "--store", str(store_path), "migrate", "--from", str(legacy), "--key-map", str(key_map))
    assert code == 1  # the bad entries
    assert f"2026-W29 -> 2026-W29-0  key {key!r}" in out
    run(capsys, "--store", str(store_path), "migrate", "--from", str(legacy), "--key-map", str(key_map), "--apply")
    again = FileEpisodeStore(store_path).allocate("2026-W29", key)
    assert (again.episode_id, again.reused, again.metadata["migration"]["allocation_key"]) == ("2026-W29-0", True, key)


def test_bad_key_map_and_unreadable_history_change_nothing(capsys, legacy: Path, store_path: Path) -> None:
    key_map = legacy.parent / "keys.json"
    key_map.write_text(json.dumps({"2026-W60": "k"}))
    before = tree(legacy.parent)
    argv = ["--store", str(store_path), "migrate", "--from", str(legacy), "--apply"]
    code, _, err = run(capsys, *argv, "--key-map", str(key_map))
    assert code == 2 and "invalid week id '2026-W60'" in err
    (legacy / "history.json").write_bytes(b'{"2026-W28": ')
    before = tree(legacy.parent)
    code, _, err = run(capsys, *argv)
    assert code == 2 and "legacy history file" in err and err.count("\n") == 1
    assert tree(legacy.parent) == before


def test_a_key_already_held_is_reported_and_that_job_left_alone(capsys, legacy: Path, store_path: Path) -> None:
    FileEpisodeStore(store_path).allocate("2026-W31", "migrated:2026-W31")
    before = tree(legacy / "2026-W31")
    code, out, err = run(capsys, "--store", str(store_path), "migrate", "--from", str(legacy), "--apply")
    assert code == 1 and "allocation key 'migrated:2026-W31' is already held by 2026-W31-0" in err
    assert tree(legacy / "2026-W31") == before and "done: 3 migrated, 4 skipped" in out


#: Folders that are often a file system of their own: tmpfs, the disk, the checkout's disk.
OTHER_DEVICES = ("/dev/shm", "/var/tmp", "/tmp", str(Path(__file__).resolve().parents[2]))


@pytest.fixture
def other_device(tmp_path: Path) -> Iterator[Path]:
    """A folder on another file system than ``tmp_path`` (``make test`` keeps tmp_path on tmpfs)."""
    here = os.stat(tmp_path).st_dev
    found = next((d for d in OTHER_DEVICES if os.path.isdir(d) and os.stat(d).st_dev != here), None)
    if found is None:
        pytest.skip(f"no second file system to move across (tried {', '.join(OTHER_DEVICES)})")
    path = Path(tempfile.mkdtemp(dir=found, prefix="legacy-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_across_file_systems_files_are_copied_verified_then_deleted(
    capsys, other_device: Path, store_path: Path
) -> None:
    legacy = make_legacy(other_device / "legacy", bad=False)
    code, out, err = run(capsys, "--store", str(store_path), "migrate", "--from", str(legacy), "--apply")
    assert code == 0, err
    assert sorted(os.listdir(legacy)) == ["history.json"]
    assert run(capsys, "--store", str(store_path), "check", "--manifest", str(manifest_of(out)))[0] == 0
    # No half-copied file stays behind.
    assert list((store_path / "episodes").rglob(".tmp-*")) == []


TRIPWIRE = r"""
import os, socket, sys

reads = []

class Recording(dict):
    def __getitem__(self, key):
        reads.append(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        reads.append(key)
        return super().get(key, default)

os.environ = Recording(os.environ)

def no_network(*args, **kwargs):
    raise AssertionError("the migration opened a socket")

socket.socket = no_network
socket.create_connection = no_network
from pathlib import Path
from airflow_idempotent_jobs import FileEpisodeStore
from airflow_idempotent_jobs.migration.apply import apply_migration

result = apply_migration(FileEpisodeStore(sys.argv[1]), Path(sys.argv[2]))
assert len(result.migrated) == 4, result
secret = [k for k in reads if any(w in k.upper() for w in ("CONN", "SECRET", "TOKEN", "PASSWORD", "API_KEY"))]
loaded = [m for m in sys.modules if m.split(".")[0] in ("airflow", "httpx") or ".paid" in m or ".hooks" in m]
print(secret, loaded)
"""


def test_migration_reads_no_credentials_and_opens_no_connection(tmp_path: Path) -> None:
    legacy = make_legacy(tmp_path / "legacy")
    env = {
        **os.environ,
        "AIRFLOW_CONN_ACME_VIDEO": "http://user:hunter2@127.0.0.1:9/",
        "ACME_API_KEY": "hunter2",
        "VOXLY_TOKEN": "hunter2",
    }
    done = subprocess.run(
        [sys.executable, "-c", TRIPWIRE, str(tmp_path / "store"), str(legacy)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "[] []\n"


def test_a_given_manifest_path_is_never_overwritten(capsys, legacy: Path, store_path: Path) -> None:
    target = legacy.parent / "evidence.json"
    target.write_text("{}")
    argv = ["--store", str(store_path), "migrate", "--from", str(legacy), "--apply", "--manifest", str(target)]
    before = tree(legacy.parent)
    code, _, err = run(capsys, *argv)
    assert code == 2 and "exists already" in err and tree(legacy.parent) == before
    target.unlink()
    assert run(capsys, *argv)[0] == 1
    assert load_manifest(target).jobs
    assert run(capsys, *argv)[:2] == (1, "nothing to do\n")


def test_a_store_root_under_a_regular_file_is_a_store_error_for_plan_and_apply(capsys, legacy: Path) -> None:
    blocker = legacy.parent / "not-a-directory"
    blocker.write_bytes(b"a regular file\n")
    before = tree(legacy.parent)
    for extra in ([], ["--apply"]):
        code, out, err = run(capsys, "--store", str(blocker / "store"), "migrate", "--from", str(legacy), *extra)
        assert (code, out) == (5, ""), err
        assert err.count("\n") == 1 and str(blocker) in err
    assert tree(legacy.parent) == before
