"""Operators for DAG authors; importing this module stays cheap (see benchmarks/import_cost.py).

Heavy imports (stores, the paid layer, httpx) happen inside the operators' methods, at run time.
"""

from __future__ import annotations

from .allocate import AllocateEpisodeOperator
from .check import CheckEpisodesOperator
from .paid_generation import PaidGenerationOperator

__all__ = [
    "AllocateEpisodeOperator",
    "CheckEpisodesOperator",
    "PaidGenerationOperator",
]
