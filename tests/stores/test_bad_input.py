"""Bad input, for every store: the documented exit code, one stderr line, and nothing changed.

Exit codes (docs/design.md): 2 bad input, 3 conflict, 4 not found, 5 store error; ``check`` exits 1
when it finds problems. Every case compares `Backend.snapshot` before and after.
"""

from __future__ import annotations

import pytest

from airflow_idempotent_jobs import EpisodeStore, InvalidIdentifier, StoreCorrupted
from tests.backends import Backend
from tests.clirun import Result, run_cli, run_main

BAD_WEEKS = ["2026-32", "2026-W5", "2026-W00", "2025-W53", "26-W32", "2026-W32 ", "2026-w32", "", "2026-W32-0"]
BAD_EPISODE_IDS = [
    "2026-W32-01",
    "2026-W32--1",
    "2026-W32-",
    "2026-W32",
    "2026-W32-0/../x",
    "../2026-W32-0",
    "2025-W53-0",
    "2026-W32-1e3",
    "2026-W32-0\n",
]
#: Keys are opaque (``a/b``, ``..`` and ``C:\\x`` allocate normally: tests/stores/test_opaque_keys.py); what
#: is refused is text that is empty, too long, or would hide or forge text where a key is shown.
BAD_KEYS = [
    "tab\there",
    "new\nline",
    "bell\x07",
    "esc\x1b[31m",
    "csi\x9b2J",
    "rlo\u202eevil",
    "line\u2028sep",
    "zero\u200bwidth",
    "k" * 513,
    "",
]


@pytest.fixture
def populated(store: EpisodeStore) -> EpisodeStore:
    store.allocate("2026-W32", "job-a")
    store.allocate("2026-W32", "job-b")
    return store


def cli(backend: Backend, *args: str) -> Result:
    """In this process: these cases are many and each is cheap."""
    return run_main("--store", backend.url, *args)


def cli_process(backend: Backend, *args: str) -> Result:
    """In a child process, exactly as an operator runs it."""
    return run_cli("--store", backend.url, *args)


def assert_refused(result: Result, code: int) -> str:
    assert result.code == code, (result.code, result.stderr)
    assert result.stdout == ""
    return result.error_line()


@pytest.mark.parametrize("week", BAD_WEEKS)
def test_a_malformed_week_is_refused_before_anything_is_touched(
    backend: Backend, populated: EpisodeStore, week: str
) -> None:
    before = backend.snapshot()
    with pytest.raises(InvalidIdentifier):
        populated.allocate(week, "job-c")
    with pytest.raises(InvalidIdentifier):
        populated.list(week)
    run = cli_process if week == BAD_WEEKS[0] else cli
    line = assert_refused(run(backend, "allocate", "--week", week, "--key", "job-c"), 2)
    assert "week" in line
    assert_refused(cli(backend, "list", "--week", week), 2)
    assert backend.snapshot() == before


@pytest.mark.parametrize("episode_id", BAD_EPISODE_IDS)
def test_a_malformed_episode_id_is_refused(backend: Backend, populated: EpisodeStore, episode_id: str) -> None:
    before = backend.snapshot()
    with pytest.raises(InvalidIdentifier):
        populated.get(episode_id)
    run = cli_process if episode_id == BAD_EPISODE_IDS[0] else cli
    line = assert_refused(run(backend, "show", episode_id), 2)
    assert "episode id" in line
    assert_refused(cli(backend, "check", "2026-W32-0", episode_id), 2)
    assert backend.snapshot() == before


@pytest.mark.parametrize("key", BAD_KEYS, ids=lambda key: repr(key)[:20])
def test_a_bad_allocation_key_is_refused(backend: Backend, populated: EpisodeStore, key: str) -> None:
    before = backend.snapshot()
    with pytest.raises(InvalidIdentifier):
        populated.allocate("2026-W32", key)
    with pytest.raises(InvalidIdentifier):
        populated.find(key)
    run = cli_process if key in ("tab\there", "rlo\u202eevil") else cli
    line = assert_refused(run(backend, "allocate", "--week", "2026-W32", "--key", key), 2)
    assert "allocation key" in line
    assert backend.snapshot() == before


def test_a_key_of_exactly_512_printable_characters_is_accepted(populated: EpisodeStore) -> None:
    key = "é" + "k" * 511
    assert populated.allocate("2026-W32", key).sequence == 2
    assert populated.allocate("2026-W32", key).reused is True


@pytest.mark.parametrize(
    "args",
    [
        ["allocate", "--key", "job-c"],  # no week, no date
        ["allocate", "--week", "2026-W32", "--date", "2026-08-03", "--key", "job-c"],
        ["allocate", "--date", "2026-13-01", "--key", "job-c"],
        ["allocate", "--date", "2026-08-03", "--tz", "Mars/Olympus", "--key", "job-c"],
        ["allocate", "--week", "2026-W32", "--tz", "UTC", "--key", "job-c"],
        ["allocate", "--date", "2026-08-03", "--tz", "", "--key", "job-c"],
        ["allocate", "--week", "2026-W32", "--tz", "", "--key", "job-c"],
        ["allocate", "--week", "2026-W32", "--key", "job-c", "--fingerprint", "has space"],
        ["show"],
        ["no-such-command"],
    ],
    ids=lambda args: " ".join(args)[:40],
)
def test_bad_usage_exits_2_with_one_line(backend: Backend, populated: EpisodeStore, args: list[str]) -> None:
    before = backend.snapshot()
    assert_refused(cli(backend, *args), 2)
    assert backend.snapshot() == before


