"""What an LLM batch costs: the price table a DAG author gives, the worst case before, the real cost after.

Prices are per million tokens, at the vendor's batch rates, in whatever currency the weekly budget
uses. Before submitting, the budget is checked against the batch's worst case (`worst_case`):
every request's ``max_tokens`` at the output price, plus its input bounded by the UTF-8 size of
what is sent (a token of text is at least one byte of it, and the JSON around the messages is
longer than the tokens a chat template adds). When the batch has ended, the cost is the usage the
vendor's output reports, request by request, at the same prices (`PriceTable.cost`). A model
missing from the table fails before anything is sent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import InvalidConfiguration

__all__ = ["ModelPrice", "PriceTable", "RequestBound", "Usage"]

_WHAT: Final = "LLM batch price table"
_PER: Final = 1_000_000.0


def _price(model: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InvalidConfiguration(_WHAT, f"{model}.{name}", f"{value!r:.40} is not a finite price >= 0")
    if value == 0 and math.copysign(1.0, value) < 0:
        raise InvalidConfiguration(_WHAT, f"{model}.{name}", "-0 is not a price")
    return float(value)


@dataclass(frozen=True)
class ModelPrice:
    """One model's batch prices per million tokens; a cache price left out is the input price."""

    #: Input tokens read without a cache hit.
    input: float
    #: Output tokens (reasoning tokens included: vendors bill them as output).
    output: float
    #: Input tokens read from the prompt cache.
    cached_input: float | None = None
    #: Input tokens written to the prompt cache (Anthropic bills them apart).
    cache_write: float | None = None

    @classmethod
    def parse(cls, model: str, raw: object) -> ModelPrice:
        if not isinstance(raw, Mapping):
            raise InvalidConfiguration(_WHAT, model, "must map input/output (and optionally cached_input, cache_write)")
        unknown = sorted(set(raw) - {"input", "output", "cached_input", "cache_write"})
        if unknown:
            raise InvalidConfiguration(_WHAT, model, f"unknown price {unknown[0]!r:.40}")
        for needed in ("input", "output"):
            if needed not in raw:
                raise InvalidConfiguration(_WHAT, model, f"needs an {needed} price")
        optional = {k: _price(model, k, raw[k]) for k in ("cached_input", "cache_write") if raw.get(k) is not None}
        return cls(
            input=_price(model, "input", raw["input"]), output=_price(model, "output", raw["output"]), **optional
        )


@dataclass
class Usage:
    """Tokens a batch's output reports, summed per model."""

    #: Input tokens billed at the input price.
    input_tokens: int = 0
    #: Input tokens billed at the cached-input price.
    cached_input_tokens: int = 0
    #: Input tokens billed at the cache-write price.
    cache_write_tokens: int = 0
    #: Output tokens.
    output_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.output_tokens += other.output_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "output_tokens": self.output_tokens,
        }


@dataclass(frozen=True)
class RequestBound:
    """What one request of a batch can cost at most: its model, its bytes sent, its ``max_tokens``."""

    model: str
    input_bytes: int
    max_tokens: int


@dataclass(frozen=True)
class PriceTable:
    """Batch prices per model: ``{"gpt-5-mini": {"input": 0.125, "output": 1.0, "cached_input": 0.0125}}``."""

    models: Mapping[str, ModelPrice] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: object) -> PriceTable:
        """The table from JSON-like data (a DAG's argument, a connection extra); else `InvalidConfiguration`."""
        if isinstance(raw, PriceTable):
            return raw
        if not isinstance(raw, Mapping) or not raw:
            raise InvalidConfiguration(_WHAT, "prices", "must map each model to its prices per million tokens")
        models: dict[str, ModelPrice] = {}
        for model, prices in raw.items():
            if not isinstance(model, str) or not model.strip():
                raise InvalidConfiguration(_WHAT, "prices", f"{model!r:.40} is not a model name")
            models[model] = ModelPrice.parse(model, prices)
        return cls(models)

    def price(self, model: str) -> ModelPrice:
        found = self.models.get(model)
        if found is None:
            raise InvalidConfiguration(
                _WHAT, "prices", f"model {model!r:.80} is not in the price table: add its batch prices before sending"
            )
        return found

    def require(self, models: Iterable[str]) -> None:
        """`InvalidConfiguration` for the first model without prices: before anything is sent."""
        for model in models:
            self.price(model)

    def worst_case(self, requests: Iterable[RequestBound]) -> float:
        """The most a batch of ``requests`` can cost (see the module docstring)."""
        total = 0.0
        for one in requests:
            price = self.price(one.model)
            top_input = max(price.input, price.cached_input or 0.0, price.cache_write or 0.0)
            total += (one.input_bytes * top_input + one.max_tokens * price.output) / _PER
        return total

    def cost(self, usage: Mapping[str, Usage]) -> float:
        """The cost of ``usage`` (per model); a model without prices raises, never costs nothing."""
        total = 0.0
        for model, used in usage.items():
            price = self.price(model)
            cached = price.input if price.cached_input is None else price.cached_input
            write = price.input if price.cache_write is None else price.cache_write
            total += (
                used.input_tokens * price.input
                + used.cached_input_tokens * cached
                + used.cache_write_tokens * write
                + used.output_tokens * price.output
            ) / _PER
        return total

    def to_dict(self) -> dict[str, Any]:
        return {model: {k: v for k, v in vars(p).items() if v is not None} for model, p in sorted(self.models.items())}
