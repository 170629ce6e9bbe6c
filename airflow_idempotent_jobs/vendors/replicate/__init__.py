"""Replicate predictions as a paid provider: `ReplicatePredictionProvider` (no Airflow) and `ReplicateHook`.

Both are loaded on first use (module ``__getattr__``): importing this package needs neither the
``replicate`` SDK nor Airflow (provider info reads the connection form from `_form`), and importing
the provider never imports Airflow. What a retry can prove after a lost answer: `lookup`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .hook import ReplicateHook
    from .provider import ReplicatePredictionProvider

__all__ = ["ReplicateHook", "ReplicatePredictionProvider"]


def __getattr__(name: str) -> Any:
    if name == "ReplicatePredictionProvider":
        from .provider import ReplicatePredictionProvider

        return ReplicatePredictionProvider
    if name == "ReplicateHook":
        from .hook import ReplicateHook

        return ReplicateHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
