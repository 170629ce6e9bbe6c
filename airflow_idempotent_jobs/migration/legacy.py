"""Reading the legacy format: jobs named by their ISO week alone, before versioned ids existed.

Layout of a legacy directory (read-only here; `migrate` moves it into the store)::

    LEGACY_DIR/history.json         optional: one entry per week, ``{"2026-W30": {...}, ...}``
    LEGACY_DIR/<YYYY-Www>/state.json  the job's state: any JSON object
    LEGACY_DIR/<YYYY-Www>/...         artifact files (media, a cover), subdirectories allowed; every
                                      regular file counts, hidden ones (.DS_Store, sub/.x.swp) too
    LEGACY_DIR/.name                  not a week: left alone, not reported

The state object is kept whole; these parts of it are recognised wherever they sit in it:

- a remote reference: any text under a key in `REF_KEYS` (``remote_ref``, ``provider_ref``, ``job_id``);
- a cost record: any object with a numeric ``amount`` inside a list under the key ``costs``;
- artifact hashes: a top-level ``artifacts`` object ``{relative path: sha256 or {"sha256": ...}}``;
- completion: a top-level ``completed_at`` that is not null means the job finished;
- an approval: the top-level fields `legacy_approval` lists; one in doubt refuses the whole migration,
  and so does any other field that looks like a decision, there or in the week's history entry.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..episode import cost_problem
from ..errors import InvalidIdentifier, LegacyApprovalError, LegacyApprovalRefused
from ..identity import WeekId
from .json_files import LEGACY_MAX_DEPTH, UnsafeJson, parse_json, read_capped, read_json_file
from .legacy_approval import (
    LegacyDecision,
    json_pointer,
    read_legacy_approval,
    refuse_history_decisions,
    refuse_rejected_spending,
)

__all__ = [
    "LEGACY_HISTORY_FILE",
    "LEGACY_STATE_FILE",
    "REF_KEYS",
    "CostRecord",
    "FileEntry",
    "LegacyJob",
    "LegacyScan",
    "RemoteRef",
    "SkippedSource",
    "check_legacy_approvals",
    "cost_total",
    "extract_costs",
    "extract_refs",
    "recorded_hashes",
    "scan_legacy",
    "sha256_file",
    "validate_legacy_root",
]

LEGACY_STATE_FILE: Final = "state.json"
LEGACY_HISTORY_FILE: Final = "history.json"
#: Keys whose text value is a provider's reference to a remote (possibly paid) job.
REF_KEYS: Final = frozenset({"remote_ref", "provider_ref", "job_id"})
_COSTS_KEY: Final = "costs"
_ARTIFACTS_KEY: Final = "artifacts"
_CHUNK: Final = 1 << 20


@dataclass(frozen=True)
class FileEntry:
    """One file of a legacy job: its path relative to the week directory, as POSIX text."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class RemoteRef:
    #: RFC 6901 pointer into the legacy state.
    pointer: str
    value: str


@dataclass(frozen=True)
class CostRecord:
    pointer: str
    #: The record exactly as the legacy state holds it.
    record: Mapping[str, Any]

    @property
    def amount(self) -> float:
        return float(self.record["amount"])


@dataclass(frozen=True)
class SkippedSource:
    """A legacy entry that cannot be migrated as it is; nothing of it is touched."""

    where: str
    reason: str


@dataclass(frozen=True)
class LegacyJob:
    """Everything one legacy week holds, read before anything moves."""

    week: WeekId
    source: Path
    state: Mapping[str, Any]
    history_entry: Any
    files: tuple[FileEntry, ...]
    #: The decision the legacy state records (`legacy_approval`); None: no decision.
    approval: LegacyDecision | None = None

    @property
    def remote_refs(self) -> list[RemoteRef]:
        return extract_refs(self.state)

    @property
    def cost_records(self) -> list[CostRecord]:
        return extract_costs(self.state)

    @property
    def finished(self) -> bool:
        return self.state.get("completed_at") is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "legacy_week": str(self.week),
            "source": str(self.source),
            "state": self.state,
            "history_entry": self.history_entry,
            "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in self.files],
            "remote_refs": [{"pointer": r.pointer, "value": r.value} for r in self.remote_refs],
            "cost_records": [{"pointer": c.pointer, "record": c.record} for c in self.cost_records],
            "cost_total": cost_total(self.cost_records),
            "finished": self.finished,
            "approval": None if self.approval is None else self.approval.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LegacyJob:
        """The inverse of `to_dict` (derived fields are recomputed from ``state``).

        ``approval`` is read as written, not recomputed: a manifest or journal written before
        decisions were migrated has none, and its job is migrated (or verified) without one.
        """
        state = data["state"]
        if not isinstance(state, dict):
            raise ValueError("state is not an object")
        files = tuple(FileEntry(str(f["path"]), str(f["sha256"]), int(f["size"])) for f in data["files"])
        approval = LegacyDecision.from_dict(data.get("approval"))
        week, source = WeekId.parse(data["legacy_week"]), Path(data["source"])
        return cls(week, source, state, data.get("history_entry"), files, approval)


