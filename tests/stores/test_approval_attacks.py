"""Attacks on the approval gate: writers that race it, bypass it or feed it hostile records.

Each test drives real stores (file and PostgreSQL), real OS processes and the real provider
server; each names the hole it closes or the claim it proves.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs import Episode, EpisodeStatus, EpisodeStore, SubmissionState, open_store
from airflow_idempotent_jobs.episode import Decision
from airflow_idempotent_jobs.errors import ApprovalRequired, DecisionConflict
from airflow_idempotent_jobs.paid import SubmissionLedger
from airflow_idempotent_jobs.paid._http_config import HttpProviderConfig
from airflow_idempotent_jobs.paid.http import HttpPaidProvider
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import Backend, FileBackend
from tests.clirun import run_cli
from tests.legacy_fixtures import make_legacy, tree, write_week
from tests.pg import spawn_together
from tests.pg_stopped import postmaster_pid, stopped

W32 = "2026-W32"
REQUEST = {"prompt": "weekly video", "units": 2}


def _status(status: EpisodeStatus) -> Callable[[Episode], Episode]:
    return lambda episode: dataclasses.replace(episode, status=status)


def _submitting(episode: Episode) -> Episode:
    moved = episode.submission.moved_to(SubmissionState.SUBMITTING, episode_id=episode.episode_id, token="t-1")
    return dataclasses.replace(episode, submission=moved, status=EpisodeStatus.RUNNING)


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        (_status(EpisodeStatus.ALLOCATED), "status allocated with submission none"),
        (_status(EpisodeStatus.CANCELLED), "status cancelled with submission none"),
        (_submitting, "status running with submission submitting"),
        (
            lambda e: dataclasses.replace(_submitting(e), status=EpisodeStatus.REJECTED),
            "status rejected with submission submitting",
        ),
    ],
)
def test_no_update_turns_a_rejected_episode_back_or_pays_for_it(
    backend: Backend, store: EpisodeStore, change: Callable[[Episode], Episode], refused: str
) -> None:
    """Was a hole: `kept` guarded the approval only, so any update (a ledger move, a status) went through."""
    eid = store.allocate(W32, "job").episode_id
    rejected = store.decide(eid, "rejected", by="bob", via="cli")
    before = backend.snapshot()
    with pytest.raises(DecisionConflict, match=f"cannot record {refused}: it is already rejected by bob"):
        store.update(eid, change)
    assert backend.snapshot() == before
    assert store.get(eid) == rejected


def test_no_update_calls_an_undecided_episode_rejected(backend: Backend, store: EpisodeStore) -> None:
    """Status rejected without a rejection would hide an undecided episode from `list` readers and the gate."""
    eid = store.allocate(W32, "job").episode_id
    before = backend.snapshot()
    with pytest.raises(DecisionConflict, match="status rejected without a rejection"):
        store.update(eid, _status(EpisodeStatus.REJECTED))
    assert backend.snapshot() == before


def test_sql_that_bypasses_the_store_cannot_pay_for_unreject_or_fake_a_rejection(pg_database: str) -> None:
    """Was a hole: the IJ004 guard kept the decision, but a writer that ignores approvals (a worker of
    an earlier release, hand SQL) could still move a rejected row's ledger and status."""
    with open_store(pg_database) as store:
        rejected = store.decide(store.allocate(W32, "no").episode_id, "rejected", by="bob", via="cli")
        undecided = store.allocate(W32, "open").episode_id
        paying = store.update(store.allocate(W32, "paying").episode_id, _submitting).episode_id
    submitting = (
        "submission = jsonb_set(jsonb_set(submission, '{state}', '\"submitting\"'), '{token}', '\"t\"'),"
        " submission_state = 'submitting', status = 'running'"
    )
    a_rejection = json.dumps(rejected.approval.to_dict())
    attempts = [
        (f"UPDATE idempotent_jobs.episodes SET {submitting} WHERE episode_id = %s", (rejected.episode_id,)),
        ("UPDATE idempotent_jobs.episodes SET status = 'allocated' WHERE episode_id = %s", (rejected.episode_id,)),
        ("UPDATE idempotent_jobs.episodes SET status = 'rejected' WHERE episode_id = %s", (undecided,)),
        (  # a rejection written onto a row whose paid call started (the guard sees no earlier approval)
            "UPDATE idempotent_jobs.episodes SET approval = %s::jsonb, status = 'rejected' WHERE episode_id = %s",
            (a_rejection, paying),
        ),
    ]
    backend_before = _rows(pg_database)
    with psycopg.connect(pg_database, autocommit=True) as conn:
        for statement, params in attempts:
            with pytest.raises(psycopg.errors.CheckViolation, match="episodes_rejected_check"):
                conn.execute(statement, params)
    assert _rows(pg_database) == backend_before
    assert run_cli("--store", pg_database, "check").code == 0


