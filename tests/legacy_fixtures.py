"""Realistic legacy directories: weekly jobs as a media pipeline left them before versioned ids.

`make_legacy` writes four weeks (two published, one rendering, one still a draft) with media
files and a cover, a history file keyed by week, and, unless ``bad=False``, three entries that
cannot be migrated: a directory with a bad name, an impossible week, and unreadable JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

#: Legacy weeks that `make_legacy` creates and that can be migrated.
GOOD_WEEKS = ("2026-W28", "2026-W29", "2026-W30", "2026-W31")
#: Entries that a migration must report and leave alone.
BAD_ENTRIES = ("week-32", "2025-W53", "2026-W33")


def _media(seed: int, header: bytes, size: int, trailer: bytes = b"") -> bytes:
    body = random.Random(seed).randbytes(size - len(header) - len(trailer))
    return header + body + trailer


def _mp4(seed: int, size: int) -> bytes:
    return _media(seed, b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2avc1mp41", size)


def _mp3(seed: int, size: int) -> bytes:
    return _media(seed, b"ID3\x04\x00\x00\x00\x00\x00\x00", size)


def _jpeg(seed: int, size: int) -> bytes:
    return _media(seed, b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", size, b"\xff\xd9")


def _write(path: Path, data: bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _state(path: Path, state: dict[str, Any]) -> None:
    path.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


def _published(root: Path, week: str, seed: int, *, renders: int) -> None:
    d = root / week
    hashes = {
        "episode.mp4": _write(d / "episode.mp4", _mp4(seed, 96_000)),
        "audio/narration.mp3": _write(d / "audio/narration.mp3", _mp3(seed + 1, 24_000)),
        "cover.jpg": _write(d / "cover.jpg", _jpeg(seed + 2, 12_000)),
    }
    _write(d / "script.md", f"# Week {week}\n\nNarration script, approved.\n".encode())
    costs: list[dict[str, Any]] = [
        {"item": "render", "amount": 12.4, "currency": "USD", "at": f"{week}-3T10:02:11Z", "attempt": n + 1}
        for n in range(renders)
    ]
    costs.append({"item": "tts", "amount": 0.85, "currency": "USD", "at": f"{week}-3T09:40:00Z"})
    _state(
        d / "state.json",
        {
            "week": week,
            "title": f"Weekly digest {week}",
            "status": "published",
            "provider": {"name": "acme-video", "job_id": f"acme-{seed:04x}-render", "region": "eu-west-1"},
            "voice": {"vendor": "voxly", "provider_ref": f"vx-{seed}-tts"},
            "approval": {"state": "approved", "by": "editor@example.org", "at": f"{week}-4T08:15:00Z"},
            "costs": costs,
            "completed_at": f"{week}-4T09:00:00Z",
            "artifacts": hashes,
        },
    )


def make_legacy(root: Path, *, bad: bool = True) -> Path:
    """Write a legacy directory at ``root``; returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    _published(root, "2026-W28", 28, renders=1)
    _published(root, "2026-W29", 29, renders=2)
    # Rendering: submitted and paid for the voice, the video still pending, no approval yet.
    d = root / "2026-W30"
    narration = _write(d / "audio/narration.mp3", _mp3(30, 20_000))
    _write(d / "cover.jpg", _jpeg(31, 10_000))
    _state(
        d / "state.json",
        {
            "week": "2026-W30",
            "status": "rendering",
            "provider": {"name": "acme-video", "job_id": "acme-001e-render", "submitted_at": "2026-07-22T10:00:00Z"},
            "approval": {"state": "pending"},
            "costs": [{"item": "tts", "amount": 0.9, "currency": "USD"}],
            "completed_at": None,
            "artifacts": {"audio/narration.mp3": {"sha256": narration, "bytes": 20_000}},
        },
    )
    # A draft: nothing sent to any provider yet, only a cover.
    d = root / "2026-W31"
    _write(d / "cover.jpg", _jpeg(32, 8_000))
    draft = {"week": "2026-W31", "status": "draft", "approval": {"state": "none"}, "notes": "ünïcode ✓"}
    _state(d / "state.json", draft)
    history = {
        "2026-W27": {"status": "published", "published_at": "2026-07-04T09:00:00Z", "note": "directory purged"},
        "2026-W28": {"status": "published", "published_at": "2026-07-11T09:00:00Z", "views": 1840},
        "2026-W29": {"status": "published", "published_at": "2026-07-18T09:00:00Z", "views": 2210},
        "2026-W30": {"status": "rendering"},
    }
    (root / "history.json").write_text(json.dumps(history, indent=2) + "\n", encoding="utf-8")
    if bad:
        _write(root / "week-32" / "state.json", b'{"status": "draft"}\n')
        _write(root / "2025-W53" / "state.json", b'{"status": "draft"}\n')
        _write(root / "2026-W33" / "cover.jpg", _jpeg(33, 4_000))
        _write(root / "2026-W33" / "state.json", b'{"week": "2026-W33", "status": "rend')
    return root


