"""The file store's week history: an append-only JSON-lines file per week, derived from the records.

``episodes/<week>/history.jsonl`` holds a header line and then one line per committed episode::

    {"schema_version":1,"week_id":"2026-W32"}
    {"allocation_key":"...","created_at":"...","episode_id":"2026-W32-0","sequence":0}

The header may also carry ``highest_sequence``: the highest sequence the week had used when the
file was rebuilt, so that a rebuild never lowers it even if an episode directory went missing.

It is appended after the commit with one ``O_APPEND`` write and no fsync of its own, so it may
lag behind the episode records (after a crash or a power loss): readers probe past it. A final
line without its newline is the leftover of an interrupted append: readers ignore it and the next
append (under the lock) truncates it away. Any complete line that does not parse, or a header
with an unknown ``schema_version``, is `StoreCorrupted` naming the file.

The highest sequence is read from the file's tail, so its cost does not grow with the week.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from .. import safe_json
from ..episode import SCHEMA_VERSION, Episode
from ..errors import StoreCorrupted
from ..identity import EpisodeId, WeekId
from .durable import open_regular, read_file, write_all

__all__ = [
    "HISTORY_FILE",
    "HistoryTail",
    "append_history",
    "entry_line",
    "history_payload",
    "read_history",
    "read_history_tail",
]

HISTORY_FILE = "history.jsonl"
#: Bytes read from each end of the file; an entry line is a few hundred bytes at most.
_WINDOW = 8192
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class HistoryTail:
    """What an allocation needs from a week's history file."""

    #: The highest sequence the file records (entries or header), None if it records none.
    highest: int | None
    #: The offset right after the last complete line: the torn leftover of an append starts here.
    end: int
    #: The file's size; more than ``end`` when an interrupted append left a partial line.
    size: int

    @property
    def has_header(self) -> bool:
        """False when not even the header line is complete (an append interrupted at creation)."""
        return self.end > 0


def entry_line(episode: Episode) -> bytes:
    entry = {
        "allocation_key": episode.allocation_key,
        "created_at": episode.created_at,
        "episode_id": episode.episode_id,
        "sequence": episode.sequence,
    }
    return (_ENCODER.encode(entry) + "\n").encode("utf-8")


def _header_line(week: WeekId, highest: int | None = None) -> bytes:
    header: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "week_id": str(week)}
    if highest is not None:
        header["highest_sequence"] = highest
    return (_ENCODER.encode(header) + "\n").encode("utf-8")


def history_payload(week: WeekId, highest: int | None, episodes: Iterable[Episode]) -> bytes:
    """A whole history file, as `rebuild_index` writes it (entries in sequence order)."""
    ordered = sorted(episodes, key=lambda e: e.sequence)
    return _header_line(week, highest) + b"".join(entry_line(e) for e in ordered)


def _parse(line: bytes, path: str | Path, offset: int) -> Any:
    try:
        return safe_json.loads(line)
    except safe_json.UnsafeJson as exc:
        raise StoreCorrupted(str(path), f"invalid JSON line at byte {offset} ({exc})") from None


def _header(line: bytes, path: str | Path, week: WeekId) -> int | None:
    """Validate the header line; returns the ``highest_sequence`` it records, if any."""
    data = _parse(line, path, 0)
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise StoreCorrupted(str(path), f"unknown schema_version {version!r}")
    if data.get("week_id") != str(week):
        raise StoreCorrupted(str(path), "history does not describe this week")
    highest = data.get("highest_sequence")
    if highest is not None and not _is_sequence(highest):
        raise StoreCorrupted(str(path), f"invalid highest_sequence {highest!r}")
    return highest


def _is_sequence(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _entry(line: bytes, path: str | Path, offset: int, week: WeekId) -> dict[str, Any]:
    """A parsed entry line, validated: it names an episode of this week and its key."""
    data = _parse(line, path, offset)
    if isinstance(data, dict) and _is_sequence(sequence := data.get("sequence")):
        texts = [data.get(k) for k in ("episode_id", "allocation_key", "created_at")]
        if all(isinstance(t, str) for t in texts) and texts[0] == str(EpisodeId(week, sequence)):
            return data
    raise StoreCorrupted(str(path), f"invalid history entry at byte {offset}: {line[:200]!r}")


def read_history_tail(path: str | Path, week: WeekId) -> HistoryTail | None:
    """The header and the last complete entries of the history, None if there is no file.

    Reads at most a few kilobytes from each end, whatever the week's size.
    """
    try:
        fd = open_regular(path, one_name=True)  # appended to after the commit: refuse it before
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, _WINDOW, 0)
        newline = head.find(b"\n")
        if newline < 0:
            if len(head) < size:
                raise StoreCorrupted(str(path), f"no header line in the first {_WINDOW} bytes")
            return HistoryTail(None, 0, size)  # only an interrupted first append
        highest = _header(head[:newline], path, week)
        header_end = newline + 1
        # The last complete lines: from the end, widening the window until one whole entry is in it.
        window = _WINDOW
        while True:
            start = max(header_end, size - window)
            data = head[start:] if size <= len(head) else os.pread(fd, size - start, start)
            end = data.rfind(b"\n") + 1  # 0: no complete line in the window
            first = 0 if start == header_end else data.find(b"\n") + 1  # skip a cut first line
            if start == header_end or 0 < first < end:
                break
            window *= 2
        if end > first:
            # Entries are appended in sequence order under the lock: the last is the highest
            # (and the allocation probes past it anyway).
            last = data.rfind(b"\n", first, end - 1) + 1 or first
            sequence = _entry(data[last : end - 1], path, start + last, week)["sequence"]
            highest = sequence if highest is None else max(highest, sequence)
        return HistoryTail(highest, start + end if end else header_end, size)
    finally:
        os.close(fd)


def read_history(path: str | Path, week: WeekId) -> tuple[int | None, list[dict[str, Any]]]:
    """The header's ``highest_sequence`` and every complete entry, validated (for check and rebuild).

    `FileNotFoundError` passes through. A file without a complete header line gives no entries.
    """
    raw = read_file(path)
    end = raw.rfind(b"\n") + 1
    lines = raw[:end].split(b"\n")[:-1]
    if not lines:
        return None, []
    highest = _header(lines[0], path, week)
    entries, offset = [], len(lines[0]) + 1
    for line in lines[1:]:
        entries.append(_entry(line, path, offset, week))
        offset += len(line) + 1
    return highest, entries


def append_history(path: str | Path, week: WeekId, tail: HistoryTail | None, episodes: Iterable[Episode]) -> None:
    """Under the lock: append entries with one write, first removing an interrupted append's leftover.

    No fsync: the history is derived (see the module docstring).
    """
    payload = b"".join(entry_line(e) for e in episodes)
    fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        if tail is None or not tail.has_header:
            if tail is not None and tail.size:
                os.ftruncate(fd, 0)
            payload = _header_line(week) + payload
        elif tail.size > tail.end:
            os.ftruncate(fd, tail.end)
        write_all(fd, payload)
    finally:
        os.close(fd)
