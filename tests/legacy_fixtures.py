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
