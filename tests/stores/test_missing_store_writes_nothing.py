"""A store that was never created stays uncreated unless something is allocated in it.

Before: on an empty PostgreSQL database, the first ``get`` created the store's schema, tables and
functions, and the file store's first update made its directory, ``store.json`` and a key index of
512 directories, only to answer "episode not found". A lookup of an episode in a store that does
not exist (a mistyped URL, the wrong database) must create nothing; the CLI's readers (``show``,
``list``) say that no store exists there (exit 5, as ``report`` does), its writers of an existing
episode (``approve``, ``reject``) that the episode does not exist (exit 4).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeNotFound, EpisodeStore, open_store
from airflow_idempotent_jobs.episode import Decision
from tests.clirun import run_cli, run_main
from tests.pg import catalog

EID = "2026-W32-0"

#: Every store call that needs an existing episode.
CALLS: dict[str, Callable[[EpisodeStore], Any]] = {
    "get": lambda s: s.get(EID),
    "update": lambda s: s.update(EID, lambda e: e),
    "update_in_week": lambda s: s.update_in_week(EID, lambda e, _week: e),
    "decide": lambda s: s.decide(EID, Decision.APPROVED, by="alice", via="cli"),
    "ask": lambda s: s.ask(EID, by="dag/run/task/-1 try 1", via="airflow"),
}


@pytest.mark.postgres
@pytest.mark.parametrize("call", list(CALLS))
def test_an_episode_call_on_an_empty_database_is_not_found_and_creates_nothing(empty_database: str, call: str) -> None:
    before = catalog(empty_database)
    with open_store(empty_database) as store:
        with pytest.raises(EpisodeNotFound, match=f"episode {EID} not found in .*no episode store exists there"):
            CALLS[call](store)
        with pytest.raises(EpisodeNotFound):  # asked again on the same store object: still nothing created
            CALLS[call](store)
    assert catalog(empty_database) == before


@pytest.mark.parametrize("call", list(CALLS))
def test_an_episode_call_on_a_missing_file_store_is_not_found_and_creates_nothing(tmp_path: Path, call: str) -> None:
    root = tmp_path / "never-written"
    with (
        open_store(root) as store,
        pytest.raises(EpisodeNotFound, match=f"episode {EID} not found in .*no episode store exists there"),
    ):
        CALLS[call](store)
    assert not root.exists()


@pytest.mark.postgres
def test_a_store_once_created_answers_episode_calls_as_before(empty_database: str) -> None:
    """The positive control: allocation creates the store, then the same calls find the episode."""
    with open_store(empty_database) as store:
        with pytest.raises(EpisodeNotFound):
            store.get(EID)
        store.allocate("2026-W32", "k")  # the same store object: it must not remember "missing"
        for call in CALLS.values():
            call(store)
        assert store.get(EID).approval.decision is Decision.APPROVED


# -- the command -----------------------------------------------------------------------------------
@pytest.mark.postgres
def test_the_command_reads_and_decides_nothing_into_an_empty_database(empty_database: str) -> None:
    before = catalog(empty_database)
    for args, code, words in (
        (["show", EID], 5, "no episode store in schema idempotent_jobs"),
        (["list"], 5, "no episode store in schema idempotent_jobs"),
        (["list", "--week", "2026-W32", "--json"], 5, "no episode store in schema idempotent_jobs"),
        (["approve", EID, "--by", "alice"], 4, f"episode {EID} not found"),
        (["reject", EID, "--by", "alice"], 4, f"episode {EID} not found"),
    ):
        done = run_main("--store", empty_database, *args)
        assert done.code == code, (args, done)
        line = done.error_line()
        assert words in line, line
        assert code == 4 or "nothing was ever written there" in line, line
        assert done.stdout == "", args
    # `check` reports the missing store as its finding (exit 1) and writes nothing either.
    checked = run_cli("--store", empty_database, "check")
    assert checked.code == 1 and "no store schema" in checked.stdout, checked
    assert "(the first allocation creates it)" in checked.stdout, checked  # before: "(any write migrates it)"
    assert catalog(empty_database) == before


def test_the_command_reads_nothing_from_a_missing_file_store(tmp_path: Path) -> None:
    root = tmp_path / "typo"
    for args, code in ((["show", EID], 5), (["list"], 5), (["rebuild-index"], 5), (["approve", EID, "--by", "x"], 4)):
        done = run_main("--store", str(root), *args)
        assert done.code == code, (args, done)
        assert ("no episode store at" if code == 5 else "not found") in done.error_line()
    assert not root.exists()


@pytest.mark.postgres
def test_show_and_list_never_migrate_an_older_schema(empty_database: str) -> None:
    """Readers never write: an older schema is one line (exit 5) naming both versions, left as it was."""
    from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
    from tests.pg import install_schema

    older = pg_schema.LATEST_VERSION - 1
    install_schema(empty_database, older, [("2026-W32", 0, "old")])
    before = catalog(empty_database)
    for args in (["show", EID], ["list"]):
        done = run_main("--store", empty_database, *args)
        assert done.code == 5, done
        line = done.error_line()
        assert f"at version {older}, this code reads {pg_schema.LATEST_VERSION}" in line, line
    assert catalog(empty_database) == before
    shown = run_main("--store", empty_database, "approve", EID, "--by", "alice")  # a writer migrates it
    assert shown.code == 0, shown
