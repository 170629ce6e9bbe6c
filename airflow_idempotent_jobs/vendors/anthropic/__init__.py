"""Anthropic's Message Batches as a paid provider: `AnthropicBatchProvider` (no Airflow) and `AnthropicBatchHook`.

The hook is loaded on first use (module ``__getattr__``), so importing the provider never imports
Airflow. How a retry proves which batch is its own, and what that costs: `lookup`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .provider import AnthropicBatchProvider

if TYPE_CHECKING:
    from .hook import AnthropicBatchHook

__all__ = ["AnthropicBatchHook", "AnthropicBatchProvider"]


def __getattr__(name: str) -> Any:
    if name == "AnthropicBatchHook":
        from .hook import AnthropicBatchHook

        return AnthropicBatchHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
