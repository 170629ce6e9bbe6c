"""``idempotent-jobs reconcile ID --effect NAME`` as a real process, against a real HTTP target.

Unknown effects are made by the real ledger (`EffectLedger.run` with a body that raises); a live
runner and a dead one are real child processes (the dead one SIGKILLed in its body). Every test
runs on both stores; "nothing changed" is both the store's bytes (`Backend.snapshot`) and the
records read back (`Episode.to_record`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.effects import EffectLedger, EffectNotDone, EffectState, EffectStateUnknown
from tests.backends import Backend
from tests.clirun import CHILD_TIMEOUT
from tests.effect_target import ECHO, TOKEN, Answer, EffectTarget, json_answer
from tests.paid.support import wait_until

WEEK = "2026-W32"
NAME = "publish"


@pytest.fixture
def target() -> Iterator[EffectTarget]:
    with EffectTarget() as running:
        yield running


def _unknown(store: EpisodeStore, key: str = "k", name: str = NAME) -> str:
    """An episode whose effect's body raised: it may have happened (``unknown``)."""
    eid = store.allocate(WEEK, key).episode_id

    def lost(token: str) -> None:
        raise RuntimeError("the target's answer was lost")

    with pytest.raises(EffectStateUnknown):
        EffectLedger(store).run(eid, name, lost)
    assert store.get(eid).effects[name].state is EffectState.UNKNOWN
    return eid


