"""A stored record whose values have the wrong type or range is `StoreCorrupted` naming it, never a traceback.

Python's comparisons are lenient where a record must not be: ``True == 1``, ``1.0 == 1``,
``float("nan") < 5`` is false, ``int(float("inf"))`` raises OverflowError. Each case is written into
a real store (a file's JSON text, or a PostgreSQL jsonb value), then read by the store, the ledger
and the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import Episode, StoreCorrupted
from airflow_idempotent_jobs.paid import SubmissionLedger
from tests.backends import Backend, FileBackend
from tests.paid.support import run_cli

#: Damage to the submission record (valid in both stores' JSON) -> what the reader must say.
SUBMISSION_DAMAGE: dict[str, tuple[str, str]] = {
    "negative-cost": ('"cost": -5', "negative"),
    "text-cost": ('"cost": "2.5"', "not a number"),
    "bool-cost": ('"cost": true', "not a number"),
    "huge-int-cost": ('"cost": ' + "9" * 400, ""),  # a strict JSON reader may refuse it first
    "negative-estimate": ('"estimated_cost": -0.5', "negative"),
    "bool-attempts": ('"attempts": true', "attempts"),
    "float-attempts": ('"attempts": 1.5', "attempts"),
    "negative-attempts": ('"attempts": -1', "attempts"),
    "text-token": ('"token": 7', "token must be text"),
    "history-not-list": ('"history": {"from": "none"}', "history"),
    "omitted-bad": ('"result_omitted": {"reason": "x"}', "result_omitted"),
    "not-an-object": ("", "not a JSON object"),
}
#: Only JSON text (the file store) can hold these numbers.
FILE_ONLY_DAMAGE: dict[str, tuple[str, str]] = {
    "nan-cost": ('"cost": NaN', ""),
    "infinite-estimate": ('"estimated_cost": Infinity', ""),
    "attempts-1e999": ('"attempts": 1e999', ""),
}


def _damaged_submission(good: dict[str, Any], damage: str) -> str:
    """The submission as JSON text with one field replaced by ``damage`` (a ``"key": value`` fragment)."""
    if damage == "":
        return "[1, 2]"
    key = damage.split(":", 1)[0].strip().strip('"')
    rest = {k: v for k, v in good.items() if k != key}
    return json.dumps(rest)[:-1] + ", " + damage + "}"


def _write_submission(backend: Backend, eid: str, text: str) -> None:
    if isinstance(backend, FileBackend):
        path = backend.state_path(eid)
        record = json.loads(path.read_text())
        record["submission"] = "@@"
        path.write_text(json.dumps(record).replace('"@@"', text))
        return
    import psycopg

    with psycopg.connect(backend.url, autocommit=True) as conn:
        conn.execute("UPDATE idempotent_jobs.episodes SET submission = %s::jsonb WHERE episode_id = %s", (text, eid))


def _assert_refused(backend: Backend, eid: str, reason: str) -> None:
    store = backend.open()
    try:
        with pytest.raises(StoreCorrupted) as caught:
            store.get(eid)
        assert eid in caught.value.where or "state.json" in caught.value.where
        assert reason in caught.value.reason
        with pytest.raises(StoreCorrupted):
            SubmissionLedger(store).preflight(eid)
    finally:
        store.close()
    shown = run_cli("--store", backend.url, "show", eid)
    assert shown.returncode == 5, shown.stdout + shown.stderr
    assert len(shown.stderr.strip().splitlines()) == 1 and "Traceback" not in shown.stderr
    checked = run_cli("--store", backend.url, "check")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "Traceback" not in checked.stderr


@pytest.mark.parametrize("name", list(SUBMISSION_DAMAGE))
def test_a_submission_with_a_wrong_value_is_corrupt(backend: Backend, name: str) -> None:
    store = backend.open()
    eid = store.allocate("2026-W32", "k").episode_id
    good = store.get(eid).submission.to_dict()
    store.close()
    damage, reason = SUBMISSION_DAMAGE[name]
    _write_submission(backend, eid, _damaged_submission(good, damage))
    _assert_refused(backend, eid, reason)


@pytest.mark.parametrize("name", list(FILE_ONLY_DAMAGE))
def test_a_non_finite_number_in_a_file_record_is_corrupt(tmp_path: Path, name: str) -> None:
    backend = FileBackend(tmp_path / "store")
    store = backend.open()
    eid = store.allocate("2026-W32", "k").episode_id
    good = store.get(eid).submission.to_dict()
    store.close()
    damage, reason = FILE_ONLY_DAMAGE[name]
    _write_submission(backend, eid, _damaged_submission(good, damage))
    _assert_refused(backend, eid, reason)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("sequence", "true", "sequence must be an integer"),
        ("sequence", "1.0", "sequence must be an integer"),
        ("schema_version", "true", "schema_version"),
        ("schema_version", "1.0", "schema_version"),
        ("created_at", "12", "created_at must be text"),
        ("updated_at", "[]", "updated_at must be text"),
        ("metadata", '[["a", 1]]', "metadata is not a JSON object"),
    ],
)
def test_a_record_field_of_the_wrong_type_is_corrupt(tmp_path: Path, field: str, value: str, reason: str) -> None:
    backend = FileBackend(tmp_path / "store")
    store = backend.open()
    store.allocate("2026-W32", "k0")
    eid = store.allocate("2026-W32", "k1").episode_id  # sequence 1: `true == 1` and `1.0 == 1` in Python
    store.close()
    path = backend.state_path(eid)
    record = json.loads(path.read_text())
    record[field] = "@@"
    path.write_text(json.dumps(record).replace('"@@"', value))
    _assert_refused(backend, eid, reason)


def test_every_record_the_package_writes_reads_back_equal(backend: Backend) -> None:
    """The strict reader accepts what the writer writes (new fields included), byte for byte."""
    from airflow_idempotent_jobs.episode import OmittedResult

    store = backend.open()
    eid = store.allocate("2026-W32", "k").episode_id

    def filled(ep: Episode) -> Episode:
        import dataclasses

        sub = dataclasses.replace(
            ep.submission,
            cost=0,
            estimated_cost=2,
            attempts=3,
            request_fingerprint="sha256:" + "0" * 64,
            cost_anomaly="provider reported cost nan: not a finite number",
            result_omitted=OmittedResult("over the limit", 10, "a" * 64, 5),
        )
        return dataclasses.replace(ep, submission=sub)

    written = store.update(eid, filled)
    assert store.get(eid).submission == written.submission
    assert written.submission.to_dict() == type(written.submission).from_dict(written.submission.to_dict()).to_dict()
    store.close()
