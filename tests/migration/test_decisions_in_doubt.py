"""A recorded decision is never lost in migration: what looks like one but cannot be read stops it.

Each case was a hole: a field such as ``rejectedBy`` or ``review.rejected_by`` was not read at all,
so the job migrated undecided (exit 0) and a later run could pay for a job a person had rejected;
a decision time such as ``yesterday`` was recorded verbatim. Every case runs the real command in a
child process, dry run and ``--apply``: exit 2, one stderr line naming the file and the field, and
the legacy directory and the store exactly as they were.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStatus, FileEpisodeStore
from tests.clirun import run_cli
from tests.legacy_fixtures import (
    BAD_DECISION_TIMES,
    DECISION_LOOKALIKES,
    T,
    add_history_entry,
    make_legacy,
    tree,
    write_week,
)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    FileEpisodeStore(path).allocate("2026-W01", "an-earlier-job")
    return path


def refused(tmp_path: Path, store_path: Path, legacy: Path, file: Path, field: str) -> str:
    """Both runs refuse with one line naming ``file`` and ``field``, changing nothing; returns the reason."""
    before = tree(tmp_path)
    reasons = set()
    for apply in ([], ["--apply"]):
        done = run_cli("--store", str(store_path), "migrate", "--from", str(legacy), *apply)
        assert (done.code, done.stdout) == (2, ""), (apply, done.stdout, done.stderr)
        line = done.error_line()
        prefix = f"idempotent-jobs: error: legacy approval in {file}: field {field}: "
        assert line.startswith(prefix) and line.endswith("; nothing was migrated"), line
        reasons.add(line.removeprefix(prefix).removesuffix("; nothing was migrated"))
        assert tree(tmp_path) == before
    (reason,) = reasons
    return reason


@pytest.mark.parametrize("name", list(DECISION_LOOKALIKES))
def test_a_field_that_looks_like_a_decision_but_is_not_read_as_one_refuses_the_migration(
    tmp_path: Path, store_path: Path, name: str
) -> None:
    fields, field, said = DECISION_LOOKALIKES[name]
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    state = write_week(legacy, "2026-W40", fields)
    reason = refused(tmp_path, store_path, legacy, state, field)
    assert said in reason, reason


def test_a_decision_in_the_weeks_history_entry_refuses_the_migration(tmp_path: Path, store_path: Path) -> None:
    """The history entry is kept with the episode but never read as a decision: one there would be lost."""
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    write_week(legacy, "2026-W40", {})
    history = add_history_entry(legacy, "2026-W40", {"status": "draft", "review": {"rejectedBy": "finance"}})
    reason = refused(tmp_path, store_path, legacy, history, "/2026-W40/review/rejectedBy")
    assert "looks like a decision" in reason and "rename it or remove it" in reason, reason


@pytest.mark.parametrize("name", list(BAD_DECISION_TIMES))
def test_a_decision_time_without_a_date_time_and_utc_offset_refuses_the_migration(
    tmp_path: Path, store_path: Path, name: str
) -> None:
    fields, field = BAD_DECISION_TIMES[name]
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    state = write_week(legacy, "2026-W40", fields)
    reason = refused(tmp_path, store_path, legacy, state, field)
    assert "ISO 8601 date and time with a UTC offset" in reason, reason


def _artifact(legacy: Path, week: str, path: str, data: bytes) -> dict[str, Any]:
    (legacy / week / path).parent.mkdir(parents=True, exist_ok=True)
    (legacy / week / path).write_bytes(data)
    return {path: hashlib.sha256(data).hexdigest()}


def test_what_is_not_a_decision_or_agrees_with_one_still_migrates(tmp_path: Path, store_path: Path) -> None:
    """No false alarm: file paths named like decisions, an agreeing status, every offset form."""
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    write_week(
        legacy,
        "2026-W40",
        {"status": "rejected", "rejected_by": "finance", "rejected_at": "2026-10-01T09:00:00.250+02:00"},
    )
    write_week(legacy, "2026-W41", {"status": "awaiting_approval", "note": "approved by nobody yet"})
    hashes = _artifact(legacy, "2026-W42", "approvals/approved-cover.jpg", b"cover")
    write_week(
        legacy, "2026-W42", {"status": "approved", "approved_by": "editor", "approved_at": T, "artifacts": hashes}
    )
    write_week(legacy, "2026-W43", {"approval": {"state": "approved", "by": "ops", "at": "2026-W43-4T08:15Z"}})
    add_history_entry(legacy, "2026-W40", {"status": "rejected", "published_at": None})
    done = run_cli("--store", str(store_path), "migrate", "--from", str(legacy), "--apply")
    assert done.code == 0, (done.stdout, done.stderr)
    store = FileEpisodeStore(store_path)
    got = {e.week_id: e for e in store.list() if e.week_id >= "2026-W40"}
    assert (got["2026-W40"].status, got["2026-W40"].approval.at) == (
        EpisodeStatus.REJECTED,
        "2026-10-01T09:00:00.250+02:00",
    )
    assert got["2026-W41"].approval.decision is None and got["2026-W41"].status is EpisodeStatus.ALLOCATED
    assert (got["2026-W42"].approval.by, got["2026-W42"].approval.at) == ("editor", T)
    assert got["2026-W43"].approval.at == "2026-W43-4T08:15Z"
