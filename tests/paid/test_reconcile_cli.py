"""``idempotent-jobs reconcile`` (and what ``show``/``list`` say about paid submissions), as a real process."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from airflow_idempotent_jobs import EpisodeStore, SubmissionState, SubmissionStateUnknown
from airflow_idempotent_jobs.paid import SubmissionLedger, idempotency_token, wait_for_terminal
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import FileBackend
from tests.paid.support import jobs_for, provider_for, run_cli

#: Capability (c) as the failing worker saw it: no tokens honoured, no lookup configured.
BLIND = {"tokens_honoured": False, "lookup_path": None}


def _lost(store: EpisodeStore, server: ProviderServer, key: str, fault: str = "drop_after_accept") -> str:
    """An episode whose submit answer was lost (state unknown) under capability (c)."""
    eid = store.allocate("2026-W32", key).episode_id
    server.configure(honour_tokens=False, fault=fault, fault_times=1)
    with pytest.raises(SubmissionStateUnknown):
        SubmissionLedger(store).submit(eid, provider_for(server, **BLIND), {"prompt": "p"})
    assert store.get(eid).submission.state is SubmissionState.UNKNOWN
    return eid


def _env(server: ProviderServer | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPOTENT_JOBS")}
    if server is not None:
        env["IDEMPOTENT_JOBS_PROVIDER_TOKEN"] = server.auth_token
    env.update(extra)
    return env


def test_lookup_settles_to_the_existing_job(tmp_path: Path, file_store: EpisodeStore, server: ProviderServer) -> None:
    eid = _lost(file_store, server, "k")
    (job,) = jobs_for(server, idempotency_token(file_store.namespace, eid))
    done = run_cli(
        "--store", str(tmp_path / "store"), "reconcile", eid, "--provider-url", server.url, "--ref-path", "job.id",
        env=_env(server, USER="alice"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sub = file_store.get(eid).submission
    assert (sub.state, sub.remote_ref) == (SubmissionState.ACCEPTED, job)
    assert sub.settled_by == f"alice@{socket.gethostname()}"
    assert sub.settled_at and sub.settled_how == "token lookup: job found"
    assert json.loads(done.stdout)["submission"]["remote_ref"] == job
    assert f"settled {eid}: accepted {job}" in done.stderr
    # The retry resumes the same job: no second submission.
    ledger, provider = SubmissionLedger(file_store), provider_for(server, **BLIND)
    assert ledger.submit(eid, provider, {"prompt": "p"}).submission.remote_ref == job
    assert wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01).submission.cost == 1.25
    assert server.accepted() == 1


def test_lookup_with_no_job_and_a_config_file(tmp_path: Path, file_store: EpisodeStore, server: ProviderServer) -> None:
    eid = _lost(file_store, server, "k", fault="5xx")  # 503: nothing was created
    config = tmp_path / "provider.json"
    config.write_text(json.dumps(server.provider_config(lookup_path="/jobs?token={token}").to_dict()))
    done = run_cli(
        "--store", str(tmp_path / "store"), "reconcile", eid, "--provider-config", str(config), "--by", "ops",
        env=_env(server),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sub = file_store.get(eid).submission
    assert sub.state is SubmissionState.NONE and sub.settled_how == "token lookup: no job for the token"
    resubmitted = SubmissionLedger(file_store).submit(eid, provider_for(server, **BLIND), {"prompt": "p"})
    assert resubmitted.submission.state is SubmissionState.ACCEPTED
    assert server.accepted() == 1


@pytest.mark.parametrize("word", ["remote-ref", "not-submitted"])
def test_the_operators_word(tmp_path: Path, file_store: EpisodeStore, server: ProviderServer, word: str) -> None:
    eid = _lost(file_store, server, "k")
    (job,) = jobs_for(server, idempotency_token(file_store.namespace, eid))
    args = ["--remote-ref", job] if word == "remote-ref" else ["--not-submitted"]
    done = run_cli("--store", str(tmp_path / "store"), "reconcile", eid, *args, "--by", "bob", env=_env())
    assert done.returncode == 0, done.stderr
    sub = file_store.get(eid).submission
    assert sub.settled_by == "bob" and sub.settled_at
    assert sub.history[-1]["note"] == sub.settled_how
    if word == "remote-ref":
        assert (sub.state, sub.remote_ref, sub.settled_how) == (
            SubmissionState.ACCEPTED,
            job,
            "operator: remote ref given",
        )
    else:  # the operator was wrong here on purpose: the ledger trusts the word and submits once more
        assert sub.state is SubmissionState.NONE
        SubmissionLedger(file_store).submit(eid, provider_for(server, **BLIND), {"prompt": "p"})
        assert server.submissions() == 2
        assert file_store.get(eid).submission.state is SubmissionState.ACCEPTED


def test_show_and_list_display_state_and_cost(tmp_path: Path, file_store: EpisodeStore, server: ProviderServer) -> None:
    eid = file_store.allocate("2026-W32", "paid").episode_id
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    ledger.submit(eid, provider, {"prompt": "p", "units": 2})
    wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01)
    lost = _lost(file_store, server, "lost")
    store_args = ("--store", str(tmp_path / "store"))
    shown = json.loads(run_cli(*store_args, "show", eid, env=_env()).stdout)
    assert shown["submission"]["state"] == "succeeded" and shown["submission"]["cost"] == 2.5
    table = run_cli(*store_args, "list", env=_env()).stdout
    row = next(line for line in table.splitlines() if line.startswith(eid))
    assert "succeeded job-" in row and "2.50" in row
    assert "unknown" in next(line for line in table.splitlines() if line.startswith(lost))
    lines = [json.loads(line) for line in run_cli(*store_args, "list", "--json", env=_env()).stdout.splitlines()]
    assert {(d["episode_id"], d["submission"]["state"], d["submission"]["cost"]) for d in lines} == {
        (eid, "succeeded", 2.5),
        (lost, "unknown", None),
    }


def test_bad_input_changes_nothing_and_sends_nothing(tmp_path: Path, server: ProviderServer) -> None:
    backend = FileBackend(tmp_path / "store")
    store = backend.open()
    eid = _lost(store, server, "k")
    settled = store.allocate("2026-W32", "fine").episode_id
    SubmissionLedger(store).submit(settled, provider_for(server), {"prompt": "p"})
    before, snapshot = server.stats(), backend.snapshot()
    lookup = ["--provider-url", server.url, "--ref-path", "job.id"]
    cases = [
        (4, ["reconcile", "2026-W32-9", *lookup], "not found"),
        (2, ["reconcile", "2026-W32-09", *lookup], "invalid episode id"),
        (2, ["reconcile", eid], "give --remote-ref"),
        (2, ["reconcile", eid, "--remote-ref", "r", "--not-submitted"], "not allowed with"),
        (2, ["reconcile", eid, "--remote-ref", "r", *lookup], "not both"),
        (2, ["reconcile", eid, "--remote-ref", " "], "must not be empty"),
        (3, ["reconcile", settled, "--not-submitted"], "cannot reconcile a submission in state accepted"),
        (3, ["reconcile", settled, *lookup], "cannot reconcile a submission in state accepted"),
    ]
    for code, args, message in cases:
        done = run_cli("--store", str(tmp_path / "store"), *args, env=_env(server))
        assert (done.returncode, message in done.stderr) == (code, True), (args, done.stderr)
        assert "Traceback" not in done.stderr
    unknown_first = run_cli("--store", str(tmp_path / "store"), "reconcile", "2026-W32-9", *lookup, env=_env())
    assert unknown_first.returncode == 4, "the episode is checked before the credential is looked for"
    no_credential = run_cli("--store", str(tmp_path / "store"), "reconcile", eid, *lookup, env=_env())
    assert no_credential.returncode == 2 and "IDEMPOTENT_JOBS_PROVIDER_TOKEN" in no_credential.stderr
    after = server.stats()
    for counter in ("submissions", "lookup_calls", "unauthorized", "status_calls"):
        assert after[counter] == before[counter], counter
    assert backend.snapshot() == snapshot
    backend.corrupt(eid, "truncated")
    damaged = run_cli("--store", str(tmp_path / "store"), "reconcile", eid, "--not-submitted", env=_env())
    assert damaged.returncode == 5 and "store corrupted" in damaged.stderr


def test_bad_templates_configs_and_words_exit_2_and_change_nothing(tmp_path: Path, server: ProviderServer) -> None:
    """A template str.format cannot fill, a config nested 5 000 deep, a word with control characters:
    each is one line and exit 2, before any request; nothing changes."""
    backend = FileBackend(tmp_path / "store")
    store = backend.open()
    eid = _lost(store, server, "k")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    deep_value = tmp_path / "deep-value.json"
    deep_value.write_text(json.dumps({"base_url": server.url, "lookup_path": "/jobs?token={token}"})[:-1]
                          + ', "state_map": ' + '{"a": ' * 5000 + '"running"' + "}" * 5000 + "}")  # fmt: skip
    not_object = tmp_path / "list.json"
    not_object.write_text("[1, 2]")
    before, snapshot = server.stats(), backend.snapshot()
    url = ["--provider-url", server.url, "--ref-path", "job.id"]
    cases = [
        (["--lookup-path", "/j/{token}/{oops}"], "lookup_path"),
        (["--lookup-path", "{0}"], "lookup_path"),
        (["--lookup-path", "/j/{token!r}"], "lookup_path"),
        (["--lookup-path", "/j/{token"], "lookup_path"),
        (["--lookup-path", "@evil.example/{token}"], "lookup_path"),
        (["--no-job-status", "500", "--no-job-path", "error.code"], "lookup_no_job_status"),
        (["--no-job-status", "404"], "lookup_no_job_status"),
        (["--ref-path", "a..b"], "ref_path"),
    ]
    runs = [([*url, *extra], why) for extra, why in cases]
    runs += [
        (["--provider-url", server.url + "/?debug=1"], "base_url"),
        (["--provider-url", "ftp://example.invalid"], "base_url"),
        (["--provider-config", str(deep)], "nested deeper"),
        (["--provider-config", str(deep_value)], "nested deeper"),
        (["--provider-config", str(not_object)], "must be a JSON object"),
        (["--remote-ref", "job-1\x1b[2J"], "--remote-ref"),
        (["--remote-ref", "job-1\nsettled by root"], "--remote-ref"),
        (["--remote-ref", "job-\u202e1"], "--remote-ref"),
        (["--remote-ref", "j" * 513], "--remote-ref"),
        (["--not-submitted", "--by", "alice\r\nbob"], "--by"),
        (["--not-submitted", "--by", "alice\x07"], "--by"),
        (["--not-submitted", "--by", "alice\u2028"], "--by"),
        (["--not-submitted", "--no-job-status", "404"], "go with --provider-url"),
    ]
    for args, why in runs:
        done = run_cli("--store", str(tmp_path / "store"), "reconcile", eid, *args, env=_env(server))
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and why in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr and done.stdout == ""
    after = server.stats()
    for counter in ("submissions", "lookup_calls", "unauthorized", "status_calls"):
        assert after[counter] == before[counter], counter
    assert backend.snapshot() == snapshot
