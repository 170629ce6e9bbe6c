"""ISO-week and episode identities, and the grammar of allocation keys.

Ids name directories and rows, so the grammar is strict and checked before any file is touched.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
import zoneinfo
from dataclasses import dataclass
from typing import Final, Union

from .errors import InvalidIdentifier

__all__ = [
    "EpisodeId",
    "MAX_KEY_LENGTH",
    "WeekId",
    "has_hidden_characters",
    "resolve_timezone",
    "validate_allocation_key",
    "validate_fingerprint",
]

MAX_KEY_LENGTH: Final = 512
MAX_FINGERPRINT_LENGTH: Final = 256
_WEEK_RE: Final = re.compile(r"([0-9]{4})-W([0-9]{2})")
_EPISODE_RE: Final = re.compile(r"([0-9]{4}-W[0-9]{2})-(0|[1-9][0-9]{0,8})")

TzLike = Union[str, dt.tzinfo, None]
#: Unicode categories that hide or forge text where it is shown: controls (C0, DEL, C1), format
#: characters (bidi overrides, zero-width), surrogates, line and paragraph separators.
_HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def has_hidden_characters(text: str) -> bool:
    """True if ``text`` (a path, a name an operator typed) holds a character that hides or forges text.

    Looser than a key's "printable": other spaces and unassigned code points are fine in a path.
    """
    return any(unicodedata.category(ch) in _HIDDEN_CATEGORIES for ch in text)


def _weeks_in(year: int) -> int:
    # 28 December always falls in the last ISO week of its year.
    return dt.date(year, 12, 28).isocalendar().week


def resolve_timezone(tz: TzLike) -> dt.tzinfo:
    """An IANA name or tzinfo, UTC when None."""
    if tz is None:
        return dt.timezone.utc
    if isinstance(tz, dt.tzinfo):
        return tz
    if isinstance(tz, str) and tz.strip():
        if tz.upper() == "UTC":
            return dt.timezone.utc
        try:
            return zoneinfo.ZoneInfo(tz)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            pass
    raise InvalidIdentifier("time zone", tz, "not a known IANA time zone name")


@dataclass(frozen=True, order=True)
class WeekId:
    """An ISO-8601 week: the year is the ISO week-year (``%G``), never the calendar year."""

    year: int
    week: int

    def __post_init__(self) -> None:
        if not (1 <= self.year <= 9999):
            raise InvalidIdentifier("week id", f"{self.year}-W{self.week:02d}", "year out of range")
        if not (1 <= self.week <= _weeks_in(self.year)):
            raise InvalidIdentifier(
                "week id",
                f"{self.year:04d}-W{self.week:02d}",
                f"ISO year {self.year} has {_weeks_in(self.year)} weeks",
            )

    @classmethod
    def parse(cls, text: Union[str, WeekId]) -> WeekId:
        if isinstance(text, WeekId):
            return text
        if not isinstance(text, str):
            raise InvalidIdentifier("week id", text, "expected text like 2026-W32")
        match = _WEEK_RE.fullmatch(text)
        if match is None:
            raise InvalidIdentifier("week id", text, "expected YYYY-Www, e.g. 2026-W32")
        return cls(int(match.group(1)), int(match.group(2)))

    @classmethod
    def from_date(cls, day: dt.date) -> WeekId:
        iso = day.isocalendar()
        return cls(iso.year, iso.week)

    @classmethod
    def from_datetime(cls, moment: Union[dt.datetime, dt.date], tz: TzLike = None) -> WeekId:
        """The week of ``moment`` as seen in ``tz`` (default UTC).

        An aware datetime is converted into ``tz`` first; a naive one is taken as wall-clock time
        in ``tz`` already; a plain date is used as it is.
        """
        if isinstance(moment, dt.datetime):
            zone = resolve_timezone(tz)
            if moment.tzinfo is not None and moment.utcoffset() is not None:
                try:
                    moment = moment.astimezone(zone)
                except OverflowError:  # e.g. 9999-12-31T23:00-05:00 is already year 10000 in UTC
                    raise InvalidIdentifier("date", moment.isoformat(), f"out of range in {zone}") from None
            return cls.from_date(moment.date())
        if isinstance(moment, dt.date):
            return cls.from_date(moment)
        raise InvalidIdentifier("date", moment, "expected a date or datetime")

    def monday(self) -> dt.date:
        return dt.date.fromisocalendar(self.year, self.week, 1)

    def next(self) -> WeekId:
        return WeekId.from_date(self.monday() + dt.timedelta(days=7))

    def __str__(self) -> str:
        return f"{self.year:04d}-W{self.week:02d}"


@dataclass(frozen=True, order=True)
class EpisodeId:
    """``<WeekId>-<sequence>``: the sequence is zero-based decimal with no leading zeros."""

    week: WeekId
    sequence: int

    def __post_init__(self) -> None:
        if isinstance(self.sequence, bool) or not isinstance(self.sequence, int):
            raise InvalidIdentifier("episode id", self.sequence, "sequence must be an integer")
        if not (0 <= self.sequence <= 999_999_999):
            raise InvalidIdentifier("episode id", f"{self.week}-{self.sequence}", "sequence out of range")

    @classmethod
    def parse(cls, text: Union[str, EpisodeId]) -> EpisodeId:
        if isinstance(text, EpisodeId):
            return text
        if not isinstance(text, str):
            raise InvalidIdentifier("episode id", text, "expected text like 2026-W32-0")
        match = _EPISODE_RE.fullmatch(text)
        if match is None:
            raise InvalidIdentifier("episode id", text, "expected YYYY-Www-N, e.g. 2026-W32-0")
        try:
            week = WeekId.parse(match.group(1))
        except InvalidIdentifier as exc:
            raise InvalidIdentifier("episode id", text, exc.reason) from exc
        return cls(week, int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.week}-{self.sequence}"


def validate_allocation_key(key: object) -> str:
    """1..512 printable characters, otherwise opaque: never a path, so ``/``, ``\\`` and ``..`` are fine.

    "Printable" is `str.isprintable`: no control characters (C0, DEL, C1), no format characters
    (bidi overrides and isolates, zero-width characters, the byte order mark), no line or paragraph
    separators, no space but U+0020, no surrogates, private-use or unassigned code points. A key is
    shown in tables, logs and error lines: none of those can hide text or move the cursor.
    """
    if not isinstance(key, str):
        raise InvalidIdentifier("allocation key", key, "must be text")
    if not key:
        raise InvalidIdentifier("allocation key", key, "must not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidIdentifier("allocation key", key, f"longer than {MAX_KEY_LENGTH} characters ({len(key)})")
    if not key.isprintable():
        raise InvalidIdentifier("allocation key", key, "contains control, invisible or non-printable characters")
    return key


def validate_fingerprint(fingerprint: object) -> str | None:
    """None, or 1..256 printable characters without spaces."""
    if fingerprint is None:
        return None
    if not isinstance(fingerprint, str) or not fingerprint:
        raise InvalidIdentifier("fingerprint", fingerprint, "must be non-empty text")
    if len(fingerprint) > MAX_FINGERPRINT_LENGTH:
        raise InvalidIdentifier("fingerprint", fingerprint, f"longer than {MAX_FINGERPRINT_LENGTH} characters")
    if not fingerprint.isprintable() or any(ch.isspace() for ch in fingerprint):
        raise InvalidIdentifier("fingerprint", fingerprint, "must be printable with no whitespace")
    return fingerprint
