"""JSON the CLI and the migration read from outside the store, parsed strictly and boundedly.

A ``--key-map``, a ``check --manifest``, a legacy ``history.json`` or ``state.json`` nested 5 000
deep must not end in `RecursionError` (a traceback, exit 1, which `check` means as "problems
found"); ``NaN`` and ``1e999`` must not become floats that compare false with everything;
``/dev/zero`` must not be read until memory runs out. Each case runs the real command in a child process: one line,
the documented exit code, and nothing changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clirun import Result, run_cli
from tests.legacy_fixtures import make_legacy, tree

DEEP = b"[" * 5000 + b"]" * 5000
DEEP_OBJECT = b'{"a":' * 5000 + b"1" + b"}" * 5000


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    return make_legacy(tmp_path / "legacy", bad=False)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


def refused(done: Result, code: int = 2) -> str:
    assert done.code == code, (done.code, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    return done.error_line()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (DEEP, "nested deeper"),
        (b'{"2026-W28": ' + DEEP_OBJECT + b"}", "nested deeper"),
        (b'{"2026-W28": NaN}', "NaN"),
        (b'{"2026-W28": 1e999}', "out of range"),
        (b'{"2026-W28": 1' + b"0" * 5000 + b"}", "digits"),
        (b'{"2026-W28": "k"', "invalid JSON"),
        (b'\xff{"2026-W28": "k"}', "UTF-8"),
        (b'{"2026-W28": "k", "2026-W28": "other"}', "twice"),
    ],
    ids=["deep", "deep-value", "nan", "1e999", "huge-int", "truncated", "not-utf8", "duplicate"],
)
def test_a_bad_key_map_is_one_line_and_changes_nothing(
    tmp_path: Path, legacy: Path, store: Path, content: bytes, reason: str
) -> None:
    key_map = tmp_path / "keys.json"
    key_map.write_bytes(content)
    before = tree(tmp_path)
    done = run_cli("--store", str(store), "migrate", "--from", str(legacy), "--key-map", str(key_map), "--apply")
    line = refused(done)
    assert "key map" in line and reason in line, line
    assert tree(tmp_path) == before


def test_a_key_map_that_never_ends_is_refused_at_its_size_limit(tmp_path: Path, legacy: Path, store: Path) -> None:
    before = tree(tmp_path)
    done = run_cli("--store", str(store), "migrate", "--from", str(legacy), "--key-map", "/dev/zero")
    assert "larger than" in refused(done)
    assert tree(tmp_path) == before


@pytest.mark.parametrize("content", [DEEP, DEEP_OBJECT, b'{"kind": NaN}'], ids=["deep", "deep-object", "nan"])
def test_a_bad_manifest_is_one_line_for_check(tmp_path: Path, store: Path, content: bytes) -> None:
    done = run_cli("--store", str(store), "allocate", "--week", "2026-W32", "--key", "k")
    assert done.code == 0, done.stderr
    manifest = tmp_path / "manifest.json"
    manifest.write_bytes(content)
    before = tree(tmp_path)
    assert "manifest" in refused(run_cli("--store", str(store), "check", "--manifest", str(manifest)))
    assert tree(tmp_path) == before


def test_a_deep_legacy_history_stops_the_migration_before_anything_moves(
    tmp_path: Path, legacy: Path, store: Path
) -> None:
    (legacy / "history.json").write_bytes(b'{"2026-W28": ' + DEEP + b"}")
    before = tree(tmp_path)
    for extra in ((), ("--apply",)):
        line = refused(run_cli("--store", str(store), "migrate", "--from", str(legacy), *extra))
        assert "legacy history file" in line and "nested deeper" in line, line
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (DEEP, "nested deeper"),
        (b'{"costs": [{"amount": NaN}]}', "NaN"),
        (b'{"costs": [{"amount": 1e999}]}', "out of range"),
        (b'{"costs": [{"amount": "12.40"}]}', "no numeric amount"),
        # Parses, but nested inside a record (two levels), a journal and a manifest it would be
        # deeper than any reader accepts: the episode would be unreadable after the migration.
        (b'{"a":' * 61 + b"1" + b"}" * 61, "nested deeper than 60"),
        (b'{"note": "\\ud800"}', "lone surrogate"),
        (b'{"costs": [{"amount": 1}], "costs": []}', "'costs' twice"),
        # Each amount is a number, but the job's total cost is no cost a record may hold: a refund
        # larger than the charges, or charges whose sum overflows to infinity.
        (b'{"costs": [{"amount": 2}, {"amount": -5}]}', "add up to -3"),
        (b'{"costs": [{"amount": 1e308}, {"amount": 1e308}]}', "add up to inf"),
    ],
    ids=[
        "deep",
        "nan",
        "1e999",
        "text-amount",
        "deep-for-a-record",
        "surrogate",
        "duplicate-costs",
        "negative-total",
        "infinite-total",
    ],
)
def test_a_legacy_week_whose_state_cannot_be_trusted_is_skipped_whole(
    tmp_path: Path, legacy: Path, store: Path, content: bytes, reason: str
) -> None:
    (legacy / "2026-W29" / "state.json").write_bytes(content)
    week = tree(legacy / "2026-W29")
    done = run_cli("--store", str(store), "migrate", "--from", str(legacy), "--apply")
    assert done.code == 1, done.stderr
    assert "Traceback" not in done.stderr
    (skipped,) = [line for line in done.stderr.splitlines() if line.startswith("skipped ")]
    assert str(legacy / "2026-W29") in skipped and reason in skipped, skipped
    assert "done: 3 migrated, 1 skipped" in done.stdout
    assert tree(legacy / "2026-W29") == week  # nothing of the refused week moved
    manifest = next((store / "migrations").glob("manifest-*.json"))
    check = run_cli("--store", str(store), "check", "--manifest", str(manifest))
    assert (check.code, check.stdout) == (0, ""), check.stdout


def test_check_reports_a_deep_original_legacy_state_instead_of_crashing(legacy: Path, store: Path) -> None:
    done = run_cli("--store", str(store), "migrate", "--from", str(legacy), "--apply")
    assert done.code == 0, done.stderr
    original = next(store.glob("episodes/2026-W28/2026-W28-0/legacy/state.json"))
    original.write_bytes(DEEP)
    check = run_cli("--store", str(store), "check")
    assert check.code == 1, check.stderr
    assert "Traceback" not in check.stderr
    assert any(str(original) in line for line in check.stdout.splitlines()), check.stdout


def test_the_key_map_must_be_a_json_object_of_week_to_key(tmp_path: Path, legacy: Path, store: Path) -> None:
    key_map = tmp_path / "keys.json"
    key_map.write_text(json.dumps({"2026-W28": 7}))
    line = refused(run_cli("--store", str(store), "migrate", "--from", str(legacy), "--key-map", str(key_map)))
    assert "allocation key" in line or "key map" in line
