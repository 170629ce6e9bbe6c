"""Operators for DAG authors; importing this module stays cheap (see benchmarks/import_cost.py).

Heavy imports (stores, the paid layer, httpx) happen inside the operators' methods, at run time.
`ApproveEpisodeOperator` loads (with Airflow's HITL operators) only when a DAG file names it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .allocate import AllocateEpisodeOperator
from .check_episodes import CheckEpisodesOperator
from .effect import EpisodeEffectOperator
from .paid_generation import PaidGenerationOperator

if TYPE_CHECKING:
    from .approve import ApproveEpisodeOperator

__all__ = [
    "AllocateEpisodeOperator",
    "ApproveEpisodeOperator",
    "CheckEpisodesOperator",
    "EpisodeEffectOperator",
    "PaidGenerationOperator",
]


def __getattr__(name: str) -> Any:
    if name == "ApproveEpisodeOperator":
        from .approve import ApproveEpisodeOperator

        return ApproveEpisodeOperator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
