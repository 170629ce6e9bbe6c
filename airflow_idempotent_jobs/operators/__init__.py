"""Operators for DAG authors; importing this module stays cheap (see benchmarks/import_cost.py).

Heavy imports (stores, the paid layer, httpx) happen inside the operators' methods, at run time.
"""

from __future__ import annotations

from .allocate import AllocateEpisodeOperator
from .paid_generation import PaidGenerationOperator

# operators/check.py (CheckEpisodesOperator) is added here by its own change.

__all__ = [
    "AllocateEpisodeOperator",
    "PaidGenerationOperator",
]