def tree(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry under ``root``: ``{relative path: (sha256 or 'dir', mode, mtime_ns)}``."""
    found: dict[str, tuple[str, int, int]] = {}
    if not root.exists():
        return found
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            st = os.stat(os.path.join(dirpath, name))
            found[os.path.relpath(os.path.join(dirpath, name), root) + "/"] = ("dir", st.st_mode, st.st_mtime_ns)
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            found[os.path.relpath(path, root)] = (digest, st.st_mode, st.st_mtime_ns)
    return found


#: Legacy approval shapes the migration recognises: name -> (week, the state's approval fields,
#: the decision the migrated episode records as (decision, by, at, comment), or None for none).
APPROVAL_SHAPES: dict[str, tuple[str, dict[str, Any], tuple[str, str, str, str | None] | None]] = {
    "object-state": (
        "2026-W01",
        {"approval": {"state": "approved", "by": "editor@example.org", "at": "2026-01-02T08:15:00Z"}},
        ("approved", "editor@example.org", "2026-01-02T08:15:00Z", None),
    ),
    "object-status-named": (
        "2026-W02",
        {
            "approval": {
                "status": "rejected",
                "rejected_by": "finance",
                "rejected_at": "2026-01-09T10:00:00+01:00",
                "comment": "over budget",
            }
        },
        ("rejected", "finance", "2026-01-09T10:00:00+01:00", "over budget"),
    ),
    "object-approved-by": (
        "2026-W03",
        {"approval": {"state": "approved", "approved_by": "Zoë", "approved_at": "2026-W03-4T08:15:00Z", "comment": ""}},
        ("approved", "Zoë", "2026-W03-4T08:15:00Z", ""),
    ),
    "object-pending": ("2026-W04", {"approval": {"state": "pending", "by": "editor@example.org"}}, None),
    "object-none": ("2026-W05", {"approval": {"status": "none"}}, None),
    "null": ("2026-W06", {"approval": None}, None),
    "top-level-approved": (
        "2026-W07",
        {"approved_by": "lead", "approved_at": "2026-02-13T09:30:00-05:00"},
        ("approved", "lead", "2026-02-13T09:30:00-05:00", None),
    ),
    "top-level-rejected": (
        "2026-W08",
        {"rejected_by": "lead", "rejected_at": "2026-02-20T12:00:00Z"},
        ("rejected", "lead", "2026-02-20T12:00:00Z", None),
    ),
    "flag": (
        "2026-W09",
        {"approved": True, "approved_by": "ops", "approved_at": "2026-02-27T09:00:00Z"},
        ("approved", "ops", "2026-02-27T09:00:00Z", None),
    ),
    "flag-false": ("2026-W10", {"approved": False}, None),
    "absent": ("2026-W11", {}, None),
    "mixed-agreeing": (
        "2026-W12",
        {
            "approval": {"state": "approved", "by": "ops"},
            "approved": True,
            "approved_by": "ops",
            "approved_at": "2026-03-13T09:00:00Z",
        },
        ("approved", "ops", "2026-03-13T09:00:00Z", None),
    ),
}

#: A decision time in the one form the migration takes (ISO 8601 with a UTC offset).
T = "2026-10-01T09:00:00Z"

#: Approval fields no migration may guess at: name -> (the state's fields, the field the refusal names).
BAD_APPROVALS: dict[str, tuple[dict[str, Any], str]] = {
    "unknown-state": ({"approval": {"state": "maybe", "by": "x", "at": T}}, "field /approval/state: 'maybe'"),
    "capitalised-state": ({"approval": {"state": "Approved", "by": "x", "at": T}}, "field /approval/state"),
    "not-an-object": ({"approval": "approved"}, "field /approval: expected an object or null, not str"),
    "unknown-field": ({"approval": {"state": "approved", "by": "x", "at": T, "note": "n"}}, "field /approval/note"),
    "no-state": ({"approval": {"by": "x", "at": T}}, "field /approval: has neither state nor status"),
    "state-and-status-differ": (
        {"approval": {"state": "approved", "status": "pending", "by": "x", "at": T}},
        "field /approval/status: contradicts /approval/state",
    ),
    "no-who": ({"approval": {"state": "approved", "at": T}}, "does not say who decided"),
    "no-when": ({"approval": {"state": "rejected", "by": "x"}}, "does not say when"),
    "who-is-null": ({"approved_by": None, "approved_at": T}, "does not say who decided"),
    "who-not-text": ({"approval": {"state": "approved", "by": 42, "at": T}}, "field /approval/by: the approver must"),
    "who-a-list": ({"approved_by": ["a", "b"], "approved_at": T}, "field /approved_by: the approver must be text"),
    "who-with-escapes": ({"approval": {"state": "approved", "by": "ed\x1b[2J", "at": T}}, "field /approval/by"),
    "who-differs": (
        {"approval": {"state": "approved", "by": "x", "at": T}, "approved_by": "y"},
        "field /approved_by: says who decided differently from /approval/by",
    ),
    "when-not-text": ({"rejected_by": "x", "rejected_at": 20260101}, "field /rejected_at: must be a printable"),
    "when-empty": ({"approval": {"state": "approved", "by": "x", "at": ""}}, "field /approval/at: must be a printable"),
    "approved-and-rejected": (
        {"approved_by": "x", "approved_at": T, "rejected_by": "y", "rejected_at": T},
        "field /rejected_by: contradicts /approved_by, /approved_at",
    ),
    "object-against-top-level": (
        {"approval": {"state": "approved", "by": "x", "at": T}, "rejected_at": T},
        "field /rejected_at: contradicts /approval/state",
    ),
    "pending-with-approver": (
        {"approval": {"state": "pending", "approved_by": "x"}},
        "field /approval/approved_by: contradicts /approval/state",
    ),
    "flag-not-boolean": ({"approved": "yes", "approved_by": "x", "approved_at": T}, "field /approved: must be true"),
    "flag-false-but-approver": ({"approved": False, "approved_by": "x", "approved_at": T}, "field /approved_by"),
    "rejected-with-remote-ref": (
        {"approval": {"state": "rejected", "by": "x", "at": T}, "provider": {"job_id": "acme-9"}},
        "yet the state shows spending (remote reference /provider/job_id)",
    ),
    "rejected-with-cost": (
        {"rejected_by": "x", "rejected_at": T, "costs": [{"item": "tts", "amount": 0.5}]},
        "yet the state shows spending (cost record /costs/0)",
    ),
    "rejected-but-completed": (
        {"rejected_by": "x", "rejected_at": T, "completed_at": "2026-03-01T00:00:00Z"},
        "yet the state shows spending (/completed_at)",
    ),
}


def write_week(root: Path, week: str, fields: dict[str, Any]) -> Path:
    """One legacy week holding a cover and a draft state with ``fields``; returns its state file."""
    d = root / week
    _write(d / "cover.jpg", _jpeg(int(week[-2:]), 2_000))
    path = d / "state.json"
    _state(path, {"week": week, "status": "draft", **fields})
    return path


def make_approval_legacy(root: Path) -> Path:
    """A legacy directory with one week per recognised approval shape (`APPROVAL_SHAPES`); returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    for week, fields, _decision in APPROVAL_SHAPES.values():
        write_week(root, week, fields)
    # An approved job that was paid and finished: spending after approval is the normal case.
    write_week(
        root,
        "2026-W13",
        {
            "approval": {"state": "approved", "by": "editor@example.org", "at": "2026-03-20T08:00:00Z"},
            "provider": {"job_id": "acme-13"},
            "costs": [{"item": "render", "amount": 12.5}],
            "completed_at": "2026-03-21T08:00:00Z",
        },
    )
    return root


#: Fields that look like a decision but are in no shape the migration reads (each migrated as
#: undecided before): name -> (the state's fields, the pointer the refusal names, part of its reason).
DECISION_LOOKALIKES: dict[str, tuple[dict[str, Any], str, str]] = {
    "rejectedBy": ({"rejectedBy": "finance", "rejectedAt": T}, "/rejectedBy", "looks like rejected_by"),
    "rejected by": ({"rejected by": "finance", "rejected at": T}, "/rejected by", "looks like rejected_by"),
    "rejected-by": ({"rejected-by": "finance", "rejected-at": T}, "/rejected-by", "looks like rejected_by"),
    "Rejected.At": ({"Rejected.At": T}, "/Rejected.At", "looks like rejected_at"),
    "full-width": ({"\uff52ejected_by": "finance"}, "/\uff52ejected_by", "looks like rejected_by"),
    "approvedBy": ({"approvedBy": "editor", "approvedAt": T}, "/approvedBy", "looks like approved_by"),
    "approved by": ({"approved by": "editor", "approved at": T}, "/approved by", "looks like approved_by"),
    "approved-by": ({"approved-by": "editor", "approved-at": T}, "/approved-by", "looks like approved_by"),
    "approvedAt-beside-a-pending-approval": (
        {"approval": {"state": "pending"}, "approvedAt": T},
        "/approvedAt",
        "looks like approved_at",
    ),
    "decision": ({"decision": "rejected", "decided_by": "finance"}, "/decision", "looks like a decision"),
    "decided_by": ({"decided_by": "finance", "decided_at": T}, "/decided_by", "looks like a decision"),
    "approvals-list": ({"approvals": [{"by": "finance", "verdict": "no"}]}, "/approvals", "looks like a decision"),
    "nested-rejected_by": (
        {"review": {"rejected_by": "finance", "rejected_at": T}},
        "/review/rejected_by",
        "looks like a decision",
    ),
    "nested-approval-object": (
        {"metadata": {"approval": {"state": "rejected", "by": "finance", "at": T}}},
        "/metadata/approval",
        "looks like a decision",
    ),
    "in-a-list": ({"reviews": [{"rejectedBy": "finance"}]}, "/reviews/0/rejectedBy", "looks like a decision"),
    "in-a-cost-record": (
        {"costs": [{"item": "tts", "amount": 0.5, "approved_by": "finance"}]},
        "/costs/0/approved_by",
        "looks like a decision",
    ),
    "pointer-escaped": ({"review/rejected~by": "finance"}, "/review~1rejected~0by", "looks like a decision"),
    # Fail closed: a flag about approval is not read, so the operator says what it means.
    "approval_required": ({"approval_required": True}, "/approval_required", "looks like a decision"),
    "needs_approval": ({"needs_approval": True}, "/needs_approval", "looks like a decision"),
    "pre_approved_budget": ({"pre_approved_budget": 100}, "/pre_approved_budget", "looks like a decision"),
    # The top-level status is the one value the migration reads: a decision there must agree.
    "status-rejected": ({"status": "rejected"}, "/status", "rejected, but the state does not say who decided"),
    "status-Rejected": ({"status": "Rejected"}, "/status", "rejected, but the state does not say who decided"),
    "status-approved": ({"status": "approved"}, "/status", "approved, but the state does not say who decided"),
    "status-not-approved": ({"status": "not approved"}, "/status", "speaks of a decision"),
    "status-against-the-approval": (
        {"status": "rejected", "approval": {"state": "approved", "by": "editor", "at": T}},
        "/status",
        "contradicts /approval/state",
    ),
}

#: Decision times the migration refuses (each was taken verbatim before): name -> (fields, pointer).
BAD_DECISION_TIMES: dict[str, tuple[dict[str, Any], str]] = {
    "yesterday": ({"approval": {"state": "approved", "by": "editor", "at": "yesterday"}}, "/approval/at"),
    "naive-with-a-space": ({"approved_by": "editor", "approved_at": "2026-08-01 10:00"}, "/approved_at"),
    "naive": ({"rejected_by": "finance", "rejected_at": "2026-08-01T10:00:00"}, "/rejected_at"),
    "date-only": ({"approved_by": "editor", "approved_at": "2026-08-01"}, "/approved_at"),
    "week-date-only": (
        {"approval": {"state": "approved", "approved_by": "editor", "approved_at": "2026-W31-5"}},
        "/approval/approved_at",
    ),
    "epoch-seconds-as-text": ({"rejected_by": "finance", "rejected_at": "1785571200"}, "/rejected_at"),
    "zone-name": ({"approved_by": "editor", "approved_at": "2026-08-01T10:00:00 UTC"}, "/approved_at"),
    "offset-with-seconds": ({"approved_by": "editor", "approved_at": "2026-08-01T10:00:00+01:00:30"}, "/approved_at"),
    "impossible-day": ({"approved_by": "editor", "approved_at": "2026-02-30T10:00:00Z"}, "/approved_at"),
    "trailing-blank": ({"approved_by": "editor", "approved_at": "2026-08-01T10:00:00Z "}, "/approved_at"),
    "fullwidth-digits": (
        {"approved_by": "editor", "approved_at": "\uff12\uff10\uff12\uff16-08-01T10:00:00Z"},
        "/approved_at",
    ),
}


def add_history_entry(root: Path, week: str, entry: dict[str, Any]) -> Path:
    """``entry`` as ``week``'s entry of ``root/history.json`` (kept in file order); returns the file."""
    path = root / "history.json"
    history = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    history[week] = entry
    path.write_text(json.dumps(history, indent=2) + "\n", encoding="utf-8")
    return path
