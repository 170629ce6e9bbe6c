"""`idempotent-jobs check`: what it finds after a migration is damaged, and that it never writes."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import FileEpisodeStore
from airflow_idempotent_jobs.cli import main
from airflow_idempotent_jobs.migration.manifest import load_manifest
from airflow_idempotent_jobs.store_check import check_store
from tests.legacy_fixtures import make_legacy, tree

CLI = str(Path(sys.executable).with_name("idempotent-jobs"))


def migrated(base: Path) -> tuple[Path, Path]:
    """A store holding the fixture set's four migrated weeks; returns it and its manifest."""
    legacy, store = make_legacy(base / "legacy", bad=False), base / "store"
    assert main(["--store", str(store), "migrate", "--from", str(legacy), "--apply"]) == 0
    (manifest,) = (store / "migrations").glob("manifest-*.json")
    return store, manifest


@pytest.fixture
def setup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    store, manifest = migrated(tmp_path)
    capsys.readouterr()
    return store, manifest


def episode_dir(store: Path, episode_id: str) -> Path:
    return store / "episodes" / episode_id.rsplit("-", 1)[0] / episode_id


def edit_record(store: Path, episode_id: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = episode_dir(store, episode_id) / "state.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record, indent=2, sort_keys=True))


def check(capsys: pytest.CaptureFixture[str], store: Path, *extra: str) -> tuple[int, list[str]]:
    code = main(["--store", str(store), "check", *extra])
    return code, capsys.readouterr()[0].splitlines()


def tamper_artifact(store: Path) -> str:
    path = episode_dir(store, "2026-W28-0") / "legacy" / "episode.mp4"
    data = bytearray(path.read_bytes())
    data[5000] ^= 0xFF
    path.write_bytes(bytes(data))
    return f"{path}: sha256 "


def remove_cover(store: Path) -> str:
    path = episode_dir(store, "2026-W29-0") / "legacy" / "cover.jpg"
    path.unlink()
    return f"{path}: missing"


def change_cost(store: Path) -> str:
    edit_record(store, "2026-W29-0", lambda r: r["metadata"]["legacy_state"]["costs"][0].update(amount=1.24))
    return "cost records add up to 14.49, the migration recorded 25.65"


def duplicate_key(store: Path) -> str:
    source, copy = episode_dir(store, "2026-W31-0"), episode_dir(store, "2026-W31-1")
    shutil.copytree(source, copy)

    def renumber(record: dict[str, Any]) -> None:
        record.update(episode_id="2026-W31-1", sequence=1)
        record["metadata"]["migration"].update(episode_id="2026-W31-1", sequence=1)

    edit_record(store, "2026-W31-1", renumber)
    return "2026-W31-0, 2026-W31-1: allocation key 'migrated:2026-W31' is held by 2 episodes"


def illegal_submission(store: Path) -> str:
    def skip_acceptance(record: dict[str, Any]) -> None:
        history = record["submission"]["history"]
        record["submission"]["history"] = [{**history[0], "to": "succeeded"}]
        record["submission"]["state"] = "succeeded"

    edit_record(store, "2026-W30-0", skip_acceptance)
    return "submission history moves illegally from none to succeeded"


DAMAGE = {
    "tampered-artifact": tamper_artifact,
    "missing-file": remove_cover,
    "changed-cost-record": change_cost,
    "duplicated-key": duplicate_key,
    "illegal-submission": illegal_submission,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damage_is_reported_one_line_per_problem(capsys, setup: tuple[Path, Path], damage: str) -> None:
    store, manifest = setup
    expected = DAMAGE[damage](store)
    code, lines = check(capsys, store)
    assert code == 1 and any(expected in line for line in lines), lines
    code, json_lines = check(capsys, store, "--json")
    problems = [json.loads(line) for line in json_lines]
    assert code == 1 and [f"{p['where']}: {p['message']}" for p in problems] == lines
    code, with_manifest = check(capsys, store, "--manifest", str(manifest))
    assert code == 1 and set(lines) <= set(with_manifest)


def test_the_manifest_catches_what_a_consistent_forgery_hides(capsys, setup: tuple[Path, Path]) -> None:
    store, manifest = setup

    def forge(record: dict[str, Any]) -> None:
        # Drop a cost record and a remote reference, and keep every total in the record consistent.
        state = record["metadata"]["legacy_state"]
        del state["costs"][0]
        del state["voice"]
        record["metadata"]["migration"]["cost_total"] = 0.85
        record["submission"]["cost"] = 0.85
        del record["metadata"]["migration"]["files"]["state.json"]
        (episode_dir(store, "2026-W28-0") / "legacy" / "state.json").unlink()

    edit_record(store, "2026-W28-0", forge)
    assert check(capsys, store) == (0, [])
    code, lines = check(capsys, store, "--manifest", str(manifest))
    assert code == 1
    text = "\n".join(lines)
    assert "2026-W28-0: legacy/state.json is missing" in text
    assert "2026-W28-0: 1 remote references ['acme-001c-render'], the manifest has 2" in text
    assert "cost record /costs/0" in text and "changed or lost" in text


def test_a_lost_episode_is_reported_against_the_manifest(capsys, setup: tuple[Path, Path]) -> None:
    store, manifest = setup
    shutil.rmtree(episode_dir(store, "2026-W31-0"))
    code, lines = check(capsys, store, "--manifest", str(manifest))
    assert code == 1 and any("manifest job 2026-W31" in line and "lost" in line for line in lines), lines


def test_bad_manifest_is_bad_input(capsys, setup: tuple[Path, Path]) -> None:
    store, manifest = setup
    manifest.write_bytes(manifest.read_bytes()[:100])
    assert main(["--store", str(store), "check", "--manifest", str(manifest)]) == 2
    assert "invalid manifest" in capsys.readouterr()[1]


def test_check_store_api_keeps_working_without_a_manifest(setup: tuple[Path, Path]) -> None:
    store, manifest = setup
    opened = FileEpisodeStore(store)
    assert check_store(opened) == []
    assert check_store(opened, ["2026-W30-0"], load_manifest(manifest)) == []


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory that an unprivileged user can reach (pytest's own tmp dirs are private to root)."""
    path = Path(tempfile.mkdtemp(prefix="check-ro-"))
    path.chmod(0o755)
    yield path
    for dirpath, dirnames, _ in os.walk(path):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
    shutil.rmtree(path)


def make_read_only(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o444)
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o555)
    root.chmod(0o555)


def as_nobody() -> list[list[str]]:
    """How to run the check without root's permission bypass, when this machine allows it.

    Empty when it cannot: no setpriv, or a checkout that ``nobody`` cannot enter (a private
    temporary clone, say). The run as root still proves the tree is untouched.
    """
    if os.geteuid() != 0:
        return [[]]  # already unprivileged: permissions apply as they are
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return []
    prefix = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    probe = subprocess.run([*prefix, CLI, "--help"], capture_output=True, timeout=60)
    return [prefix] if probe.returncode == 0 else []


def test_check_is_strictly_read_only_even_on_a_read_only_store(shared_dir: Path) -> None:
    store, manifest = migrated(shared_dir)
    bad = episode_dir(store, "2026-W28-0") / "legacy" / "cover.jpg"
    bad.write_bytes(b"not the cover")
    make_read_only(shared_dir)
    before = tree(shared_dir)
    assert all(not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) for _, mode, _ in before.values())
    argv = [CLI, "--store", str(store), "check", "--manifest", str(manifest)]
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONDONTWRITEBYTECODE": "1"}
    # Unprivileged, a write would fail; as root, it would show in the tree.
    for prefix in [*as_nobody(), []]:
        done = subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 1, done.stderr
        now, was = hash_of(b"not the cover"), cover_sha(manifest)
        assert sorted(done.stdout.splitlines()) == sorted(
            [
                f"2026-W28-0: legacy/cover.jpg hashes to {now}, the manifest {was}",
                f"{bad}: sha256 {now} differs from the recorded {was}",
            ]
        )
        assert done.stderr == "check: 2 problems\n"
        assert tree(shared_dir) == before


def hash_of(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def cover_sha(manifest: Path) -> str:
    (job,) = [j for j in load_manifest(manifest).jobs if str(j.job.week) == "2026-W28"]
    (cover,) = [f for f in job.job.files if f.path == "cover.jpg"]
    return cover.sha256


def test_a_migrated_draft_taken_over_by_the_paid_layer_stays_healthy(capsys, setup: tuple[Path, Path]) -> None:
    import dataclasses

    from airflow_idempotent_jobs import SubmissionState

    store, manifest = setup

    def submit(episode: Any) -> Any:
        sub = episode.submission.moved_to(SubmissionState.SUBMITTING, episode_id=episode.episode_id, attempts=1)
        sub = sub.moved_to(SubmissionState.ACCEPTED, episode_id=episode.episode_id, remote_ref="new-provider-42")
        return dataclasses.replace(episode, submission=dataclasses.replace(sub, cost=3.2))

    FileEpisodeStore(store).update("2026-W31-0", submit)
    assert check(capsys, store, "--manifest", str(manifest)) == (0, [])
    # The same change made to a job whose ledger the migration wrote is not a take-over: reported.
    edit_record(store, "2026-W28-0", lambda r: r["submission"].update(cost=3.2))
    code, lines = check(capsys, store, "--manifest", str(manifest))
    assert code == 1 and any("the submission says 3.2" in line for line in lines), lines
    assert any(line == "2026-W28-0: submission cost 3.2, the manifest 13.25" for line in lines), lines