def _rows(url: str) -> list[Any]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT to_jsonb(e) FROM idempotent_jobs.episodes e ORDER BY episode_id").fetchall()


def _reject_or_submit(
    url: str, eid: str, role: str, config: HttpProviderConfig, auth: tuple[str, str], barrier: Any, results: Any
) -> None:
    try:
        with open_store(url, lock_timeout=60) as store:
            store.get(eid)  # opened (and the schema checked) before the start line
            provider = HttpPaidProvider(config, auth_header=auth[0], auth_value=auth[1])
            barrier.wait(timeout=60)
            if role == "reject":
                store.decide(eid, Decision.REJECTED, by="bob", via="cli")
            else:
                SubmissionLedger(store).submit(eid, provider, REQUEST, require_approval=role == "submit-required")
            results.put((role, "ok"))
    except (DecisionConflict, ApprovalRequired) as exc:
        results.put((role, type(exc).__name__))
    except BaseException as exc:
        results.put((role, f"error {type(exc).__name__}: {exc}"))


@pytest.mark.parametrize("submitter", ["submit", "submit-required"])
def test_a_rejection_racing_a_submission_in_other_processes_never_ends_rejected_and_paid(
    backend: Backend, store: EpisodeStore, submitter: str
) -> None:
    """One lock orders them: either the rejection wins and nothing is sent, or the intent wins and the
    rejection is refused. With ``require_approval`` the undecided episode is never paid at all."""
    with ProviderServer(polls_to_finish=1) as server:
        auth = (server.auth_header, server.auth_value)
        outcomes = set()
        for n in range(4):
            eid = store.allocate(W32, f"raced-{n}").episode_id
            got = dict(
                spawn_together(
                    _reject_or_submit,
                    [
                        (backend.url, eid, "reject", server.provider_config(), auth),
                        (backend.url, eid, submitter, server.provider_config(), auth),
                    ],
                    timeout=120,
                )
            )
            episode = store.get(eid)
            paid = server.submissions()
            if episode.approval.decision is Decision.REJECTED:
                assert got == {"reject": "ok", submitter: "ApprovalRequired"}, got
                assert (episode.status, episode.submission.state) == (EpisodeStatus.REJECTED, SubmissionState.NONE)
            else:
                assert submitter == "submit" and got == {"reject": "DecisionConflict", "submit": "ok"}, got
                assert episode.submission.state is not SubmissionState.NONE
            outcomes.add(episode.approval.decision)
            assert paid == sum(1 for e in store.list(W32) if e.submission.state is not SubmissionState.NONE)
    if submitter == "submit-required":
        assert server.submissions() == 0


def test_file_store_hand_edit_that_unrejects_is_reported_and_blocks_payment(tmp_path: Path) -> None:
    """A hand edit of state.json (status set back to allocated) is named by check; the ledger still refuses."""
    backend = FileBackend(tmp_path / "store")
    with backend.open() as store:
        eid = store.allocate(W32, "job").episode_id
        rejected = store.decide(eid, "rejected", by="bob", via="cli")
        backend.overwrite(eid, "allocated", rejected.approval.to_dict())
        done = run_cli("--store", backend.url, "check")
        assert done.code == 1 and f"episode {eid}: status allocated disagrees with approval decision rejected" in (
            done.stdout
        )
        with ProviderServer(polls_to_finish=1) as server:
            provider = HttpPaidProvider(
                server.provider_config(), auth_header=server.auth_header, auth_value=server.auth_value
            )
            with pytest.raises(ApprovalRequired, match="rejected by bob"):
                SubmissionLedger(store).submit(eid, provider, REQUEST)
            assert server.submissions() == 0


