"""The file store's week history: the append-only, fdatasynced JSON-lines file that commits allocations.

See docs/design.md, "The file store" (the write order, marks, why an entry holds the fresh record).
``episodes/<week>/history.jsonl`` is a header line, one entry per committed episode and one mark per
episode whose record has since been rewritten::

    {"schema_version":2,"week_id":"2026-W32"}
    {"allocation_key":"...","created_at":"...","episode_id":"2026-W32-0","fingerprint":null,"sequence":0}
    {"episode_id":"2026-W32-0","updated":true}
    {"allocation_key":"...","created_at":"...","episode_id":"2026-W32-1","fingerprint":null,"owner":{...},"sequence":1}

``owner`` appears only for an owned allocation; a reader of an earlier release ignores it. The
header's optional ``highest_sequence`` keeps a rebuild from lowering the week's sequence. Version 1
histories are read and rewritten as version 2 before an append; a final line without its newline is
an interrupted append (ignored, truncated by the next append); any other unparsable line or unknown
``schema_version`` is `StoreCorrupted` naming the file. The highest sequence is read from the tail.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeGuard

from ... import safe_json
from ...allocation import new_episode
from ...episode import Approval, Episode, EpisodeStatus, Submission
from ...errors import InvalidIdentifier, StoreCorrupted
from ...identity import EpisodeId, WeekId, validate_fingerprint
from ...owner import OWNER_KEY, Owner
from ..durable import fsync_dir, open_regular, read_file, write_all

__all__ = [
    "HISTORY_FILE",
    "HISTORY_VERSION",
    "HistoryTail",
    "WeekLog",
    "append_history",
    "entry_line",
    "entry_of",
    "fresh_episode",
    "history_payload",
    "is_fresh",
    "mark_line",
    "read_history",
    "read_history_tail",
    "read_week_log",
]

HISTORY_FILE = "history.jsonl"
#: The history layout this code writes: entries commit allocations and carry the fingerprint.
HISTORY_VERSION: Final = 2
#: Versions this code reads (1: a derived history written before entries were commit points).
_READABLE: Final = frozenset({1, HISTORY_VERSION})
#: Bytes read from each end of the file; an entry line is a few hundred bytes at most.
_WINDOW = 8192
#: What a fresh record holds; compared with, never changed (both are frozen).
_NO_SUBMISSION = Submission()
_NO_APPROVAL = Approval()
#: The metadata a fresh record may hold: nothing, or the owner its allocation recorded.
_FRESH_METADATA: Final = frozenset({OWNER_KEY})
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
    #: The header's ``schema_version`` (None without a complete header).
    version: int | None = HISTORY_VERSION

    @property
    def has_header(self) -> bool:
        """False when not even the header line is complete (an append interrupted at creation)."""
        return self.end > 0


@dataclass(frozen=True)
class WeekLog:
    """A whole history, validated: what `check`, a rebuild and a reader of a lost record need."""

    version: int | None
    #: The header's ``highest_sequence``, if any.
    highest: int | None
    entries: list[dict[str, Any]]
    #: Episodes whose record has been rewritten since their entry (marks).
    updated: frozenset[str]

    def entry(self, episode_id: str) -> dict[str, Any] | None:
        return next((e for e in self.entries if e["episode_id"] == episode_id), None)


def entry_of(episode: Episode) -> dict[str, Any]:
    """The history entry that commits ``episode``'s allocation (with its recorded owner, if any)."""
    entry = {
        "allocation_key": episode.allocation_key,
        "created_at": episode.created_at,
        "episode_id": episode.episode_id,
        "fingerprint": episode.fingerprint,
        "sequence": episode.sequence,
    }
    if OWNER_KEY in episode.metadata:
        entry["owner"] = episode.metadata[OWNER_KEY]
    return entry


def entry_line(episode: Episode) -> bytes:
    return _encoded(entry_of(episode))


def _encoded(line: dict[str, Any]) -> bytes:
    return (_ENCODER.encode(line) + "\n").encode("utf-8")


def mark_line(episode_id: str) -> bytes:
    return (_ENCODER.encode({"episode_id": episode_id, "updated": True}) + "\n").encode("utf-8")


