"""The operators' default allocation key: its format, and the owner read back from it.

Writing (`default_allocation_key`, used by ``AllocateEpisodeOperator``) and reading (`owner_of`)
live here together, so the two cannot drift apart. `episode_owner` is the page's answer: the owner
recorded at allocation (source ``recorded``), else the one the key names (source ``key``: shown
marked, it proves nothing and grants nothing, `plugins.page_auth.Access`).

The operators' default key is ``airflow:{dag_id}:{task_id}:{run_id}``, plus ``:{map_index}`` for a
mapped task (`default_allocation_key`); over 512 characters it is bounded to
``airflow#{prefix}#{sha256}``. Airflow forbids ``:`` in dag and task ids (``[\\w.-]+``), so the first
two fields are certain. The run id may hold ``:`` (``manual__2026-08-03T10:00:00+00:00``), so a final
``:N`` is ambiguous. The rule used here:

* a final ``:N`` (N a decimal without leading zeros, as ``str(map_index)`` writes it) is the map
  index, unless the text ends like an ISO time (``T10:00``, ``T10:00:30``, ``T10:00:30.5``) or a UTC
  offset (``+05:30``): every run id Airflow generates from a date ends that way, so its own
  ``:NN`` is never taken for a map index;
* so ``manual__...+00:00:3`` is run ``manual__...+00:00``, map index 3, and ``manual__...+05:30``
  is unmapped. A hand-made run id ending ``:7`` (``batch:7``) reads as run ``batch``, map index 7:
  the key itself cannot tell the two apart (an unmapped run ``batch:7`` and map index 7 of run
  ``batch`` write the same key).

A bounded ``airflow#`` key names its dag and task only (the run id may be cut), and only when its
readable prefix still holds both whole. Any other key (``migrated:2026-W32``, a caller's own) has
no owner. No Airflow import: this is the core.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Final, Literal

from .owner import AIRFLOW_ID as _AIRFLOW_ID
from .owner import Owner

if TYPE_CHECKING:
    from .episode import Episode

__all__ = [
    "BOUNDED_KEY_PREFIX",
    "Owner",
    "OwnerSource",
    "bounded_allocation_key",
    "default_allocation_key",
    "episode_owner",
    "owner_of",
]

#: Where an episode's owner came from: the allocation's own record, or its key.
OwnerSource = Literal["recorded", "key"]
#: A default key over 512 characters becomes ``airflow#<readable prefix>#<sha256 of the whole>``.
#: Every other default key starts ``airflow:``, so a bounded key never equals an unbounded one.
BOUNDED_KEY_PREFIX: Final = "airflow#"
_PLAIN_PREFIX: Final = "airflow:"
_MAP_INDEX: Final = re.compile(r"(?P<run>.+):(?P<index>0|[1-9][0-9]{0,9})")
#: What an ISO timestamp's tail looks like: a clock time or a UTC offset, each ending ``:NN``.
_TIME_TAIL: Final = re.compile(r"(?:T\d\d:\d\d(?::\d\d(?:\.\d+)?)?|[+-]\d\d:\d\d)\Z")
_BOUNDED: Final = re.compile(r"airflow#(?P<prefix>.*)#[0-9a-f]{64}", re.DOTALL)


def default_allocation_key(dag_id: str, task_id: str, run_id: str, map_index: int | None) -> str:
    """``airflow:{dag_id}:{task_id}:{run_id}``, plus ``:{map_index}`` for a mapped task instance.

    Airflow allows 250 characters for each id, so the key can pass the store's 512: it is then
    bounded (`bounded_allocation_key`), the same way on every try. Keys up to 512 characters are
    exactly what they always were, so existing episodes are found again.
    """
    key = f"{_PLAIN_PREFIX}{dag_id}:{task_id}:{run_id}"
    if map_index is not None and map_index >= 0:
        key += f":{map_index}"
    return bounded_allocation_key(key)


def bounded_allocation_key(key: str) -> str:
    """``key`` itself up to 512 characters; else ``airflow#`` + its first characters + ``#`` + the
    sha256 of all of it: 512 characters, readable, stable, and distinct for distinct keys.

    The part cut off is checked like the rest (printable characters only): bounding must not let
    through what the store refuses in a shorter key.
    """
    from .identity import MAX_KEY_LENGTH, validate_allocation_key

    if len(key) <= MAX_KEY_LENGTH:
        return key
    for start in range(0, len(key), MAX_KEY_LENGTH):  # the store's rule is per character
        validate_allocation_key(key[start : start + MAX_KEY_LENGTH])
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    rest = key.removeprefix(_PLAIN_PREFIX)
    keep = MAX_KEY_LENGTH - len(BOUNDED_KEY_PREFIX) - 1 - len(digest)
    return f"{BOUNDED_KEY_PREFIX}{rest[:keep]}#{digest}"


def episode_owner(episode: Episode) -> tuple[Owner | None, OwnerSource | None]:
    """The recorded owner, else the key's (marked ``key``), else ``(None, None)``."""
    recorded = episode.allocated_by
    if recorded is not None:
        return recorded, "recorded"
    keyed = owner_of(episode.allocation_key)
    return (keyed, "key") if keyed is not None else (None, None)


def owner_of(allocation_key: str) -> Owner | None:
    """The owner the key names, or None when it names none (see the module's rule)."""
    if allocation_key.startswith(_PLAIN_PREFIX):
        return _plain(allocation_key[len(_PLAIN_PREFIX) :])
    match = _BOUNDED.fullmatch(allocation_key)
    if match is None:
        return None
    parts = match.group("prefix").split(":", 2)
    if len(parts) < 3:  # the prefix was cut before the task id ended: the task is not known
        return None
    dag_id, task_id, _run = parts
    if not (_AIRFLOW_ID.fullmatch(dag_id) and _AIRFLOW_ID.fullmatch(task_id)):
        return None
    return Owner(dag_id, task_id, None, None)


def _plain(rest: str) -> Owner | None:
    parts = rest.split(":", 2)
    if len(parts) != 3:
        return None
    dag_id, task_id, run = parts
    if not (_AIRFLOW_ID.fullmatch(dag_id) and _AIRFLOW_ID.fullmatch(task_id)) or not run:
        return None
    mapped = _MAP_INDEX.fullmatch(run)
    if mapped is not None and not _TIME_TAIL.search(run):
        return Owner(dag_id, task_id, mapped.group("run"), int(mapped.group("index")))
    return Owner(dag_id, task_id, run, None)
