"""A person's HITL answer as the episode keeps it: who, when and why, never lost to its shape.

By the time the task sees an answer, Airflow has accepted it: the HITL row says who chose what, and
the person has gone. Refusing the answer then (a name with a zero-width joiner, a 300-character
single-sign-on name, a 1 MB or non-text comment sent through the REST API, which checks none of
them) would fail the task with the row saying "approved" and the episode saying nothing. So the
decision is always kept, and the text around it is made fit for the record instead: characters
that are not printable are escaped (``\\u200c``), a name or comment over its bound keeps its start
and the sha256 of the whole, and a comment that is not text is kept as its JSON.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from ..approval import MAX_BY, MAX_COMMENT
from ..episode import Approval

__all__ = ["answer_comment", "answer_time", "answerer", "bounded"]

#: What the record names when Airflow's user has neither a name nor an id.
UNNAMED: Final = "(an Airflow user without a name or id)"


def answerer(user: Mapping[str, Any]) -> str:
    """The HITL response's user as the record names them: the name, else the id; escaped, bounded."""
    for key in ("name", "id"):
        value = user.get(key)
        text = value if isinstance(value, str) else ("" if value is None else str(value))
        if text.strip():
            return bounded(escaped(text), MAX_BY)
    return UNNAMED


def answer_comment(value: object) -> str | None:
    """The answer's comment for the record: None when empty; text escaped and bounded; else its JSON."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)
    return bounded(escaped(value, keep="\n\t"), MAX_COMMENT)


def answer_time(responded_at: object, approval: Approval) -> str | None:
    """When the person answered (Airflow's ``responded_at``), as the record writes times (UTC, microseconds).

    Never earlier than the history's last event (the question): the api-server's clock and the
    worker's may disagree, and the history must read in order. None (the recording time) when
    Airflow gave no time.
    """
    if not isinstance(responded_at, dt.datetime) or responded_at.tzinfo is None:
        return None
    at = responded_at.astimezone(dt.timezone.utc).isoformat(timespec="microseconds")
    last = max((str(entry.get("at") or "") for entry in approval.history), default="")
    return max(at, last)


def escaped(text: str, keep: str = "") -> str:
    """``text`` with each character that is not printable (and not in ``keep``) written as its escape."""
    return "".join(ch if ch.isprintable() or ch in keep else ascii(ch)[1:-1] for ch in text)


def bounded(text: str, limit: int) -> str:
    """``text`` if it fits ``limit`` characters; else its start, its length and its sha256 (prefix)."""
    if len(text) <= limit:
        return text
    tail = f"... ({len(text)} characters, sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]})"
    return text[: limit - len(tail)] + tail
