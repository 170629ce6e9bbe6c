"""`Owner`: the Airflow task instance that allocated an episode, as recorded in the episode itself.

The allocation key is whatever a DAG's author writes, so it cannot say who owns an episode:
``AllocateEpisodeOperator`` passes its own task instance to `EpisodeStore.allocate` (``owner=``),
and the store writes it into the new record's ``metadata`` under `OWNER_KEY`, in the same commit
as the allocation (the file store's history entry, PostgreSQL's ``allocate_episode`` insert). A
record that carries one is validated strictly when read (`Owner.recorded`): a malformed owner is a
damaged record, never a guess. No Airflow import: this is the core.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from .errors import InvalidIdentifier

__all__ = ["OWNER_KEY", "Owner"]

#: The metadata key of the recorded owner: ``{"dag_id", "task_id", "run_id", "map_index"}``.
OWNER_KEY: Final = "allocated_by"
#: Airflow's own rule for dag and task ids (``airflow.sdk ... KEY_REGEX``), and their length limit.
AIRFLOW_ID: Final = re.compile(r"[\w.-]{1,250}")
#: Airflow's ``run_id`` column holds 250 characters.
_RUN_ID_LENGTH: Final = 250
_FIELDS: Final = ("dag_id", "task_id", "run_id", "map_index")


@dataclass(frozen=True)
class Owner:
    """A task instance: recorded ones name all four; one read from a bounded key lacks run and map index."""

    dag_id: str
    task_id: str
    run_id: str | None
    #: None for a task that is not mapped (Airflow's ``-1``).
    map_index: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"dag_id": self.dag_id, "task_id": self.task_id, "run_id": self.run_id, "map_index": self.map_index}

    @classmethod
    def of_task(cls, dag_id: str, task_id: str, run_id: str, map_index: int | None) -> Owner:
        """The owner a running task instance records (Airflow's ``map_index`` -1 means unmapped).

        One that no reader would accept back is `InvalidIdentifier` (no retry can fix it).
        """
        mapped = None if map_index is None or map_index < 0 else map_index
        data = {"dag_id": dag_id, "task_id": task_id, "run_id": run_id, "map_index": mapped}
        try:
            return cls.recorded(data)
        except ValueError as exc:
            raise InvalidIdentifier("owner", data, str(exc)) from None

    @classmethod
    def recorded(cls, data: object) -> Owner:
        """A recorded owner, checked field by field; anything else is `ValueError` naming what is wrong."""
        if not isinstance(data, dict) or set(data) != set(_FIELDS):
            raise ValueError(f"{OWNER_KEY} must be an object with exactly {', '.join(_FIELDS)}: {data!r:.200}")
        for name in ("dag_id", "task_id"):
            if not isinstance(data[name], str) or not AIRFLOW_ID.fullmatch(data[name]):
                raise ValueError(f"{OWNER_KEY}.{name} is not an Airflow id: {data[name]!r:.80}")
        run_id = data["run_id"]
        if not isinstance(run_id, str) or not 0 < len(run_id) <= _RUN_ID_LENGTH or not run_id.isprintable():
            raise ValueError(f"{OWNER_KEY}.run_id must be 1 to {_RUN_ID_LENGTH} printable characters: {run_id!r:.80}")
        index = data["map_index"]
        if index is not None and (type(index) is not int or not 0 <= index < 2**31):
            raise ValueError(f"{OWNER_KEY}.map_index must be null or a whole number >= 0: {index!r:.40}")
        return cls(data["dag_id"], data["task_id"], run_id, index)