def _header_line(week: WeekId, highest: int | None = None) -> bytes:
    header: dict[str, Any] = {"schema_version": HISTORY_VERSION, "week_id": str(week)}
    if highest is not None:
        header["highest_sequence"] = highest
    return (_ENCODER.encode(header) + "\n").encode("utf-8")


def history_payload(
    week: WeekId, highest: int | None, entries: Iterable[dict[str, Any]], marked: Iterable[str] = ()
) -> bytes:
    """A whole history, as a rebuild writes it: entries in sequence order, then the marks."""
    ordered = sorted(entries, key=lambda e: int(e["sequence"]))
    marks = b"".join(mark_line(m) for m in sorted(marked))
    return _header_line(week, highest) + b"".join(_encoded(e) for e in ordered) + marks


def fresh_episode(entry: dict[str, Any], week: WeekId) -> Episode | None:
    """The record an entry committed, as `allocate` made it; None for a version 1 entry (no fingerprint)."""
    if "fingerprint" not in entry:
        return None
    owner = None if entry.get("owner") is None else Owner.recorded(entry["owner"])
    fresh = new_episode(week, entry["sequence"], entry["allocation_key"], entry["fingerprint"], owner)
    return dataclasses.replace(fresh, created_at=entry["created_at"], updated_at=entry["created_at"])


def is_fresh(episode: Episode) -> bool:
    """True while the record is still the one its allocation wrote (never rewritten since).

    Every other field of a fresh record follows from its id, key, fingerprint and recorded owner
    (`fresh_episode`); no update writes the owner (`EpisodeStore.update`).
    """
    return (
        episode.status is EpisodeStatus.ALLOCATED
        and episode.updated_at == episode.created_at
        and set(episode.metadata) <= _FRESH_METADATA
        and episode.submission == _NO_SUBMISSION
        and episode.approval == _NO_APPROVAL
    )


def _parse(line: bytes, path: str | Path, offset: int) -> Any:
    try:
        return safe_json.loads(line)
    except safe_json.UnsafeJson as exc:
        raise StoreCorrupted(str(path), f"invalid JSON line at byte {offset} ({exc})") from None


def _header(line: bytes, path: str | Path, week: WeekId) -> tuple[int, int | None]:
    """Validate the header line; returns its version and the ``highest_sequence`` it records, if any."""
    data = _parse(line, path, 0)
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version not in _READABLE:
        raise StoreCorrupted(str(path), f"unknown schema_version {version!r}")
    if data.get("week_id") != str(week):
        raise StoreCorrupted(str(path), "history does not describe this week")
    highest = data.get("highest_sequence")
    if highest is not None and not _is_sequence(highest):
        raise StoreCorrupted(str(path), f"invalid highest_sequence {highest!r}")
    return version, highest


