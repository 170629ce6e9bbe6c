"""JSON files handed to the CLI and the migration (key maps, manifests, legacy trees): bounded, strict.

Python's `json` reads a file nested 5 000 deep into a `RecursionError`, ``NaN`` and ``1e999`` into
floats that compare false with everything, and ``/dev/zero`` until memory runs out. Here every such
file is read up to a size limit and parsed with `safe_json.loads`; ``unique_keys`` also refuses an
object that names a key twice (the last value would silently win: a cost record or a remote
reference lost), and ``max_depth`` keeps what is copied into records and manifests readable there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from .. import safe_json
from ..errors import UnsafeJson

__all__ = ["LEGACY_MAX_DEPTH", "MAX_FILE_BYTES", "UnsafeJson", "parse_json", "read_capped", "read_json_file"]

#: Largest key map, legacy state or history file read. A legacy state is copied into its episode's
#: record, which the file store reads up to 64 MiB: one state must stay far below that.
MAX_FILE_BYTES: Final = 8 * 1024 * 1024
#: Deepest legacy state or history accepted: both end up nested inside an episode record (two
#: levels down), a journal (one) and a manifest (three), each of which must read back under
#: `safe_json.MAX_DEPTH`.
LEGACY_MAX_DEPTH: Final = safe_json.MAX_DEPTH - 4


def read_json_file(
    path: Path | str,
    *,
    max_bytes: int = MAX_FILE_BYTES,
    max_depth: int = safe_json.MAX_DEPTH,
    unique_keys: bool = False,
) -> Any:
    """The JSON value in ``path``; `UnsafeJson` (a ValueError) says what was refused, `OSError` passes through."""
    return parse_json(read_capped(path, max_bytes), max_depth=max_depth, unique_keys=unique_keys)


def read_capped(path: Path | str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of ``path``; `UnsafeJson` past ``max_bytes`` (a FIFO or /dev/zero is read no further)."""
    with open(path, "rb") as handle:
        raw = handle.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise UnsafeJson(f"larger than {max_bytes} bytes")
    return raw


def parse_json(raw: bytes, *, max_depth: int = safe_json.MAX_DEPTH, unique_keys: bool = False) -> Any:
    """`safe_json.loads`, plus the depth, duplicate-key and UTF-8 round-trip checks of `read_json_file`."""
    value = safe_json.loads(raw)
    if max_depth < safe_json.MAX_DEPTH:
        safe_json.check_depth(value, max_depth)
    if unique_keys:
        # Safe to parse again: safe_json bounded the depth, so this cannot recurse too far.
        json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:  # a "\ud800" escape: no UTF-8 file can hold it again
        raise UnsafeJson(f"holds a lone surrogate ({exc.object[exc.start]!r}) that no UTF-8 file can keep") from None
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise UnsafeJson(f"names the key {key!r} twice")
        seen[key] = value
    return seen