def test_show_of_an_unknown_episode_exits_4(backend: Backend, populated: EpisodeStore) -> None:
    before = backend.snapshot()
    line = assert_refused(cli_process(backend, "show", "2026-W32-2"), 4)
    assert "2026-W32-2" in line
    assert "not found" in line
    assert_refused(cli(backend, "show", "2031-W01-0"), 4)
    assert backend.snapshot() == before


def test_a_conflict_exits_3_and_writes_nothing(backend: Backend, populated: EpisodeStore) -> None:
    before = backend.snapshot()
    line = assert_refused(cli_process(backend, "allocate", "--week", "2026-W33", "--key", "job-a"), 3)
    assert "2026-W32-0" in line
    assert backend.snapshot() == before


@pytest.mark.parametrize("how", ["truncated", "not-json", "unknown-version"])
def test_a_corrupt_episode_stops_every_command_but_check(backend: Backend, populated: EpisodeStore, how: str) -> None:
    backend.corrupt("2026-W32-1", how)
    before = backend.snapshot()

    with pytest.raises(StoreCorrupted):
        populated.get("2026-W32-1")
    with pytest.raises(StoreCorrupted):
        populated.list()
    with pytest.raises(StoreCorrupted):
        populated.allocate("2026-W32", "job-b")  # the retry must read the damaged record
    for args in (
        ["allocate", "--week", "2026-W32", "--key", "job-b"],
        ["show", "2026-W32-1"],
        ["list"],
        ["list", "--week", "2026-W32", "--json"],
    ):
        line = assert_refused(cli(backend, *args), 5)
        assert "2026-W32-1" in line, args
        if backend.name == "file":
            assert "state.json" in line
    # The healthy episode next to it is still readable on its own.
    healthy = cli(backend, "show", "2026-W32-0")
    assert healthy.code == 0, healthy.stderr

    check = cli_process(backend, "check")
    assert check.code == 1, check.stderr
    assert "2026-W32-1" in check.stdout
    assert "Traceback" not in check.stderr
    assert backend.snapshot() == before


def test_a_lock_timeout_that_is_no_number_of_seconds_is_bad_input(backend: Backend, populated: EpisodeStore) -> None:
    """NaN never expires a wait, and PostgreSQL cannot be given infinity: refused before any lock.

    (The file store takes infinity, like a negative timeout, as "wait for ever", as filelock does.)
    """
    before = backend.snapshot()
    for timeout in ["nan"] if backend.name == "file" else ["nan", "inf"]:
        with pytest.raises(InvalidIdentifier, match="lock timeout"):
            backend.open(lock_timeout=float(timeout))
        args = ("--lock-timeout", timeout, "allocate", "--week", "2026-W32", "--key", "job-c")
        assert "lock timeout" in assert_refused(cli(backend, *args), 2)
    assert backend.snapshot() == before


@pytest.mark.parametrize(
    "timeout", ["nan", "inf", "-inf", "1e999", "-1", "-0.001", "NaN", "infinity", "-0", "-0.0", "-0e3"]
)
def test_the_command_takes_a_finite_lock_timeout_of_zero_or_more_seconds(
    backend: Backend, populated: EpisodeStore, timeout: str
) -> None:
    """Whatever a store would make of it ("wait for ever" for the file store), the command refuses it."""
    before = backend.snapshot()
    args = (f"--lock-timeout={timeout}", "allocate", "--week", "2026-W32", "--key", "job-c")
    run = cli_process if timeout == "1e999" else cli
    assert "--lock-timeout" in assert_refused(run(backend, *args), 2)
    assert backend.snapshot() == before
    done = cli(backend, "--lock-timeout", "0", "allocate", "--week", "2026-W32", "--key", "job-a")
    assert (done.code, done.stdout) == (0, "2026-W32-0\n"), done.stderr


@pytest.mark.parametrize(
    ("date", "tz"),
    [
        ("9999-12-31T23:00-05:00", None),
        ("0001-01-01T00:00+05:00", None),
        ("9999-12-31T23:00+00:00", "Pacific/Kiritimati"),
        ("0001-01-01T01:00+00:00", "America/New_York"),
        ("9999-12-31T23:59:59.999999-23:59", "UTC"),
    ],
)
def test_a_date_whose_week_falls_outside_the_calendar_is_bad_input(
    backend: Backend, populated: EpisodeStore, date: str, tz: str | None
) -> None:
    before = backend.snapshot()
    extra = ("--tz", tz) if tz else ()
    run = cli_process if date.startswith("9999-12-31T23:00-") else cli
    line = assert_refused(run(backend, "allocate", "--date", date, *extra, "--key", "job-c"), 2)
    assert "date" in line and "range" in line, line
    assert backend.snapshot() == before
