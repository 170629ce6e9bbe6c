"""The request's fingerprint: what binds one paid submission to the request it paid for.

A submission records the fingerprint of its request with the ``submitting`` intent; a retry, a
resume or another caller (a second map index on the same episode) with a different request is
refused with `RequestConflict` instead of being handed the first request's job.

The fingerprint is ``sha256:`` and the hex SHA-256 of the request's canonical JSON (`canonical_json`):
UTF-8, keys sorted (so key order never matters), no whitespace, non-ASCII kept as is. Numbers are
written as Python's ``json`` writes them: an ``int`` as its digits, a ``float`` as its shortest
round-trip repr, so ``1`` and ``1.0`` are different requests (the provider receives different
JSON text), as are ``0.1 + 0.2`` and ``0.3``. Tuples are lists. NaN and infinities, keys that are
not strings, values JSON cannot hold and nesting deeper than `safe_json.MAX_DEPTH` are refused with
`InvalidRequest`: such a request cannot be sent as JSON that another reader agrees on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from .. import _moved
from ..errors import InvalidRequest
from ..safe_json import MAX_DEPTH, UnsafeJson, check_depth

__all__ = ["FINGERPRINT_PREFIX", "canonical_json", "request_fingerprint"]

FINGERPRINT_PREFIX: Final = "sha256:"


def canonical_json(value: Any, *, max_depth: int = MAX_DEPTH) -> bytes:
    """``value`` as canonical JSON bytes (sorted keys, compact, UTF-8); `UnsafeJson` if it has none.

    Also used for provider results (`results`), whose size and sha256 are those of these bytes.
    """
    try:
        check_depth(value, max_depth)
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8")
    except UnsafeJson:
        raise
    except (TypeError, ValueError, RecursionError) as exc:  # NaN, mixed keys, a set, a cycle, a lone surrogate
        raise UnsafeJson(f"{type(exc).__name__}: {exc}") from None


def request_fingerprint(request: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the request's canonical JSON; equal requests give equal fingerprints."""
    if not isinstance(request, Mapping):
        raise InvalidRequest(f"request must be a JSON object, not {type(request).__name__}")
    try:
        data = canonical_json(dict(request))  # first: it bounds the depth and refuses cycles
    except UnsafeJson as exc:
        raise InvalidRequest(f"request has no canonical JSON form: {exc}") from None
    _string_keys(request)
    return FINGERPRINT_PREFIX + hashlib.sha256(data).hexdigest()


def _string_keys(value: Any) -> None:
    """`json` silently turns ``1`` into ``"1"`` (and sorting mixed keys fails): refuse non-string keys."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InvalidRequest(f"request has a key that is not a string: {key!r}")
                stack.append(child)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def __getattr__(name: str) -> object:
    return _moved.moved_name(__name__, name)  # names kept one release for old imports: CHANGELOG.md
