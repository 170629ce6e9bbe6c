"""`idempotent-jobs approve` / `reject`: a final decision recorded in the episode, through the real command.

Every case runs against both stores (file and PostgreSQL). Refusals are checked byte for byte: the
store's snapshot is the same before and after, and the error is one line with the documented code.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from airflow_idempotent_jobs import Episode, EpisodeStore, SubmissionState
from airflow_idempotent_jobs.approval import MAX_BY, MAX_COMMENT
from tests.backends import Backend
from tests.clirun import CHILD_TIMEOUT, Result, _child_env, run_cli, run_main

HOSTILE = "\x1b[31mRED\x1b]0;pwned\x07\x9b2J\u202eevil"
FORBIDDEN = ["\x1b", "\x07", "\x9b", "\u202e", "\r"]


@pytest.fixture
def allocated(backend: Backend, store: EpisodeStore) -> Backend:
    """Three episodes: 2026-W32-0, 2026-W32-1, 2026-W33-0, none asked or decided."""
    store.allocate("2026-W32", "job-a")
    store.allocate("2026-W32", "job-b")
    store.allocate("2026-W33", "job-c")
    return backend


def cli(backend: Backend, *args: str) -> Result:
    return run_cli("--store", backend.url, *args)


def refused(done: Result, code: int) -> str:
    assert done.code == code, (done.code, done.stdout, done.stderr)
    assert done.stdout == ""
    line = done.error_line()
    for char in FORBIDDEN:
        assert char not in line, line
    return line


def test_approve_records_the_decision_and_show_and_list_display_it(allocated: Backend, store: EpisodeStore) -> None:
    done = cli(allocated, "approve", "2026-W32-0", "--by", "alice@example.org", "--comment", "budget ok")
    assert done.code == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith("approved 2026-W32-0: recorded by alice@example.org at 20")
    assert line.endswith("(via cli); comment: budget ok")
    episode = store.get("2026-W32-0")
    approval = episode.approval
    assert (approval.decision.value, approval.by, approval.via, approval.comment) == (  # type: ignore[union-attr]
        "approved",
        "alice@example.org",
        "cli",
        "budget ok",
    )
    assert [dict(e) for e in approval.history] == [
        {"event": "approved", "by": "alice@example.org", "at": approval.at, "comment": "budget ok", "via": "cli"}
    ]
    assert approval.at is not None and approval.at in line

    shown = json.loads(cli(allocated, "show", "2026-W32-0").stdout)
    assert shown["approval"] == {
        "decision": "approved",
        "by": "alice@example.org",
        "at": approval.at,
        "comment": "budget ok",
        "via": "cli",
        "history": [dict(e) for e in approval.history],
    }
    assert shown["status"] == "allocated"  # approving does not start anything

    rejected = cli(allocated, "reject", "2026-W32-1", "--by", "bob")
    assert rejected.code == 0 and rejected.stdout.startswith("rejected 2026-W32-1: recorded by bob at ")
    assert "comment" not in rejected.stdout
    store.ask("2026-W33-0", by="weekly.approve", via="airflow")
    table = cli(allocated, "list")
    assert table.code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["EPISODE", "STATUS", "DECISION", "SUBMISSION", "COST", "CREATED", "KEY"]
    assert [row.split()[:4] for row in lines[1:-1]] == [
        ["2026-W32-0", "allocated", "approved", "none"],
        ["2026-W32-1", "rejected", "rejected", "none"],
        ["2026-W33-0", "allocated", "asked", "none"],
    ]
    store.allocate("2026-W33", "job-d")
    assert cli(allocated, "list", "--week", "2026-W33").stdout.splitlines()[2].split()[:3] == [
        "2026-W33-1",
        "allocated",
        "-",
    ]


def test_the_same_decision_again_says_who_recorded_it_and_changes_nothing(
    allocated: Backend, store: EpisodeStore
) -> None:
    assert cli(allocated, "reject", "2026-W32-0", "--by", "alice", "--comment", "too dear").code == 0
    recorded = store.get("2026-W32-0").approval
    before = allocated.snapshot()
    again = cli(allocated, "reject", "2026-W32-0", "--by", "bob", "--comment", "agree")
    assert again.code == 0, again.stderr
    assert again.stdout == (
        f"2026-W32-0 was already rejected by alice at {recorded.at} (via cli); comment: too dear; nothing changed\n"
    )
    assert allocated.snapshot() == before
    assert store.get("2026-W32-0").approval == recorded


def test_a_different_decision_is_refused_with_exit_3_and_changes_nothing(
    allocated: Backend, store: EpisodeStore
) -> None:
    assert cli(allocated, "approve", "2026-W32-0", "--by", "alice").code == 0
    at = store.get("2026-W32-0").approval.at
    before = allocated.snapshot()
    line = refused(cli(allocated, "reject", "2026-W32-0", "--by", "bob", "--comment", "changed my mind"), 3)
    assert line == (
        f"idempotent-jobs: error: episode 2026-W32-0: cannot record rejected: it is already approved by alice at "
        f"{at}; a decision is final (to ask again, allocate a new episode with a new allocation key)"
    )
    assert allocated.snapshot() == before


def test_rejecting_after_the_paid_call_started_is_refused(allocated: Backend, store: EpisodeStore) -> None:
    def submitting(episode: Episode) -> Episode:
        sub = episode.submission.moved_to(SubmissionState.SUBMITTING, episode_id=episode.episode_id, attempts=1)
        return dataclasses.replace(episode, submission=sub)

    store.update("2026-W32-0", submitting)
    before = allocated.snapshot()
    line = refused(cli(allocated, "reject", "2026-W32-0", "--by", "alice"), 3)
    assert "cannot record rejected: it is already submitted (submitting)" in line and "a decision is final" in line
    assert allocated.snapshot() == before
    # Approving a job whose payment already started is still a consistent record.
    assert cli(allocated, "approve", "2026-W32-0", "--by", "alice").code == 0


@pytest.mark.parametrize(
    ("args", "code", "mention"),
    [
        (["approve", "2026-W40-0", "--by", "alice"], 4, "2026-W40-0"),
        (["reject", "2026-W32-9", "--by", "alice"], 4, "2026-W32-9"),
        (["approve", "2026-W32-00", "--by", "alice"], 2, "invalid episode id"),
        (["approve", "../2026-W32-0", "--by", "alice"], 2, "invalid episode id"),
        (["approve", "2026-W32-0", "--by", ""], 2, "invalid --by '': must name who decides"),
        (["reject", "2026-W32-0", "--by", "   "], 2, "must name who decides"),
        (["approve", "2026-W32-0", "--by", "a" * (MAX_BY + 1)], 2, f"at most {MAX_BY} characters"),
        (["approve", "2026-W32-0", "--by", "bob\nroot"], 2, "invalid --by 'bob\\nroot'"),
        (["approve", "2026-W32-0", "--by", HOSTILE], 2, "invalid --by '\\x1b[31mRED"),
        (["reject", "2026-W32-0", "--by", "bob", "--comment", "ok " + HOSTILE], 2, "invalid comment 'ok \\x1b[31m"),
        (["reject", "2026-W32-0", "--by", "bob", "--comment", "x" * (MAX_COMMENT + 1)], 2, "invalid comment"),
        (["approve", "2026-W32-0"], 2, "--by"),
        (["approve", "--by", "bob"], 2, "episode_id"),
    ],
    ids=[
        "unknown-week",
        "unknown-sequence",
        "leading-zero",
        "path",
        "empty-by",
        "blank-by",
        "long-by",
        "newline-by",
        "escapes-by",
        "escapes-comment",
        "long-comment",
        "no-by",
        "no-id",
    ],
)
def test_bad_input_is_one_line_with_its_code_and_changes_nothing(
    allocated: Backend, args: list[str], code: int, mention: str
) -> None:
    before = allocated.snapshot()
    done = run_main("--store", allocated.url, *args)
    line = refused(done, code)
    assert mention in line, line
    assert allocated.snapshot() == before


def test_a_hostile_by_in_a_real_process_prints_escaped_and_nothing_is_created(allocated: Backend) -> None:
    before = allocated.snapshot()
    done = cli(allocated, "reject", "2026-W32-0", "--by", HOSTILE)
    assert "invalid --by '\\x1b[31mRED\\x1b]0;pwned\\x07\\x9b2J\\u202eevil'" in refused(done, 2)
    assert allocated.snapshot() == before


def test_a_comment_over_several_lines_is_kept_and_printed_on_one_escaped_line(
    allocated: Backend, store: EpisodeStore
) -> None:
    comment = "line one\nline two\twith a tab \u00e9\u2713"
    done = cli(allocated, "approve", "2026-W32-0", "--by", "Zoë Ångström", "--comment", comment)
    assert done.code == 0, done.stderr
    assert done.stdout.endswith("; comment: line one\\nline two\\twith a tab é✓\n") and done.stdout.count("\n") == 1
    assert "recorded by Zoë Ångström at " in done.stdout
    assert store.get("2026-W32-0").approval.comment == comment
    table = cli(allocated, "list").stdout
    assert "approved" in table.splitlines()[1]


def test_json_prints_the_episode_and_the_summary_on_stderr(allocated: Backend) -> None:
    done = cli(allocated, "approve", "2026-W32-1", "--by", "alice", "--json")
    assert done.code == 0, done.stderr
    (line,) = done.stdout.splitlines()
    shown = json.loads(line)
    assert shown["episode_id"] == "2026-W32-1" and shown["approval"]["decision"] == "approved"
    assert shown["approval"]["via"] == "cli" and len(shown["approval"]["history"]) == 1
    assert done.stderr.startswith("approved 2026-W32-1: recorded by alice at ") and done.stderr.count("\n") == 1
    again = cli(allocated, "approve", "2026-W32-1", "--by", "bob", "--json")
    assert json.loads(again.stdout)["approval"] == shown["approval"]
    assert "was already approved by alice" in again.stderr


def test_approvers_racing_in_separate_processes_record_exactly_one_decision(
    allocated: Backend, store: EpisodeStore
) -> None:
    """Six real processes, three approving and three rejecting at once: one decision, written once."""
    runs = [("approve" if n % 2 == 0 else "reject", f"person-{n}") for n in range(6)]
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "airflow_idempotent_jobs", "--store", allocated.url, verb, "2026-W32-0", "--by", by],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_child_env(None),
        )
        for verb, by in runs
    ]
    results = [(child.wait(CHILD_TIMEOUT), *child.communicate()) for child in children]
    approval = store.get("2026-W32-0").approval
    assert approval.decision is not None
    winner_verb = "approve" if approval.decision.value == "approved" else "reject"
    codes = [code for code, _out, _err in results]
    assert codes == [0 if verb == winner_verb else 3 for verb, _by in runs], results
    recorded_lines = [out for code, out, _err in results if code == 0 and ": recorded by " in out]
    assert recorded_lines == [
        f"{approval.decision.value} 2026-W32-0: recorded by {approval.by} at {approval.at} (via cli)\n"
    ]
    assert [entry["event"] for entry in approval.history] == [approval.decision.value]
