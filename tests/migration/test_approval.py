"""Legacy approvals become the migrated episode's decision (``via: migration``), and `check --manifest`
proves they survived.

`migrate` writes to the file store only (migrated artifacts are files kept beside each episode), so
these tests use it; the decision itself is stored like any other (tests/cli/test_approval.py covers
both stores). Every refusal is one line, exit 2, and leaves the legacy directory and the store exactly
as they were.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStatus, FileEpisodeStore
from tests.backends import FileBackend
from tests.clirun import Result, run_cli, run_main
from tests.legacy_fixtures import APPROVAL_SHAPES, BAD_APPROVALS, make_approval_legacy, make_legacy, tree, write_week


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    FileEpisodeStore(path).allocate("2026-W01", "an-earlier-job")
    return path


def migrated(store_path: Path, legacy: Path) -> tuple[FileEpisodeStore, Path, Result]:
    done = run_cli("--store", str(store_path), "migrate", "--from", str(legacy), "--apply")
    assert done.code == 0, (done.stdout, done.stderr)
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("manifest: ")]
    return FileEpisodeStore(store_path), Path(line.removeprefix("manifest: ")), done


def by_week(store: FileEpisodeStore) -> dict[str, Any]:
    return {e.metadata["migration"]["legacy_week"]: e for e in store.list() if "migration" in e.metadata}


def check(store_path: Path, manifest: Path) -> Result:
    return run_cli("--store", str(store_path), "check", "--manifest", str(manifest))


def test_every_recognised_shape_becomes_the_episodes_decision_and_check_passes(
    tmp_path: Path, store_path: Path
) -> None:
    legacy = make_approval_legacy(tmp_path / "legacy")
    plan = run_cli("--store", str(store_path), "migrate", "--from", str(legacy))
    assert plan.code == 0, plan.stderr
    assert "2026-W01 -> 2026-W01-1" in plan.stdout
    assert "approved by editor@example.org at 2026-01-02T08:15:00Z" in plan.stdout
    assert plan.stdout.count("no decision") == 5

    store, manifest, done = migrated(store_path, legacy)
    assert "migrated 2026-W08 -> 2026-W08-0 (rejected): 2 files moved" in done.stdout
    assert done.stdout.rstrip().splitlines()[-3].endswith("approved by editor@example.org at 2026-03-20T08:00:00Z")
    episodes = by_week(store)
    for name, (week, _fields, want) in APPROVAL_SHAPES.items():
        approval = episodes[week].approval
        if want is None:
            assert approval.decision is None and approval.history == (), name
            assert episodes[week].status is EpisodeStatus.ALLOCATED, name
            continue
        decision, by, at, comment = want
        assert approval.decision is not None and approval.decision.value == decision, name
        assert (approval.by, approval.at, approval.comment, approval.via) == (by, at, comment, "migration"), name
        assert [dict(e) for e in approval.history] == [
            {"event": decision, "by": by, "at": at, "comment": comment, "via": "migration"}
        ], name
        expected = EpisodeStatus.REJECTED if decision == "rejected" else EpisodeStatus.ALLOCATED
        assert episodes[week].status is expected, name
        assert episodes[week].metadata["migration"]["approval"] == dict(
            zip(("decision", "by", "at", "comment"), want, strict=True)
        )
    paid = episodes["2026-W13"]
    assert (paid.status, paid.approval.by, paid.submission.remote_ref) == (
        EpisodeStatus.SUCCEEDED,
        "editor@example.org",
        "acme-13",
    )
    jobs = {job["legacy_week"]: job for job in json.loads(manifest.read_text())["jobs"]}
    assert jobs["2026-W02"]["approval"] == {
        "decision": "rejected",
        "by": "finance",
        "at": "2026-01-09T10:00:00+01:00",
        "comment": "over budget",
    }
    assert jobs["2026-W04"]["approval"] is None
    assert check(store_path, manifest).code == 0, check(store_path, manifest).stdout

    table = run_cli("--store", str(store_path), "list", "--week", "2026-W02").stdout.splitlines()
    assert table[1].split()[:3] == ["2026-W02-0", "rejected", "rejected"]


def test_a_decision_taken_after_the_migration_is_not_a_problem_and_the_legacy_one_is_final(
    tmp_path: Path, store_path: Path
) -> None:
    store, manifest, _done = migrated(store_path, make_approval_legacy(tmp_path / "legacy"))
    pending = by_week(store)["2026-W04"].episode_id
    assert run_cli("--store", str(store_path), "approve", pending, "--by", "alice").code == 0
    assert check(store_path, manifest).code == 0
    approved = by_week(store)["2026-W01"].episode_id
    before = tree(tmp_path)
    refused = run_cli("--store", str(store_path), "reject", approved, "--by", "bob")
    assert refused.code == 3
    assert "already approved by editor@example.org at 2026-01-02T08:15:00Z; a decision is final" in refused.error_line()
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("edit", "reported"),
    [
        pytest.param(
            lambda record: record.pop("approval"),
            "no decision recorded, the manifest has approved by 'ops' at '2026-02-27T09:00:00Z': lost",
            id="removed",
        ),
        pytest.param(
            lambda record: record["approval"].update(by="mallory"),
            "decision approved by 'mallory' at '2026-02-27T09:00:00Z', the manifest has approved by 'ops'",
            id="approver-changed",
        ),
        pytest.param(
            lambda record: record["approval"].update(at="2026-02-28T00:00:00Z", comment="later"),
            "decision approved by 'ops' at '2026-02-28T00:00:00Z' ('later'), the manifest has approved by 'ops' "
            "at '2026-02-27T09:00:00Z'",
            id="time-and-comment-changed",
        ),
    ],
)
def test_check_reports_a_migrated_decision_changed_by_hand(
    tmp_path: Path, store_path: Path, edit: Any, reported: str
) -> None:
    """The PostgreSQL store cannot hold a migration, so the hand edit is of the file store's record."""
    store, manifest, _done = migrated(store_path, make_approval_legacy(tmp_path / "legacy"))
    episode_id = by_week(store)["2026-W09"].episode_id
    path = FileBackend(store_path).state_path(episode_id)
    record = json.loads(path.read_text(encoding="utf-8"))
    edit(record)
    path.write_text(json.dumps(record), encoding="utf-8")
    done = check(store_path, manifest)
    assert done.code == 1, (done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    assert any(line.startswith(f"{episode_id}: {reported}") for line in lines), lines
    # The migration record in the episode says the same without the manifest.
    alone = run_cli("--store", str(store_path), "check", episode_id)
    assert alone.code == 1 and reported.replace("the manifest", "the migration record") in alone.stdout


def test_a_manifest_written_before_decisions_were_migrated_is_still_verified_without_them(
    tmp_path: Path, store_path: Path
) -> None:
    store, manifest, _done = migrated(store_path, make_approval_legacy(tmp_path / "legacy"))
    data = json.loads(manifest.read_text(encoding="utf-8"))
    for job in data["jobs"]:
        del job["approval"]
    manifest.write_text(json.dumps(data), encoding="utf-8")
    episode_id = by_week(store)["2026-W07"].episode_id
    path = FileBackend(store_path).state_path(episode_id)
    record = json.loads(path.read_text(encoding="utf-8"))
    del record["approval"], record["metadata"]["migration"]["approval"]
    path.write_text(json.dumps(record), encoding="utf-8")
    done = check(store_path, manifest)
    assert (done.code, done.stdout) == (0, "")


@pytest.mark.parametrize(("name"), list(BAD_APPROVALS))
def test_an_approval_in_doubt_refuses_the_whole_migration_and_changes_nothing(
    tmp_path: Path, store_path: Path, name: str
) -> None:
    fields, reported = BAD_APPROVALS[name]
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    state = write_week(legacy, "2026-W40", fields)
    before = tree(tmp_path)
    for apply in ([], ["--apply"]):
        done = run_main("--store", str(store_path), "migrate", "--from", str(legacy), *apply)
        assert (done.code, done.stdout) == (2, ""), (done.stdout, done.stderr)
        line = done.error_line()
        assert line.startswith(f"idempotent-jobs: error: legacy approval in {state}: "), line
        assert reported in line and line.endswith("; nothing was migrated"), line
        assert "\x1b" not in line
        assert tree(tmp_path) == before


def test_the_refusal_in_a_real_process_and_on_a_new_store_creates_nothing(tmp_path: Path) -> None:
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    fields, _reported = BAD_APPROVALS["approved-and-rejected"]
    state = write_week(legacy, "2026-W40", fields)
    before = tree(tmp_path)
    done = run_cli("--store", str(tmp_path / "new-store"), "migrate", "--from", str(legacy), "--apply")
    assert done.code == 2
    assert done.error_line() == (
        f"idempotent-jobs: error: legacy approval in {state}: field /rejected_by: contradicts /approved_by, "
        "/approved_at; nothing was migrated"
    )
    assert tree(tmp_path) == before and not (tmp_path / "new-store").exists()


def test_a_week_skipped_for_another_reason_is_not_read_for_its_approval(tmp_path: Path, store_path: Path) -> None:
    """An unreadable state stays a skipped week (exit 1), as before: the approval check never guesses at it."""
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    (legacy / "2026-W40").mkdir()
    (legacy / "2026-W40" / "state.json").write_text('{"approval": {"state": "maybe"}, "costs": [{"amount": "x"}]}')
    done = run_cli("--store", str(store_path), "migrate", "--from", str(legacy), "--apply")
    assert (
        done.code == 1 and f"skipped {legacy / '2026-W40'}: cost record /costs/0 has no numeric amount" in done.stderr
    )