def _env(credential: str | None = TOKEN, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPOTENT_JOBS")}
    if credential is not None:
        env["IDEMPOTENT_JOBS_PROVIDER_TOKEN"] = credential
    env.update(extra)
    return env


def _reconcile(
    backend: Backend, eid: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_idempotent_jobs", "--store", backend.url, "reconcile", eid, *args],
        capture_output=True,
        text=True,
        env=_env() if env is None else env,
        timeout=CHILD_TIMEOUT,
        check=False,
    )


class Counted:
    """An effect's body that counts its runs."""

    def __init__(self) -> None:
        self.tokens: list[str] = []

    def __call__(self, token: str) -> dict[str, str]:
        self.tokens.append(token)
        return {"ref": f"post-{len(self.tokens)}"}


# -- the three ways --------------------------------------------------------------------------------


def test_done_records_the_reference_and_the_next_run_runs_nothing(backend: Backend, store: EpisodeStore) -> None:
    eid = _unknown(store)
    done = _reconcile(backend, eid, "--effect", NAME, "--done", "post-17", "--by", "alice", "--comment", "seen live")
    assert done.returncode == 0, done.stderr
    effect = store.get(eid).effects[NAME]
    assert (effect.state, effect.result, effect.settled_by) == (EffectState.DONE, {"ref": "post-17"}, "alice")
    assert effect.settled_how == "operator: done, reference given (seen live)"
    assert effect.settled_at and effect.history[-1]["to"] == "done"
    shown = json.loads(done.stdout)
    assert shown["effects"][NAME] == effect.to_dict()
    assert done.stderr.startswith(
        f"settled {eid} effect {NAME}: done (operator: done, reference given (seen live); by alice at "
    )
    body = Counted()
    run = EffectLedger(store).run(eid, NAME, body)
    assert (run.ran, run.result, body.tokens) == (False, {"ref": "post-17"}, [])


def test_not_done_then_the_next_run_runs_it_once(backend: Backend, store: EpisodeStore) -> None:
    eid = _unknown(store)
    done = _reconcile(backend, eid, "--effect", NAME, "--not-done", env=_env(USER="bob"))
    assert done.returncode == 0, done.stderr
    effect = store.get(eid).effects[NAME]
    assert (effect.state, effect.settled_how) == (EffectState.FAILED, "operator: not done")
    assert effect.settled_by is not None and effect.settled_by.startswith("bob@")
    body, ledger = Counted(), EffectLedger(store)
    assert ledger.run(eid, NAME, body).ran
    assert not ledger.run(eid, NAME, body).ran
    assert body.tokens == [effect.token]  # once, with the effect's own token
    assert store.get(eid).effects[NAME].state is EffectState.DONE


@pytest.mark.parametrize("ref_path", [None, "post.id"])
def test_lookup_found(backend: Backend, store: EpisodeStore, target: EffectTarget, ref_path: str | None) -> None:
    eid = _unknown(store)
    token = store.get(eid).effects[NAME].token
    target.answer(token, json_answer(200, {"post": {"id": "post-9", "url": "https://example.invalid/9"}}))
    extra = ["--ref-path", ref_path] if ref_path else []
    done = _reconcile(backend, eid, "--effect", NAME, "--lookup-url", target.url + "/posts/{token}", *extra)
    assert done.returncode == 0, done.stderr
    effect = store.get(eid).effects[NAME]
    expected = {"ref": "post-9"} if ref_path else {"post": {"id": "post-9", "url": "https://example.invalid/9"}}
    assert (effect.state, effect.result, effect.settled_how) == (
        EffectState.DONE,
        expected,
        "token lookup: it happened",
    )
    assert target.requests() == [{"path": f"/posts/{token}", "token": token, "auth": f"Bearer {TOKEN}"}]
    assert json.loads(done.stdout)["effects"][NAME]["state"] == "done"


def test_lookup_not_found_runs_it_once_next_time(backend: Backend, store: EpisodeStore, target: EffectTarget) -> None:
    eid = _unknown(store, name="notify:slack")
    url = target.url + "/search?token={token}&kind=post"
    done = _reconcile(backend, eid, "--effect", "notify:slack", "--lookup-url", url, "--no-effect-status", "404")
    assert done.returncode == 0, done.stderr
    effect = store.get(eid).effects["notify:slack"]
    assert (effect.state, effect.settled_how) == (EffectState.FAILED, "token lookup: nothing for the token")
    (seen,) = target.requests()
    assert seen["token"] == effect.token and seen["path"] == f"/search?token={effect.token}&kind=post"
    body = Counted()
    assert EffectLedger(store).run(eid, "notify:slack", body).ran and len(body.tokens) == 1


def test_a_mapped_effect_and_a_numeric_reference(backend: Backend, store: EpisodeStore, target: EffectTarget) -> None:
    """``publish[3]`` is a name like any other; an integer reference is recorded as its text, as a job id is."""
    eid = _unknown(store, name="publish[3]")
    token = store.get(eid).effects["publish[3]"].token
    target.answer(token, json_answer(200, {"id": 3}))
    done = _reconcile(
        backend, eid, "--effect", "publish[3]", "--lookup-url", target.url + "/p/{token}", "--ref-path", "id"
    )
    assert done.returncode == 0, done.stderr
    assert store.get(eid).effects["publish[3]"].result == {"ref": "3"}


# -- a lookup that proves nothing --------------------------------------------------------------------

HTML = Answer(404, b"<html><body>Not Found</body></html>", "text/html")
UNPROVEN = {
    "404 not declared": ([], json_answer(404, {"error": "no such post"}), "HTTP 404 (JSON)"),
    "404 HTML page": (["--no-effect-status", "404"], HTML, "HTTP 404 (text/html)"),
    "500 echoing the credential": ([], json_answer(500, {"error": f"backend down for {ECHO}"}), "HTTP 500"),
    "200 not JSON": ([], Answer(200, b"ok", "text/plain"), "HTTP 200 (text/plain)"),
    "200 empty list": (["--no-effect-status", "404"], json_answer(200, []), "HTTP 200 (JSON)"),
    "200 without the reference": (["--ref-path", "id"], json_answer(200, {"name": "x"}), "reference at 'id'"),
    "302 redirect": ([], Answer(302, b"", location="http://127.0.0.1:9/elsewhere"), "HTTP 302"),
    "429": ([], json_answer(429, {"error": "slow down"}), "HTTP 429"),
    "410 not the declared status": (["--no-effect-status", "404"], json_answer(410, {"error": "gone"}), "HTTP 410"),
}


@pytest.mark.parametrize("case", sorted(UNPROVEN))
def test_a_lookup_that_proves_nothing_records_nothing(
    backend: Backend, store: EpisodeStore, target: EffectTarget, case: str
) -> None:
    extra, answer, said = UNPROVEN[case]
    eid = _unknown(store)
    target.answer(store.get(eid).effects[NAME].token, answer)
    before, record = backend.snapshot(), store.get(eid).to_record()
    done = _reconcile(backend, eid, "--effect", NAME, "--lookup-url", target.url + "/posts/{token}", *extra)
    assert done.returncode == 5, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"idempotent-jobs: error: episode {eid}: effect {NAME} is still unknown, nothing recorded: ")
    assert said in line and "Traceback" not in done.stderr and done.stdout == ""
    assert TOKEN not in done.stderr  # the credential, echoed by the 500, is redacted
    if case.startswith("500"):
        assert "<redacted>" in line
    assert (backend.snapshot(), store.get(eid).to_record()) == (before, record)
    assert len(target.requests()) == 1


