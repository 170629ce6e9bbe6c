"""ISO-week and episode-id grammar, including the year-end edge cases."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_idempotent_jobs import EpisodeId, InvalidIdentifier, WeekId
from airflow_idempotent_jobs.identity import validate_allocation_key, validate_fingerprint


@pytest.mark.parametrize(
    ("day", "week"),
    [
        (dt.date(2024, 12, 30), "2025-W01"),
        (dt.date(2026, 12, 31), "2026-W53"),
        (dt.date(2027, 1, 1), "2026-W53"),
        (dt.date(2027, 1, 3), "2026-W53"),
        (dt.date(2027, 1, 4), "2027-W01"),
        (dt.date(2020, 12, 31), "2020-W53"),
        (dt.date(2021, 1, 3), "2020-W53"),
        (dt.date(2026, 8, 3), "2026-W32"),
    ],
)
def test_week_of_a_date_uses_the_iso_week_year(day: dt.date, week: str) -> None:
    assert str(WeekId.from_date(day)) == week
    assert str(WeekId.from_datetime(day)) == week


def test_week_53_exists_only_in_long_iso_years() -> None:
    assert str(WeekId.parse("2020-W53")) == "2020-W53"
    assert str(WeekId.parse("2026-W53")) == "2026-W53"
    with pytest.raises(InvalidIdentifier, match="2025-W53"):
        WeekId.parse("2025-W53")


def test_from_datetime_converts_into_the_requested_zone() -> None:
    moment = dt.datetime(2026, 8, 2, 22, 30, tzinfo=dt.timezone.utc)
    assert str(WeekId.from_datetime(moment, "Europe/Berlin")) == "2026-W32"
    assert str(WeekId.from_datetime(moment)) == "2026-W31"
    assert str(WeekId.from_datetime(moment, dt.timezone.utc)) == "2026-W31"


def test_naive_datetime_is_wall_clock_time_in_the_zone() -> None:
    assert str(WeekId.from_datetime(dt.datetime(2026, 8, 2, 23, 30), "Europe/Berlin")) == "2026-W31"


def test_unknown_time_zone_is_invalid_input() -> None:
    with pytest.raises(InvalidIdentifier, match="time zone"):
        WeekId.from_datetime(dt.datetime(2026, 8, 2, tzinfo=dt.timezone.utc), "Mars/Olympus")


@pytest.mark.parametrize(
    "text",
    [
        "2026-W1",
        "2026-W00",
        "2026-W54",
        "26-W32",
        "2026W32",
        "2026-w32",
        " 2026-W32",
        "2026-W32\n",
        "\uff12\uff10\uff12\uff16-W32",
    ],
)
def test_malformed_week_ids_are_rejected(text: str) -> None:
    with pytest.raises(InvalidIdentifier):
        WeekId.parse(text)


def test_episode_id_round_trip() -> None:
    episode = EpisodeId.parse("2026-W32-12")
    assert (str(episode.week), episode.sequence, str(episode)) == ("2026-W32", 12, "2026-W32-12")
    assert EpisodeId.parse(episode) is episode


@pytest.mark.parametrize(
    "text",
    [
        "2026-W32",
        "2026-W32-",
        "2026-W32-01",
        "2026-W32--1",
        "2026-W32-a",
        "2025-W53-0",
        "../2026-W32-0",
        "2026-W32-0/x",
    ],
)
def test_malformed_episode_ids_are_rejected(text: str) -> None:
    with pytest.raises(InvalidIdentifier, match="episode id"):
        EpisodeId.parse(text)


@pytest.mark.parametrize("key", ["", "tab\there", "nl\n", "\x00", "\u202e", "\u2028", "\x9b", "k" * 513, 7])
def test_bad_allocation_keys_are_rejected(key: object) -> None:
    with pytest.raises(InvalidIdentifier, match="allocation key"):
        validate_allocation_key(key)


def test_airflow_style_keys_are_accepted() -> None:
    key = "airflow:weekly_media:allocate:scheduled__2026-08-07T00:00:00+00:00:3"
    assert validate_allocation_key(key) == key
    assert validate_allocation_key("k" * 512) == "k" * 512


@pytest.mark.parametrize("key", ["a/b", "..", "x..y", "../../x", "C:\\x", "weekly/2026-08-07", "key with spaces"])
def test_keys_are_opaque_text_not_paths(key: str) -> None:
    assert validate_allocation_key(key) == key


def test_fingerprint_grammar() -> None:
    assert validate_fingerprint(None) is None
    assert validate_fingerprint("sha256:abc") == "sha256:abc"
    for bad in ("", "has space", "x" * 257):
        with pytest.raises(InvalidIdentifier):
            validate_fingerprint(bad)


@pytest.mark.parametrize(
    ("moment", "tz"),
    [
        (dt.datetime(9999, 12, 31, 23, tzinfo=dt.timezone(dt.timedelta(hours=-5))), None),
        (dt.datetime(1, 1, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=5))), None),
        (dt.datetime(9999, 12, 31, 23, tzinfo=dt.timezone.utc), "Pacific/Kiritimati"),
    ],
)
def test_a_moment_outside_the_calendar_in_the_zone_is_invalid_input(moment: dt.datetime, tz: str | None) -> None:
    with pytest.raises(InvalidIdentifier, match="out of range"):
        WeekId.from_datetime(moment, tz)