def _asked(**fields: Any) -> dict[str, Any]:
    entry = {"event": "asked", "by": "ti-1", "at": "2026-08-03T09:00:00+00:00", "comment": None, "via": "airflow"}
    return {"decision": None, "by": None, "at": None, "comment": None, "via": None, "history": [{**entry, **fields}]}


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("approval", "reason"),
    [
        (_asked(by={"user": ["alice"]}), "approval history entry 0: by must be text, not dict"),  # was read as is
        (_asked(at=1754211600), "approval history entry 0: at must be text, not int"),  # was read as is
        (_asked(comment=["too", "deep"]), "approval history entry 0: comment must be text, not list"),  # was read
        (_asked(comment=_nested(80)), "deeper than"),
        ({**_asked(), "decision": "APPROVED", "by": "a", "at": "t"}, "'APPROVED' is not a valid Decision"),
    ],
)
def test_a_malformed_approval_in_a_record_is_store_corrupted_naming_it_and_check_reports_it(
    backend: Backend, store: EpisodeStore, approval: dict[str, Any], reason: str
) -> None:
    eid = store.allocate(W32, "job").episode_id
    backend.overwrite(eid, "allocated", approval)
    shown = run_cli("--store", backend.url, "show", eid)
    assert shown.code == 5 and reason in shown.error_line() and eid in shown.error_line(), shown
    done = run_cli("--store", backend.url, "check")
    assert done.code == 1 and reason in done.stdout and eid in done.stdout, done.stdout


@pytest.mark.parametrize(
    "fields",
    [
        {"approved_by": None, "approved_at": None, "rejected_by": None, "rejected_at": None},
        {"approved": False, "approved_by": None},
    ],
)
def test_a_legacy_job_whose_approval_fields_are_all_null_migrates_undecided(tmp_path: Path, fields: Any) -> None:
    """Was refused as 'approved, but the state does not say who': null is JSON's "not set", the usual
    shape of a job nobody decided yet, and refusing it stopped the whole migration."""
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    write_week(legacy, "2026-W40", fields)
    done = run_cli("--store", str(tmp_path / "store"), "migrate", "--from", str(legacy), "--apply")
    assert done.code == 0, done.stderr
    (migrated,) = [e for e in open_store(str(tmp_path / "store")).list("2026-W40")]
    assert migrated.approval.decision is None and migrated.status is EpisodeStatus.ALLOCATED


@pytest.mark.parametrize("name", ["Rejected_By", "REJECTED_BY", " rejected_by", "Approval"])
def test_a_legacy_approval_field_spelled_differently_refuses_the_migration_and_changes_nothing(
    tmp_path: Path, name: str
) -> None:
    """Was a hole: ``Rejected_By`` was read as no field at all, so the job migrated undecided and a paid
    step without ``require_approval`` would have paid for a job a person had rejected."""
    legacy = make_legacy(tmp_path / "legacy", bad=False)
    value = {"state": "rejected", "by": "finance", "at": "t"} if name == "Approval" else "finance"
    state = write_week(legacy, "2026-W40", {name: value, "rejected_at": "2026-10-01T09:00:00Z"})
    before = tree(tmp_path)
    done = run_cli("--store", str(tmp_path / "store"), "migrate", "--from", str(legacy), "--apply")
    assert done.code == 2, (done.stdout, done.stderr)
    assert done.error_line() == (
        f"idempotent-jobs: error: legacy approval in {state}: field /{name}: looks like {name.strip().lower()} "
        "but is not spelled so: rename it or remove it; nothing was migrated"
    )
    assert tree(tmp_path) == before


def _with_query(url: str, query: str) -> str:
    return url + ("&" if "?" in url else "?") + query


@pytest.mark.parametrize("down", ["refused", "stopped"])
@pytest.mark.parametrize("command", [["approve", "--by", "alice"], ["reject", "--by", "bob", "--comment", "no"]])
def test_deciding_on_a_store_that_is_down_is_one_line_exit_5_and_nothing_recorded(
    pg_database: str, down: str, command: list[str]
) -> None:
    """Nothing refused the port (connection refused) or nobody answers it (the postmaster stopped)."""
    with open_store(pg_database) as store:
        eid = store.allocate(W32, "job").episode_id
    if down == "refused":
        url = _with_query(pg_database.replace(":5432/", ":1/"), "connect_timeout=2")
        done = run_cli("--store", url, command[0], eid, *command[1:])
    else:
        with psycopg.connect(pg_database, autocommit=True) as admin:
            pid = postmaster_pid(admin)
        with stopped(pid):
            done = run_cli("--store", _with_query(pg_database, "connect_timeout=1"), command[0], eid, *command[1:])
    assert done.code == 5, (done.stdout, done.stderr)
    line = done.error_line()
    assert line.startswith("idempotent-jobs: error: PostgreSQL store postgresql://") and " is unavailable: " in line
    assert pg_database.rsplit("/", 1)[1] in line, line  # where: the store's own URL (it carries no password here)
    assert done.stdout == ""
    with open_store(pg_database) as store:
        assert store.get(eid).approval.decision is None