def test_an_unreachable_target_records_nothing(backend: Backend, store: EpisodeStore) -> None:
    eid = _unknown(store)
    before = backend.snapshot()
    with EffectTarget() as gone:
        url = gone.url + "/posts/{token}"  # a port that was listening, closed now
    done = _reconcile(backend, eid, "--effect", NAME, "--lookup-url", url, "--no-effect-status", "404")
    assert done.returncode == 5, done.stderr
    assert "is still unknown, nothing recorded" in done.stderr and "not reachable" in done.stderr
    assert backend.snapshot() == before


def test_a_wrong_credential_is_not_a_proof(backend: Backend, store: EpisodeStore, target: EffectTarget) -> None:
    """The target answers 401 and echoes the header it got: nothing settles, the credential stays hidden."""
    eid = _unknown(store)
    wrong = "wrong-credential-5e8d1c0a9b"
    done = _reconcile(
        backend, eid, "--effect", NAME, "--lookup-url", target.url + "/posts/{token}", "--no-effect-status", "404",
        env=_env(wrong),
    )  # fmt: skip
    assert done.returncode == 5 and "HTTP 401" in done.stderr, done.stderr
    assert wrong not in done.stderr and "<redacted>" in done.stderr
    assert store.get(eid).effects[NAME].state is EffectState.UNKNOWN


# -- refusals: one line, nothing changed, nothing sent -------------------------------------------------