@dataclass(frozen=True)
class LegacyScan:
    root: Path
    jobs: tuple[LegacyJob, ...]
    skipped: tuple[SkippedSource, ...]
    #: sha256 of ``history.json``, None when there is none.
    history_sha256: str | None


def sha256_file(path: Path) -> tuple[str, int]:
    """Hex digest and size of a file, read in chunks (media files are large)."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _walk(value: Any, pointer: str) -> Iterator[tuple[str, str, Any]]:
    """(pointer, key, value) for every member of every object, depth first, in file order."""
    if isinstance(value, dict):
        for key, item in value.items():
            child = json_pointer(pointer, key)
            yield child, str(key), item
            yield from _walk(item, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{pointer}/{index}")


def extract_refs(state: Any) -> list[RemoteRef]:
    return [RemoteRef(p, v) for p, k, v in _walk(state, "") if k in REF_KEYS and isinstance(v, str) and v]


def extract_costs(state: Any) -> list[CostRecord]:
    """Cost records; one whose ``amount`` is missing or not a finite number raises ValueError."""
    records = []
    for pointer, key, value in _walk(state, ""):
        if key != _COSTS_KEY or not isinstance(value, list):
            continue
        for index, item in enumerate(value):
            amount = item.get("amount") if isinstance(item, dict) else None
            if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount):
                raise ValueError(f"cost record {pointer}/{index} has no numeric amount: {json.dumps(item)}")
            records.append(CostRecord(f"{pointer}/{index}", item))
    return records


def cost_total(records: list[CostRecord]) -> float | None:
    """The sum of the amounts, rounded to 9 decimals against float noise; None without records."""
    return round(sum(r.amount for r in records), 9) if records else None


def recorded_hashes(state: Any) -> dict[str, str]:
    """The artifact hashes the legacy state itself recorded, ``{relative path: sha256}``."""
    artifacts = state.get(_ARTIFACTS_KEY) if isinstance(state, dict) else None
    found: dict[str, str] = {}
    if isinstance(artifacts, dict):
        for path, value in artifacts.items():
            digest = value.get("sha256") if isinstance(value, dict) else value
            if isinstance(digest, str):
                found[str(path)] = digest.lower()
    return found


def _read_history(root: Path) -> tuple[dict[str, Any], str | None]:
    path = root / LEGACY_HISTORY_FILE
    if not path.exists():
        return {}, None
    try:
        raw = read_capped(path)
        data = parse_json(raw, max_depth=LEGACY_MAX_DEPTH, unique_keys=True)
    except OSError as exc:
        raise InvalidIdentifier("legacy history file", str(path), f"unreadable: {exc.strerror or exc}") from exc
    except UnsafeJson as exc:
        raise InvalidIdentifier("legacy history file", str(path), f"unreadable: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidIdentifier("legacy history file", str(path), "expected a JSON object keyed by week")
    return data, hashlib.sha256(raw).hexdigest()


def _list_files(week_dir: Path) -> list[FileEntry]:
    """Every regular file under ``week_dir``; anything else (a symlink, a socket) is refused."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(week_dir):
        dirnames.sort()
        for name in [*dirnames, *sorted(filenames)]:
            path = Path(dirpath) / name
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise ValueError(f"{path.relative_to(week_dir)} is not a regular file (symlinks are not followed)")
            digest, size = sha256_file(path)
            entries.append(FileEntry(path.relative_to(week_dir).as_posix(), digest, size))
    return entries


def _read_state(state_path: Path) -> dict[str, Any]:
    """A week's state object; ValueError says why it cannot be read."""
    try:
        state = read_json_file(state_path, max_depth=LEGACY_MAX_DEPTH, unique_keys=True)
    except FileNotFoundError as exc:
        raise ValueError(f"no {LEGACY_STATE_FILE}") from exc
    except UnsafeJson as exc:
        raise ValueError(f"{LEGACY_STATE_FILE} is not readable JSON ({exc})") from exc
    if not isinstance(state, dict):
        raise ValueError(f"{LEGACY_STATE_FILE} is not a JSON object")
    return state


