"""The OpenAI Batch API as a paid provider (`OpenAIBatchProvider`), and its Airflow hook (`OpenAIBatchHook`).

The hook is imported on first use only (a module ``__getattr__``), so that importing the provider
never imports Airflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._requests import TOKEN_KEY, prepare_request
from .provider import OpenAIBatchProvider

if TYPE_CHECKING:
    from .hook import OpenAIBatchHook

__all__ = ["TOKEN_KEY", "OpenAIBatchHook", "OpenAIBatchProvider", "prepare_request"]


def __getattr__(name: str) -> Any:
    if name == "OpenAIBatchHook":
        from .hook import OpenAIBatchHook

        return OpenAIBatchHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
