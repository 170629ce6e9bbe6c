"""What a prediction costs: the hardware price per second the user configures, times ``metrics.predict_time``.

Replicate reports no price, only ``metrics.predict_time`` ("the amount of CPU or GPU time, in
seconds, that the prediction used while running") on a terminated prediction. So the table
maps each model (``owner/name``) or version id to ``{"per_second": X}`` (the hardware's price) and
optionally ``per_prediction`` (a flat part, for models billed per output) and ``max_seconds``.

``max_seconds`` is what makes a worst case honest: it is sent as the ``Cancel-After`` header, and
the API cancels the prediction that long after its creation, so ``predict_time`` cannot exceed it.
Without it a per-second model has no bound, and the provider offers no worst case
(`PriceTable.bounded`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ...errors import InvalidConfiguration
from ._requests import MODEL, VERSION_ID, Target

__all__ = ["Price", "PriceTable"]

_WHAT: Final = "replicate price table"
_KEYS: Final = frozenset({"per_second", "per_prediction", "max_seconds"})
#: The API's own bounds on ``Cancel-After``: at least 5 seconds; a day is far beyond any prediction.
MIN_SECONDS: Final = 5
MAX_SECONDS: Final = 86_400


def _amount(key: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InvalidConfiguration(_WHAT, f"{key}.{name}", f"{value!r:.40} is not a finite price >= 0")
    if value == 0 and math.copysign(1.0, value) < 0:
        raise InvalidConfiguration(_WHAT, f"{key}.{name}", "-0 is not a price")
    return float(value)


@dataclass(frozen=True)
class Price:
    """One model's (or version's) price: per second of ``predict_time``, per prediction, and its cap."""

    per_second: float = 0.0
    per_prediction: float = 0.0
    #: Sent as ``Cancel-After``: the API cancels the prediction then, so it bounds ``predict_time``.
    max_seconds: int | None = None

    @classmethod
    def parse(cls, key: str, raw: object) -> Price:
        if not isinstance(raw, Mapping) or not raw:
            raise InvalidConfiguration(_WHAT, key, "must map per_second (and optionally per_prediction, max_seconds)")
        unknown = sorted(str(name) for name in raw if name not in _KEYS)
        if unknown:
            raise InvalidConfiguration(_WHAT, key, f"unknown field {unknown[0]!r:.40}")
        if "per_second" not in raw and "per_prediction" not in raw:
            raise InvalidConfiguration(_WHAT, key, "needs per_second (the hardware's price) or per_prediction")
        cap = raw.get("max_seconds")
        whole = isinstance(cap, int) and not isinstance(cap, bool)
        if cap is not None and not (whole and MIN_SECONDS <= cap <= MAX_SECONDS):
            reason = f"must be whole seconds, {MIN_SECONDS} to {MAX_SECONDS}"
            raise InvalidConfiguration(_WHAT, f"{key}.max_seconds", reason)
        return cls(
            per_second=_amount(key, "per_second", raw.get("per_second", 0.0)),
            per_prediction=_amount(key, "per_prediction", raw.get("per_prediction", 0.0)),
            max_seconds=cap,
        )

    @property
    def bound(self) -> float | None:
        """The most one prediction can cost, or None when nothing caps its seconds."""
        if self.per_second == 0:
            return self.per_prediction
        if self.max_seconds is None:
            return None
        return self.per_prediction + self.per_second * self.max_seconds

    def cost(self, status: str, predict_time: float | None) -> float | None:
        """What a terminated prediction cost; None when the API did not say how long it ran.

        ``aborted`` (ended before it started running) costs nothing. An odd ``predict_time`` (NaN,
        infinite, negative) gives an odd cost, which the ledger records as an anomaly.
        """
        if status == "aborted":
            return 0.0
        if self.per_second == 0:
            return self.per_prediction
        if predict_time is None:
            return None
        return self.per_prediction + self.per_second * predict_time


@dataclass(frozen=True)
class PriceTable:
    """Prices per model or version id: ``{"acme/video": {"per_second": 0.0014, "max_seconds": 600}}``."""

    prices: Mapping[str, Price] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: object) -> PriceTable:
        """The table from JSON-like data (a DAG's argument, a connection extra); else `InvalidConfiguration`."""
        if isinstance(raw, PriceTable):
            return raw
        if not isinstance(raw, Mapping) or not raw:
            raise InvalidConfiguration(_WHAT, "prices", "must map each model (owner/name) or version id to its price")
        prices: dict[str, Price] = {}
        for key, price in raw.items():
            if not isinstance(key, str) or not (MODEL.fullmatch(key) or VERSION_ID.fullmatch(key)):
                raise InvalidConfiguration(_WHAT, "prices", f"{key!r:.80} is not owner/name or a 64-hex version id")
            prices[key] = Price.parse(key, price)
        return cls(prices)

    def for_target(self, target: Target) -> Price:
        """The price of what ``target`` runs (its version's, else its model's); `InvalidConfiguration` if none."""
        for key in (target.version, target.model):
            if key is not None and key in self.prices:
                return self.prices[key]
        raise InvalidConfiguration(
            _WHAT, "prices", f"{target.label!r:.90} has no price: add its hardware price per second before sending"
        )

    def for_prediction(self, model: str | None, version: str | None) -> Price | None:
        """The price of a prediction as the API reports it (version first, then model), or None."""
        for key in (version, model):
            if key is not None and key in self.prices:
                return self.prices[key]
        return None

    @property
    def bounded(self) -> bool:
        """Whether every price has a bound (`Price.bound`): only then is there an honest worst case."""
        return all(price.bound is not None for price in self.prices.values())

    def to_dict(self) -> dict[str, Any]:
        return {key: {k: v for k, v in vars(p).items() if v is not None} for key, p in sorted(self.prices.items())}