def _approval(root: Path, week: str, state: Mapping[str, Any], history: Mapping[str, Any]) -> LegacyDecision | None:
    """The state's decision; `LegacyApprovalRefused` (the whole migration) for one in doubt.

    ValueError from the cost records is left to the caller: that week is skipped, as before.
    """
    state_path = root / week / LEGACY_STATE_FILE
    try:
        refuse_history_decisions(week, history.get(week))
    except LegacyApprovalError as exc:
        raise LegacyApprovalRefused(str(root / LEGACY_HISTORY_FILE), exc) from None
    try:
        decision = read_legacy_approval(state)
        spending = [f"remote reference {r.pointer}" for r in extract_refs(state)]
        spending += [f"cost record {c.pointer}" for c in extract_costs(state)]
        if state.get("completed_at") is not None:
            spending.append("/completed_at")
        refuse_rejected_spending(decision, spending)
    except LegacyApprovalError as exc:
        raise LegacyApprovalRefused(str(state_path), exc) from None
    return decision


def _read_job(root: Path, week: WeekId, history: Mapping[str, Any]) -> LegacyJob:
    """One week directory; ValueError says why it cannot be migrated (`LegacyApprovalRefused`: nothing can)."""
    week_dir = root / str(week)
    state_path = week_dir / LEGACY_STATE_FILE
    state = _read_state(state_path)
    total = cost_total(extract_costs(state))
    problem = None if total is None else cost_problem(total)
    if problem:
        # Each amount may be a number (a refund is negative) while the job's cost, which the
        # episode records, is none: the record would be unreadable after the migration.
        raise ValueError(f"the cost records add up to {total}, {problem}: not a cost an episode can record")
    approval = _approval(root, str(week), state, history)
    files = _list_files(week_dir)
    by_path = {f.path: f for f in files}
    for path, digest in recorded_hashes(state).items():
        entry = by_path.get(path)
        if entry is None:
            raise ValueError(f"the state records a hash for {path}, which is missing")
        if entry.sha256 != digest:
            raise ValueError(f"{path} hashes to {entry.sha256}, the state records {digest}")
    return LegacyJob(week, week_dir, state, history.get(str(week)), tuple(files), approval)


def validate_legacy_root(root: Path) -> tuple[dict[str, Any], str | None]:
    """Raise `InvalidIdentifier` for what stops a whole migration: no directory, an unreadable history.

    Returns the history and its sha256, so that a scan reads the file once.
    """
    if not root.is_dir():
        raise InvalidIdentifier("legacy directory", str(root), "not a directory")
    return _read_history(root)


def check_legacy_approvals(root: Path) -> None:
    """`validate_legacy_root`, then `LegacyApprovalRefused` for the first week whose approval is in doubt.

    Reads only the state files (no artifact is hashed), so an apply can refuse before it takes its
    lock or creates anything; weeks the scan would skip are passed over here.
    """
    root = root.absolute()
    history, _sha = validate_legacy_root(root)
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return  # the scan reports it
    for name in names:
        path = root / name
        try:
            week = str(WeekId.parse(name))
        except InvalidIdentifier:
            continue
        if path.is_symlink() or not path.is_dir():
            continue
        try:
            state = _read_state(root / week / LEGACY_STATE_FILE)
            extract_costs(state)
        except (ValueError, OSError):
            continue
        _approval(root, week, state, history)


def scan_legacy(root: Path) -> LegacyScan:
    """Read a legacy directory without changing it.

    A missing root or an unreadable history file is bad input (`InvalidIdentifier`): the history
    belongs to every week, so no week is migrated without it. A week directory that cannot be read
    is reported in ``skipped`` and the others go on; an approval in doubt (`LegacyApprovalRefused`)
    stops the whole plan, as bad input. Hidden entries of the root (``.name``) are not
    weeks and are passed over; inside a week every regular file is the job's, hidden or not, so
    nothing is left behind in a week directory that the migration removes.
    """
    root = root.absolute()
    history, history_sha = validate_legacy_root(root)
    jobs: list[LegacyJob] = []
    skipped: list[SkippedSource] = []
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        raise InvalidIdentifier("legacy directory", str(root), f"unreadable: {exc.strerror}") from exc
    for name in names:
        path = root / name
        if name.startswith(".") or name == LEGACY_HISTORY_FILE:
            continue
        try:
            week = WeekId.parse(name)
        except InvalidIdentifier as exc:
            skipped.append(SkippedSource(str(path), f"not a legacy week directory: {exc.reason}"))
            continue
        if path.is_symlink() or not path.is_dir():
            skipped.append(SkippedSource(str(path), "not a directory"))
            continue
        try:
            jobs.append(_read_job(root, week, history))
        except LegacyApprovalRefused:
            raise
        except (ValueError, OSError) as exc:
            skipped.append(SkippedSource(str(path), str(exc)))
    return LegacyScan(root, tuple(jobs), tuple(skipped), history_sha)
