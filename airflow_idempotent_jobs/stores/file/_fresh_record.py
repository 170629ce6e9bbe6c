"""The bytes of a fresh episode record without walking it: `durable.dump_json` of ``to_record()``, faster.

An allocation writes one record of one of two shapes (with or without the owner Airflow's operator
records): only six values differ, ten with an owner. Rendering
them into a template made once by `dump_json` itself (the same encoder, so the same escapes and
indentation) costs a few microseconds where the walk of ``to_record`` and the pure-Python indenting
encoder cost tens. Anything but a fresh record takes the walk.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from ...episode import Episode, EpisodeStatus
from ...owner import OWNER_KEY
from ..durable import dump_json
from ._week_history import is_fresh

__all__ = ["record_bytes"]

#: A number no record holds, standing for a number in the template (the sequence, the map index).
_NUMBER = 987654321987
#: ``json.dumps(value, ensure_ascii=False)`` for the text, null and numbers of the gaps, without
#: building an encoder per call.
_encode = json.JSONEncoder(ensure_ascii=False).encode
#: The owner's fields in the template, each a gap named ``owner_<field>``.
_OWNER_FIELDS = ("dag_id", "task_id", "run_id", "map_index")


@functools.lru_cache(maxsize=2)
def _template(owned: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The template's literal parts and, between them, which value goes in each gap."""
    owner: dict[str, Any] = {name: f"@@owner_{name}@@" for name in _OWNER_FIELDS}
    owner["map_index"] = _NUMBER + 1
    sample = Episode(
        episode_id="@@episode_id@@",
        week_id="@@week_id@@",
        sequence=_NUMBER,
        allocation_key="@@allocation_key@@",
        fingerprint="@@fingerprint@@",
        status=EpisodeStatus.ALLOCATED,
        created_at="@@created_at@@",
        updated_at="@@created_at@@",
        metadata={OWNER_KEY: owner} if owned else {},
    )
    text = dump_json(sample.to_record()).decode("utf-8")
    numbers = {str(_NUMBER): "sequence", str(_NUMBER + 1): "owner_map_index"}
    pieces = re.split(r'"@@(\w+)@@"|(' + "|".join(numbers) + ")", text)
    literals, gaps = [pieces[0]], []
    for at in range(1, len(pieces), 3):
        gaps.append(pieces[at] or numbers[pieces[at + 1]])
        literals.append(pieces[at + 2])
    return tuple(literals), tuple(gaps)


def record_bytes(episode: Episode) -> bytes:
    """``dump_json(episode.to_record())``, from the template when the record is fresh."""
    if not is_fresh(episode):
        return dump_json(episode.to_record())
    owner: dict[str, Any] = episode.metadata.get(OWNER_KEY) or {}
    literals, gaps = _template(bool(owner))
    out = [literals[0]]
    for gap, literal in zip(gaps, literals[1:], strict=True):
        if gap == "sequence":
            out.append(str(episode.sequence))
        else:
            out.append(_encode(owner[gap[6:]] if gap.startswith("owner_") else getattr(episode, gap)))
        out.append(literal)
    return "".join(out).encode("utf-8")