def test_refusals_change_nothing_and_send_nothing(backend: Backend, store: EpisodeStore, target: EffectTarget) -> None:
    eid = _unknown(store)
    settled = store.allocate(WEEK, "settled").episode_id
    EffectLedger(store).run(settled, NAME, Counted())
    url = target.url + "/posts/{token}"
    lookup = ["--lookup-url", url]
    cases: list[tuple[int, list[str], str]] = [
        (3, [eid, "--effect", "other", "--done", "r"], "cannot reconcile effect other (absent)"),
        (3, [settled, "--effect", NAME, "--not-done"], f"cannot reconcile effect {NAME} (done): only an unknown"),
        (3, [settled, "--effect", NAME, *lookup], f"cannot reconcile effect {NAME} (done)"),
        (4, ["2026-W32-9", "--effect", NAME, *lookup], "not found"),
        (2, ["2026-W32-09", "--effect", NAME, "--done", "r"], "invalid episode id"),
        (2, [eid, "--effect", "../x", "--done", "r"], "invalid effect name"),
        (2, [eid, "--effect", NAME], "give --done REF, --not-done, or --lookup-url URL"),
        (2, [eid, "--effect", NAME, "--done", "r", "--not-done"], "not allowed with argument --done"),
        (2, [eid, "--effect", NAME, "--done", "r", *lookup], "not allowed with argument --done"),
        (2, [eid, "--effect", NAME, "--remote-ref", "r"], "--remote-ref settles a paid submission"),
        (2, [eid, "--effect", NAME, "--done", "r", "--not-submitted"], "--not-submitted settles a paid submission"),
        (2, [eid, "--effect", NAME, "--done", "r", "--provider-url", target.url], "--provider-url settles a paid"),
        (2, [eid, "--effect", NAME, *lookup, "--no-job-status", "404"], "--no-job-status settles a paid"),
        (2, [eid, "--effect", NAME, *lookup, "--no-job-status", "0"], "--no-job-status settles a paid"),
        (2, [eid, "--remote-ref", "r", "--no-effect-status", "0"], "--no-effect-status goes with --effect NAME"),
        (2, [eid, "--done", "r"], "--done goes with --effect NAME"),
        (2, [eid, "--not-done"], "--not-done goes with --effect NAME"),
        (2, [eid, "--remote-ref", "r", "--comment", "c"], "--comment goes with --effect NAME"),
        (2, [eid, "--effect", NAME, "--done", " "], "--done must not be empty"),
        (2, [eid, "--effect", NAME, "--done", "post\x1b[2J"], "--done must not contain control"),
        (2, [eid, "--effect", NAME, "--done", "p" * 513], "--done is longer than 512"),
        (2, [eid, "--effect", NAME, "--not-done", "--comment", "one\ntwo"], "--comment must not contain control"),
        (2, [eid, "--effect", NAME, "--not-done", "--by", "alice\u202e"], "--by must not contain control"),
        (2, [eid, "--effect", NAME, "--not-done", "--no-effect-status", "404"], "go with --lookup-url"),
        (2, [eid, "--effect", NAME, "--not-done", "--ref-path", "id"], "go with --lookup-url"),
        (2, [eid, "--effect", NAME, *lookup, "--no-effect-status", "200"], "--no-effect-status must be a 4xx"),
        (2, [eid, "--effect", NAME, *lookup, "--no-effect-status", "409"], "--no-effect-status 409 says"),
        (2, [eid, "--effect", NAME, *lookup, "--no-effect-status", "403"], "--no-effect-status 403 says"),
        (2, [eid, "--effect", NAME, *lookup, "--ref-path", "a..b"], "--ref-path must be a dotted JSON path"),
        (2, [eid, "--effect", NAME, "--lookup-url", "ftp://example.invalid/{token}"], "--lookup-url must be an http"),
        (2, [eid, "--effect", NAME, "--lookup-url", "example.invalid/{token}"], "--lookup-url must be an http"),
        (2, [eid, "--effect", NAME, "--lookup-url", target.url + "/posts"], "--lookup-url must contain {token}"),
        (2, [eid, "--effect", NAME, "--lookup-url", target.url + "/p/{tok}"], "--lookup-url may contain only {token}"),
        (2, [eid, "--effect", NAME, "--lookup-url", target.url + "/p/{token}#x"], "--lookup-url must be a path"),
        (2, [eid, "--effect", NAME, "--lookup-url", target.url + "/p/{token} x"], "--lookup-url must be an http"),
        (2, [eid, "--effect", NAME, "--lookup-url", "http://{token}.example.invalid/p"], "not in its host"),
        (2, [eid, "--effect", NAME, "--lookup-url", "http://u:pw@example.invalid/{token}"], "credentials"),
    ]
    before, records = backend.snapshot(), {e: store.get(e).to_record() for e in (eid, settled)}
    for code, args, message in cases:
        done = _reconcile(backend, *args)
        assert (done.returncode, message in done.stderr) == (code, True), (args, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, (args, done.stderr)
        assert done.stdout == "", args
    no_credential = _reconcile(backend, eid, "--effect", NAME, *lookup, env=_env(None))
    assert no_credential.returncode == 2 and "IDEMPOTENT_JOBS_PROVIDER_TOKEN" in no_credential.stderr
    unknown_first = _reconcile(backend, "2026-W32-9", "--effect", NAME, *lookup, env=_env(None))
    assert unknown_first.returncode == 4, "the episode is loaded before the credential is looked for"
    done_first = _reconcile(backend, settled, "--effect", NAME, *lookup, env=_env(None))
    assert done_first.returncode == 3, "the effect is checked before the credential is looked for"
    assert target.requests() == []
    assert backend.snapshot() == before
    assert {e: store.get(e).to_record() for e in (eid, settled)} == records


# -- runners: a live one is never raced, a dead one's intent is settled ------------------------------

RUNNER = """
import pathlib, sys, time
from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.effects import EffectLedger

store_path, eid, name, gate = sys.argv[1:5]

def body(token):
    pathlib.Path(gate + ".started").write_text(token)
    deadline = time.monotonic() + 60
    while not pathlib.Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"ref": "posted-by-runner"}

with open_store(store_path) as store:
    EffectLedger(store).run(eid, name, body)
"""


def _runner(backend: Backend, eid: str, gate: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", RUNNER, backend.url, eid, NAME, str(gate)], text=True)
    wait_until(lambda: Path(str(gate) + ".started").exists(), timeout=CHILD_TIMEOUT, what="the runner's body")
    return child


def test_a_live_runner_is_never_raced(tmp_path: Path, backend: Backend, store: EpisodeStore) -> None:
    eid = store.allocate(WEEK, "k").episode_id
    gate = tmp_path / "gate"
    child = _runner(backend, eid, gate)
    try:
        assert store.get(eid).effects[NAME].state is EffectState.PENDING
        before = backend.snapshot()
        for way in (["--done", "r"], ["--not-done"]):
            refused = _reconcile(backend, eid, "--effect", NAME, *way)
            assert refused.returncode == 3, refused.stderr
            assert f"cannot reconcile effect {NAME} (pending): its runner " in refused.stderr
            assert "is still running" in refused.stderr
        assert backend.snapshot() == before
    finally:
        gate.touch()
        assert child.wait(timeout=CHILD_TIMEOUT) == 0
    effect = store.get(eid).effects[NAME]
    assert (effect.state, effect.result, effect.attempts) == (EffectState.DONE, {"ref": "posted-by-runner"}, 1)


def test_a_killed_runners_intent_is_settled(tmp_path: Path, backend: Backend, store: EpisodeStore) -> None:
    eid = store.allocate(WEEK, "k").episode_id
    child = _runner(backend, eid, tmp_path / "gate")
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=CHILD_TIMEOUT) == -signal.SIGKILL
    assert store.get(eid).effects[NAME].state is EffectState.PENDING
    done = _reconcile(backend, eid, "--effect", NAME, "--done", "post-seen-on-site", "--by", "carol")
    assert done.returncode == 0, done.stderr
    effect = store.get(eid).effects[NAME]
    assert [(h["from"], h["to"]) for h in effect.history] == [
        (None, "pending"),
        ("pending", "unknown"),
        ("unknown", "done"),
    ]
    assert (effect.result, effect.settled_by) == ({"ref": "post-seen-on-site"}, "carol")


def test_a_body_that_says_not_done_needs_no_reconcile(backend: Backend, store: EpisodeStore) -> None:
    """``failed`` is known, not unknown: reconcile refuses it (the next run runs it)."""
    eid = store.allocate(WEEK, "k").episode_id

    def refused(token: str) -> None:
        raise EffectNotDone("the target said 400: nothing posted")

    with pytest.raises(EffectNotDone):
        EffectLedger(store).run(eid, NAME, refused)
    done = _reconcile(backend, eid, "--effect", NAME, "--done", "r")
    assert done.returncode == 3 and f"effect {NAME} (failed)" in done.stderr, done.stderr
