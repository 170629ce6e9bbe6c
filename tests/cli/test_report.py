"""``idempotent-jobs report`` through the real command, on real stores made by the real ledger."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Iterator

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.operations import week_view
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import Backend
from tests.clirun import run_cli, run_main
from tests.operations_scenario import LAST_WEEK, WEEK, Scenario, build

NOW = dt.datetime.now(dt.timezone.utc)


@pytest.fixture(autouse=True)
def _now() -> None:
    """Each test's own now: a time taken at import ages past the 900 s claim lease in a long suite."""
    global NOW
    NOW = dt.datetime.now(dt.timezone.utc)


@pytest.fixture
def scenario(store: EpisodeStore) -> Iterator[Scenario]:
    with ProviderServer(polls_to_finish=1) as server:
        yield build(store, server, NOW)


def test_text_report_over_a_range(backend: Backend, scenario: Scenario) -> None:
    done = run_cli("--store", backend.url, "report", "--from", LAST_WEEK, "--to", "2026-W33", "--budget", "10")
    assert (done.code, done.stderr) == (0, "")
    blocks = re.split(r"(?<=\n)(?=2026-W)", done.stdout)
    assert [block.split()[0] for block in blocks] == [LAST_WEEK, WEEK, "2026-W33"]
    week = blocks[1]
    assert week.startswith(
        f"2026-W32  11 episodes  spend 1.25 of budget 10.00 (not counted, cost unknowable: {scenario.anomaly})\n"
    )
    assert "  status:     allocated 3, running 4, succeeded 2, failed 1, rejected 1\n" in week
    assert "  submission: none 4, submitting 2, accepted 1, succeeded 2, failed 1, unknown 1\n" in week
    assert "  decision:   approved 1, rejected 1, asked 1, none 8\n" in week
    assert "  needs attention: 2\n" in week
    for eid in (scenario.unknown, scenario.stale):
        assert f"\n      idempotent-jobs reconcile {eid}\n" in week
    assert scenario.fresh not in week, "a claim younger than the lease may still be alive"
    assert (
        "needs attention: 1\n" in blocks[0] and f"idempotent-jobs reconcile {scenario.last_week_unknown}" in blocks[0]
    )
    assert blocks[2].startswith("2026-W33  0 episodes  spend 0.00 of budget 10.00\n")
    assert blocks[2].endswith("  needs attention: nothing\n")


def test_json_report_is_the_api_week_object(backend: Backend, store: EpisodeStore, scenario: Scenario) -> None:
    done = run_cli("--store", backend.url, "report", "--week", WEEK, "--json")
    assert done.code == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert json.loads(line) == week_view(store, WEEK, budget=None, now=NOW)


