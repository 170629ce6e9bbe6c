"""What a finished batch cost: the usage its output and error files report, line by line, at the batch prices.

A line is ``{"custom_id", "response": {"status_code", "body": {"model", "usage"}}, "error"}``; its
usage is in the chat/embeddings shape (``prompt_tokens``, ``completion_tokens``,
``prompt_tokens_details.cached_tokens``) or the responses shape (``input_tokens``,
``output_tokens``, ``input_tokens_details.cached_tokens``). Cached tokens are part of the input
tokens and billed at the cached price. The output names a model's snapshot (``gpt-4o-mini-2024-07-18``)
where the request named its alias: a name missing from the price table is looked up again
without a trailing date. A line that cannot be read, or a model without a price, makes the cost
unknowable: NaN, which the ledger keeps as a cost anomaly (the budget counts the estimate).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from ..llm_batch import PriceTable, Usage

__all__ = ["Tally"]

_SNAPSHOT: Final = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@dataclass
class Tally:
    """Usage summed per priced model over a batch's files; what could not be read or priced, counted."""

    prices: PriceTable
    usage: dict[str, Usage] = field(default_factory=dict)
    lines: int = 0
    unreadable: int = 0
    unpriced: set[str] = field(default_factory=set)

    def add_lines(self, lines: Iterable[str]) -> None:
        for text in lines:
            if text.strip():
                self.add(text)

    def add(self, text: str) -> None:
        self.lines += 1
        try:
            line = json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            self.unreadable += 1
            return
        response = line.get("response") if isinstance(line, dict) else None
        if not isinstance(line, dict) or (response is not None and not isinstance(response, dict)):
            self.unreadable += 1
            return
        body = response.get("body") if response else None
        usage = body.get("usage") if isinstance(body, dict) else None
        if usage is None:
            return  # a refused or unexecuted request: nothing billed
        used = _usage(usage)
        model = body.get("model") if isinstance(body, dict) else None
        if used is None or not isinstance(model, str):
            self.unreadable += 1
            return
        priced = self._priced(model)
        if priced is None:
            self.unpriced.add(model[:200])
            return
        self.usage.setdefault(priced, Usage()).add(used)

    def _priced(self, model: str) -> str | None:
        for name in (model, _SNAPSHOT.sub("", model)):
            if name in self.prices.models:
                return name
        return None

    def cost(self) -> float:
        """The batch's cost; NaN when a line could not be read or its model has no price."""
        if self.unreadable or self.unpriced:
            return math.nan
        return self.prices.cost(self.usage)

    def to_dict(self) -> dict[str, Any]:
        summary: dict[str, Any] = {model: used.to_dict() for model, used in sorted(self.usage.items())}
        return summary

    def problems(self) -> str | None:
        said = []
        if self.unreadable:
            said.append(f"{self.unreadable} of {self.lines} result lines unreadable")
        if self.unpriced:
            said.append(f"no price for {', '.join(sorted(self.unpriced))}")
        return "; ".join(said) or None


def _usage(raw: Any) -> Usage | None:
    """One line's usage in either shape, or None when it is not one."""
    if not isinstance(raw, dict):
        return None
    shape = ("input_tokens", "output_tokens", "input_tokens_details") if "input_tokens" in raw else None
    names = shape or ("prompt_tokens", "completion_tokens", "prompt_tokens_details")
    total, output = _count(raw.get(names[0])), _count(raw.get(names[1], 0))
    details = raw.get(names[2]) or {}
    cached = _count(details.get("cached_tokens", 0)) if isinstance(details, dict) else None
    if total is None or output is None or cached is None or cached > total:
        return None
    return Usage(input_tokens=total - cached, cached_input_tokens=cached, output_tokens=output)
