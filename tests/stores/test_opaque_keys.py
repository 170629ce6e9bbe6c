"""Allocation keys are opaque text, never paths: path-like keys allocate normally, on every store.

A key is 1..512 printable characters (Python's `str.isprintable`): what a run id may hold
(``/``, ``..``, ``\\``, spaces) is accepted; what would hide or forge text where a key is shown
(controls, bidi overrides, zero-width and other format characters, line and paragraph separators,
surrogates, unassigned code points) is refused. Each allocation runs the real command in a child
process started in its own directory; the directory tree around the store and that directory are
compared before and after, so a key used as a path anywhere would show.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from airflow_idempotent_jobs import InvalidIdentifier
from airflow_idempotent_jobs.identity import validate_allocation_key
from tests.backends import Backend, FileBackend
from tests.clirun import run_cli, run_main

PATH_LIKE_KEYS = [
    "a/b",
    "../../x",
    "../../../../x",
    "..",
    ".",
    "C:\\x",
    "weekly/2026-08-07",
    "key with spaces",
    "/etc/passwd",
    "a..b",
    "back\\slash",
    "~root",
    "-rf",
    "%2e%2e%2fx",
    " lead and trail ",
    "airflow:dag:task:manual__2026-08-07T00:00:00+00:00/..",
    "ünïcode/…/✓",
]


def _tree(top: Path, skip: Path | None = None) -> dict[str, str]:
    """Every entry under ``top`` (except the ``skip`` subtree) with its content hash."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        if skip is not None:
            dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), top) + "/"] = "dir"
        for name in filenames:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, top)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return found


@pytest.fixture
def sandbox(backend: Backend, tmp_path: Path) -> tuple[Backend, Path, Path]:
    """(backend, sandbox, cwd): a file store four levels down, so ``../../../../x`` still lands inside."""
    box = tmp_path / "box"
    cwd = box / "cwd"
    cwd.mkdir(parents=True)
    if backend.name == "file":
        backend = FileBackend(box / "l1" / "l2" / "l3" / "store")
    with backend.open() as store:
        store.allocate("2026-W31", "before")  # the store exists: a later change is the key's doing
    return backend, box, cwd


@pytest.mark.parametrize("key", PATH_LIKE_KEYS, ids=repr)
def test_a_path_like_key_allocates_normally_and_nothing_appears_outside_the_store(
    sandbox: tuple[Backend, Path, Path], key: str
) -> None:
    backend, box, cwd = sandbox
    store_root = Path(backend.url) if backend.name == "file" else None
    outside, in_store = _tree(box, skip=store_root), backend.snapshot()

    # argparse reads a value that starts with "-" as an option: such a key is given as --key=-k.
    given = (f"--key={key}",) if key.startswith("-") else ("--key", key)
    first = run_cli("--store", backend.url, "allocate", "--week", "2026-W32", *given, cwd=cwd)
    assert (first.code, first.stdout) == (0, "2026-W32-0\n"), first.stderr
    again = run_cli("--store", backend.url, "allocate", "--week", "2026-W32", *given, cwd=cwd)
    assert (again.code, again.stdout) == (0, "2026-W32-0\n"), again.stderr
    assert f"reused 2026-W32-0 for key {key!r}" in again.stderr

    assert _tree(box, skip=store_root) == outside
    assert os.listdir(cwd) == []
    if store_root is not None:
        added = set(_tree(store_root)) - set(in_store)
        tail = key.rstrip("/").rsplit("/", 1)[-1]
        assert added and not any(tail in name for name in added if len(tail) > 2), sorted(added)
    with backend.open() as store:
        found = store.find(key)
        assert found is not None and found.episode_id == "2026-W32-0"
        assert store.get("2026-W32-0").allocation_key == key
    shown = run_main("--store", backend.url, "show", "2026-W32-0")
    assert json.loads(shown.stdout)["allocation_key"] == key
    # The same key in another week is still a conflict, not a second job.
    assert run_main("--store", backend.url, "allocate", "--week", "2026-W33", f"--key={key}").code == 3


def test_a_key_built_from_a_date_and_a_time_zone_name_works(sandbox: tuple[Backend, Path, Path]) -> None:
    """``--tz Europe/Berlin`` quoted in the key puts a ``/`` in it."""
    backend, _box, cwd = sandbox
    key = "weekly:2026-08-02T22:30:00+00:00@Europe/Berlin"
    args = ("allocate", "--date", "2026-08-02T22:30:00+00:00", "--tz", "Europe/Berlin", "--key", key)
    done = run_cli("--store", backend.url, *args, cwd=cwd)
    assert (done.code, done.stdout) == (0, "2026-W32-0\n"), done.stderr
    assert run_cli("--store", backend.url, *args, cwd=cwd).stdout == "2026-W32-0\n"
    assert os.listdir(cwd) == []


#: Printable by no reasonable definition, or invisible where a key is shown.
HIDDEN_KEYS = {
    "NUL": "a\x00b",
    "ESC": "a\x1b[31mb",
    "DEL": "a\x7fb",
    "C1 CSI": "a\x9b2Jb",
    "NEL": "a\x85b",
    "line separator": "a\u2028b",
    "paragraph separator": "a\u2029b",
    "right-to-left override": "a\u202eb",
    "left-to-right isolate": "a\u2066b",
    "right-to-left mark": "a\u200fb",
    "zero-width space": "a\u200bb",
    "zero-width joiner": "a\u200db",
    "byte order mark": "\ufeffab",
    "soft hyphen": "a\u00adb",
    "tag character": "a\U000e0041b",
    "lone surrogate": "a\ud800b",
    "undecodable argv byte": "a\udcffb",
    "private use": "a\ue000b",
    "unassigned": "a\u0378b",
    "noncharacter": "a\uffffb",
    "no-break space": "a\u00a0b",
    "ideographic space": "a\u3000b",
}


@pytest.mark.parametrize("key", list(HIDDEN_KEYS.values()), ids=list(HIDDEN_KEYS))
def test_a_key_with_characters_that_hide_or_forge_text_is_refused(key: str) -> None:
    with pytest.raises(InvalidIdentifier, match="allocation key"):
        validate_allocation_key(key)


def test_an_undecodable_key_from_the_command_line_is_one_escaped_line(tmp_path: Path) -> None:
    done = run_cli("--store", str(tmp_path / "store"), "allocate", "--week", "2026-W32", "--key", "a\udcffb")
    assert done.code == 2
    assert "allocation key" in done.error_line()
    assert "\\udcff" in done.stderr
    assert not (tmp_path / "store").exists()
