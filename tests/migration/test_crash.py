"""A migration killed with SIGKILL at many points completes when run again: no job twice, nothing lost.

The child is a real interpreter running the real CLI; it counts its ``os.rename``/``os.replace``
calls (every commit point of the store, the journal, the manifest and every moved file) and
SIGKILLs itself just before the k-th one.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_idempotent_jobs import FileEpisodeStore
from airflow_idempotent_jobs.cli import main
from tests.legacy_fixtures import BAD_ENTRIES, GOOD_WEEKS, make_legacy, tree

DRIVER = r"""
import os, signal, sys

kill_at, count_file, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
calls = 0

def counted(real):
    def wrapper(*args, **kwargs):
        global calls
        calls += 1
        if calls == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return wrapper

os.rename, os.replace = counted(os.rename), counted(os.replace)
from airflow_idempotent_jobs.cli import main
code = main(argv)
with open(count_file, "w") as handle:
    handle.write(str(calls))
sys.exit(code)
"""

#: Where to kill, as a share of all rename/replace calls of a full run (plus the first and last).
POINTS = tuple(round(i / 15, 3) for i in range(16))


def setup(base: Path) -> tuple[Path, Path]:
    legacy = make_legacy(base / "legacy")
    store = base / "store"
    FileEpisodeStore(store).allocate("2026-W30", "airflow:weekly:allocate:manual__2026-07-21T10:00:00+00:00")
    return legacy, store


def run_child(base: Path, kill_at: int, legacy: Path, store: Path) -> tuple[int, int | None]:
    count_file = base / "calls.txt"
    argv = ["--store", str(store), "migrate", "--from", str(legacy), "--apply"]
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(kill_at), str(count_file), *argv], capture_output=True, timeout=60
    )
    return done.returncode, int(count_file.read_text()) if count_file.exists() else None


@pytest.fixture(scope="module")
def total_calls(tmp_path_factory: pytest.TempPathFactory) -> int:
    base = tmp_path_factory.mktemp("count")
    code, calls = run_child(base, 0, *setup(base))
    assert code == 1 and calls is not None and calls > 20
    return calls


@pytest.mark.parametrize("share", POINTS)
def test_killed_apply_completes_on_rerun(capsys, tmp_path: Path, total_calls: int, share: float) -> None:
    legacy, store = setup(tmp_path)
    bad_before = {bad: tree(legacy / bad) for bad in BAD_ENTRIES}
    kill_at = min(total_calls, max(1, round(share * total_calls)))
    code, _ = run_child(tmp_path, kill_at, legacy, store)
    assert code == -signal.SIGKILL
    # A dry run of the half-done migration changes nothing and names what it would resume.
    before = tree(tmp_path)
    main(["--store", str(store), "migrate", "--from", str(legacy)])
    out = capsys.readouterr()[0]
    assert tree(tmp_path) == before
    journals = list((store / "migrations" / "journal").glob("*.json"))
    assert out.count("(resume)") == len(journals)

    assert main(["--store", str(store), "migrate", "--from", str(legacy), "--apply"]) == 1
    out, err = capsys.readouterr()
    assert "done:" in out or "nothing to do" in out
    assert err.count("skipped ") == len(BAD_ENTRIES)
    assert main(["--store", str(store), "migrate", "--from", str(legacy), "--apply"]) == 1
    assert capsys.readouterr()[0] == "nothing to do\n"

    episodes = FileEpisodeStore(store).list()
    migrated = sorted(e.metadata["migration"]["legacy_week"] for e in episodes if "migration" in e.metadata)
    assert migrated == list(GOOD_WEEKS)  # each exactly once
    assert len(episodes) == len(GOOD_WEEKS) + 1  # plus the episode allocated before the migration
    assert not any((legacy / week).exists() for week in GOOD_WEEKS)
    assert {bad: tree(legacy / bad) for bad in BAD_ENTRIES} == bad_before
    assert not list((store / "migrations" / "journal").glob("*.json"))
    manifests = sorted((store / "migrations").glob("manifest-*.json"))
    assert manifests
    for manifest in manifests:
        assert main(["--store", str(store), "check", "--manifest", str(manifest)]) == 0, capsys.readouterr()
    # The first manifest, written before anything moved, covers every job whatever the kill point.
    assert main(["--store", str(store), "check", "--json", "--manifest", str(manifests[0])]) == 0
    assert capsys.readouterr()[0] == ""
