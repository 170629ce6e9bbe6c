"""Values every record kind shares: timestamps, and the stand-in for a result too large to keep."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["OmittedResult", "is_count", "utc_now"]


def utc_now() -> str:
    """An ISO-8601 UTC timestamp with microseconds, the form every record uses."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class OmittedResult:
    """A provider result too large (or not storable as strict JSON) to keep: what identifies it instead.

    ``size`` and ``sha256`` are those of the result's canonical JSON (sorted keys, compact, UTF-8;
    see `paid.results`); None when it has no JSON form at all.
    """

    reason: str
    size: int | None
    sha256: str | None
    #: The bound in force when it was left out, in bytes.
    limit: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> OmittedResult:
        """The inverse of `to_dict`; anything else is `ValueError`."""
        if not isinstance(data, Mapping) or set(data) != {"reason", "size", "sha256", "limit"}:
            raise ValueError(f"result_omitted must be an object with reason, size, sha256, limit: {data!r:.200}")
        if not isinstance(data["reason"], str) or not (data["sha256"] is None or isinstance(data["sha256"], str)):
            raise ValueError("result_omitted: reason and sha256 must be text")
        for name in ("size", "limit"):
            value = data[name]
            if (value is not None or name == "limit") and not is_count(value):
                raise ValueError(f"result_omitted: {name} must be a whole number >= 0, not {value!r:.60}")
        return cls(reason=data["reason"], size=data["size"], sha256=data["sha256"], limit=data["limit"])


def is_count(value: object) -> bool:
    """An int (not a bool, not a float) >= 0."""
    return type(value) is int and value >= 0