def test_default_is_the_current_week_in_the_given_zone(backend: Backend, store: EpisodeStore) -> None:
    here = WeekId.from_datetime(dt.datetime.now(dt.timezone.utc))
    store.allocate(here, "this-week")
    done = run_main("--store", backend.url, "report", "--json")
    assert done.code == 0, done.stderr
    (view,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert (view["week_id"], len(view["episodes"])) == (str(here), 1)
    # Kiribati is 14 hours ahead of UTC: its week is UTC's or the next one, never an earlier one.
    ahead = json.loads(run_main("--store", backend.url, "report", "--json", "--tz", "Pacific/Kiritimati").stdout)
    assert ahead["week_id"] in (str(here), str(here.next()))


def test_stored_text_cannot_reach_the_terminal(backend: Backend, store: EpisodeStore, scenario: Scenario) -> None:
    def hostile(ep: Episode) -> Episode:
        sub = dataclasses.replace(ep.submission, claimed_by="evil\x1b]0;owned\x07\u202e:1:x")
        return dataclasses.replace(ep, submission=sub)

    store.update(scenario.stale, hostile)
    done = run_cli("--store", backend.url, "report", "--week", WEEK)
    assert done.code == 0, done.stderr
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout
    assert "evil\\x1b]0;owned\\x07\\u202e:1:x" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--week", "2026-W54"), "invalid week id '2026-W54'"),
        (("--week", "2026-32"), "invalid week id"),
        (("--from", "2026-W33", "--to", "2026-W31"), "--from 2026-W33 is after --to 2026-W31"),
        (("--from", "2024-W01", "--to", "2026-W01"), "is 105 weeks; a report covers at most 104"),
        (("--from", "2026-W01"), "--from and --to go together"),
        (("--week", "2026-W01", "--to", "2026-W02"), "--from and --to go together"),
        (("--week", "2026-W01", "--from", "2026-W01"), "not allowed with argument"),
        (("--budget", "nan"), "a budget is a finite number >= 0, not 'nan'"),
        (("--budget", "1e999"), "not '1e999'"),
        (("--budget", "-1"), "not '-1'"),
        (("--budget", "ten"), "a budget is a number, not 'ten'"),
        (("--budget", ""), "a budget is a number, not ''"),
        (("--budget", "inf"), "argument --budget: a budget is a finite number >= 0, not 'inf'"),
        (("--budget=-inf",), "not '-inf'"),
        (("--budget=-nan",), "not '-nan'"),
        (("--tz", "Mars/Base"), "invalid time zone 'Mars/Base'"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    backend: Backend, store: EpisodeStore, args: tuple[str, ...], message: str
) -> None:
    store.allocate(WEEK, "k")
    before = backend.snapshot()
    done = run_main("--store", backend.url, "report", *args)
    assert done.code == 2 and done.stdout == ""
    assert message in done.error_line()
    assert backend.snapshot() == before


def test_the_widest_range_is_accepted_and_bad_input_through_the_process(backend: Backend, store: EpisodeStore) -> None:
    store.allocate(WEEK, "k")
    done = run_cli("--store", backend.url, "report", "--from", "2025-W01", "--to", "2026-W52", "--json")
    assert done.code == 0, done.stderr
    weeks = [json.loads(line)["week_id"] for line in done.stdout.splitlines()]
    assert (len(weeks), weeks[0], weeks[-1]) == (104, "2025-W01", "2026-W52")
    bad = run_cli("--store", backend.url, "report", "--budget", "1e999")
    assert bad.code == 2 and "1e999" in bad.error_line()


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("--budget", "-0"), "-0"),
        (("--budget", "-0.0"), "-0.0"),
        (("--budget=-0e3",), "-0e3"),
        (("--budget=-.000",), "-.000"),
        (("--budget= -0",), " -0"),
    ],
)
def test_a_negative_zero_budget_is_refused_in_one_line_and_zero_is_a_budget(
    backend: Backend, store: EpisodeStore, args: tuple[str, ...], text: str
) -> None:
    """``--budget -0`` was taken (-0.0 is not below 0) and printed "of budget -0.00"."""
    store.allocate(WEEK, "k")
    before = backend.snapshot()
    bad = run_cli("--store", backend.url, "report", "--week", WEEK, *args)
    assert (bad.code, bad.stdout) == (2, "")
    assert bad.error_line() == (
        f"idempotent-jobs report: error: argument --budget: a budget is a finite number >= 0, not {text!r}"
    )
    assert backend.snapshot() == before
    zero = run_cli("--store", backend.url, "report", "--week", WEEK, "--budget", "0")
    assert zero.code == 0, zero.stderr
    assert zero.stdout.startswith(f"{WEEK}  1 episode  spend 0.00 of budget 0.00\n"), zero.stdout


def test_an_unreachable_database_is_one_line_without_its_password() -> None:
    done = run_cli("--store", "postgresql://ops:s3cret-pw@127.0.0.1:1/ij?connect_timeout=2", "report")
    assert done.code == 5
    line = done.error_line()
    assert "s3cret-pw" not in line and "127.0.0.1" in line


def test_a_store_that_was_never_written_is_exit_5_and_stays_uncreated(backend: Backend) -> None:
    """A mistyped --store once printed an empty week (exit 0); on PostgreSQL it also created the schema."""
    url = backend.url
    if backend.name == "postgres":  # a schema nobody made, in the test's database
        url += ("&" if "?" in url else "?") + "schema=ij_never_made"
    before = backend.snapshot()
    done = run_cli("--store", url, "report", "--json")
    assert done.code == 5 and done.stdout == "", done.stdout
    assert "no episode store" in done.error_line() and "nothing was ever written" in done.error_line()
    assert backend.snapshot() == before
    if backend.name == "postgres":
        import psycopg

        with psycopg.connect(backend.url, autocommit=True) as conn:
            made = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'ij_never_made'").fetchall()
        assert made == []


def test_a_damaged_record_is_named_the_rest_reported_and_the_exit_is_5(
    backend: Backend, store: EpisodeStore, scenario: Scenario
) -> None:
    """One damaged record does not hide its week; the report still fails (exit 5)."""
    backend.corrupt(scenario.succeeded, "not-json")
    before = backend.snapshot()
    done = run_cli("--store", backend.url, "report", "--from", LAST_WEEK, "--to", WEEK)
    assert done.code == 5
    blocks = re.split(r"(?<=\n)(?=2026-W)", done.stdout)
    assert [block.split()[0] for block in blocks] == [LAST_WEEK, WEEK]
    assert blocks[1].startswith(f"2026-W32  10 episodes  spend 0.00 (not counted, cost unknowable: {scenario.anomaly})")
    assert f"\n  damaged, not counted: 1\n    {scenario.succeeded}  " in blocks[1]
    assert "damaged" not in blocks[0]
    line = done.error_line()
    assert scenario.succeeded in line and "idempotent-jobs check" in line
    as_json = run_cli("--store", backend.url, "report", "--week", WEEK, "--json")
    assert as_json.code == 5
    (view,) = [json.loads(text) for text in as_json.stdout.splitlines()]
    assert [d["episode_id"] for d in view["damaged"]] == [scenario.succeeded]
    assert backend.snapshot() == before