def _is_sequence(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _line(raw: bytes, path: str | Path, offset: int, week: WeekId) -> dict[str, Any]:
    """A parsed line, validated: an entry (an episode of this week, its key) or a mark."""
    data = _parse(raw, path, offset)
    if isinstance(data, dict) and set(data) == {"episode_id", "updated"} and data["updated"] is True:
        text = data["episode_id"]
        if isinstance(text, str) and _of_week(text, week):
            return data
    elif isinstance(data, dict) and _is_sequence(sequence := data.get("sequence")):
        texts = [data.get(k) for k in ("episode_id", "allocation_key", "created_at")]
        valid = all(isinstance(t, str) for t in texts) and _is_id(texts[0], week, sequence)
        if valid and _fingerprint_ok(data) and _owner_ok(data):
            return data
    raise StoreCorrupted(str(path), f"invalid history entry at byte {offset}: {raw[:200]!r}")


def _is_id(text: Any, week: WeekId, sequence: int) -> bool:
    try:
        return bool(text == str(EpisodeId(week, sequence)))
    except InvalidIdentifier:
        return False


def _of_week(text: str, week: WeekId) -> bool:
    try:
        episode_id = EpisodeId.parse(text)
    except ValueError:
        return False
    return episode_id.week == week and str(episode_id) == text


def _fingerprint_ok(data: dict[str, Any]) -> bool:
    if "fingerprint" not in data or data["fingerprint"] is None:
        return True
    try:
        return bool(validate_fingerprint(data["fingerprint"]) == data["fingerprint"])
    except (InvalidIdentifier, TypeError, ValueError):
        return False


def _owner_ok(data: dict[str, Any]) -> bool:
    if "owner" not in data:
        return True
    try:
        Owner.recorded(data["owner"])
    except ValueError:
        return False
    return True


def _is_mark(line: dict[str, Any]) -> bool:
    return "updated" in line


def read_history_tail(path: str | Path, week: WeekId) -> HistoryTail | None:
    """The header and the last complete entries of the history, None if there is no file.

    Reads at most a few kilobytes from each end, whatever the week's size (marks at the end are
    skipped: the window widens until it holds an entry, or reaches the header).
    """
    try:
        fd = open_regular(path, one_name=True)  # appended to in place: refuse another name first
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, _WINDOW, 0)
        newline = head.find(b"\n")
        if newline < 0:
            if len(head) < size:
                raise StoreCorrupted(str(path), f"no header line in the first {_WINDOW} bytes")
            return HistoryTail(None, 0, size, None)  # only an interrupted first append
        version, highest = _header(head[:newline], path, week)
        header_end = newline + 1
        # The last complete lines: from the end, widening the window until one whole entry is in it.
        window = _WINDOW
        while True:
            start = max(header_end, size - window)
            data = head[start:] if size <= len(head) else os.pread(fd, size - start, start)
            end = data.rfind(b"\n") + 1  # 0: no complete line in the window
            first = 0 if start == header_end else data.find(b"\n") + 1  # skip a cut first line
            sequence = _last_sequence(data, first, end, start, path, week)
            if sequence is not None or start == header_end:
                break
            window *= 2
        if sequence is not None:
            # Entries are appended in sequence order under the lock: the last is the highest
            # (and the allocation probes past it anyway).
            highest = sequence if highest is None else max(highest, sequence)
        return HistoryTail(highest, start + end if end else header_end, size, version)
    finally:
        os.close(fd)


def _last_sequence(data: bytes, first: int, end: int, start: int, path: str | Path, week: WeekId) -> int | None:
    """The sequence of the last entry among the complete lines ``data[first:end]``, None if only marks."""
    stop = end
    while stop > first:
        begin = data.rfind(b"\n", first, stop - 1) + 1 or first
        line = _line(data[begin : stop - 1], path, start + begin, week)
        if not _is_mark(line):
            return int(line["sequence"])
        stop = begin
    return None


def read_week_log(path: str | Path, week: WeekId) -> WeekLog:
    """Every complete line, validated. `FileNotFoundError` passes through; no complete header: empty."""
    raw = read_file(path)
    end = raw.rfind(b"\n") + 1
    lines = raw[:end].split(b"\n")[:-1]
    if not lines:
        return WeekLog(None, None, [], frozenset())
    version, highest = _header(lines[0], path, week)
    entries, updated, offset = [], set(), len(lines[0]) + 1
    for raw_line in lines[1:]:
        line = _line(raw_line, path, offset, week)
        if _is_mark(line):
            updated.add(line["episode_id"])
        else:
            entries.append(line)
        offset += len(raw_line) + 1
    return WeekLog(version, highest, entries, frozenset(updated))


def read_history(path: str | Path, week: WeekId) -> tuple[int | None, list[dict[str, Any]]]:
    """The header's ``highest_sequence`` and every complete entry (marks left out)."""
    log = read_week_log(path, week)
    return log.highest, log.entries


def append_history(path: str | Path, week: WeekId, tail: HistoryTail | None, payload: bytes) -> None:
    """Under the lock: append lines with one write and make them durable: the allocation's commit point.

    An interrupted append's leftover is cut off first. A file this call creates (or one that held
    no complete header, which a power loss may not have kept) also has its directory entry synced.
    """
    fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    new_file = tail is None or not tail.has_header
    try:
        if new_file:
            if tail is not None and tail.size:
                os.ftruncate(fd, 0)
            payload = _header_line(week) + payload
        elif tail is not None and tail.size > tail.end:
            os.ftruncate(fd, tail.end)
        write_all(fd, payload)
        if new_file:
            os.fsync(fd)
        else:
            os.fdatasync(fd)
    finally:
        os.close(fd)
    if new_file:
        fsync_dir(os.path.dirname(path))
