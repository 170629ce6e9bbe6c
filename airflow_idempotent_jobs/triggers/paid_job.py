"""`PaidJobTrigger`: polls an accepted paid job in the triggerer until it is terminal.

It only reads (status calls); recording the outcome is the operator's ``execute_complete``,
through the ledger. A trigger may run more than once, so it must have no side effects.
Its event is a row in Airflow's database: the result in it is bounded (``max_result_bytes``, see
`paid.results`), error texts are redacted by the provider and bounded, and a cost JSON cannot hold
(NaN, infinity) travels as text for the ledger to record as an anomaly.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..paid.results import DEFAULT_RESULT_LIMIT

__all__ = ["PaidJobTrigger"]


def _event(payload: dict[str, Any]) -> TriggerEvent:
    return TriggerEvent(payload)  # type: ignore[no-untyped-call]  # Airflow's TriggerEvent is untyped


class PaidJobTrigger(BaseTrigger):
    """Yields one event: ``{"status": "terminal", state, cost, result, error, ...}`` or ``{"status": "error"}``."""

    def __init__(
        self,
        *,
        episode_id: str,
        remote_ref: str,
        provider_conn_id: str,
        poll_initial_delay: float = 1.0,
        poll_max_delay: float = 30.0,
        max_result_bytes: int = DEFAULT_RESULT_LIMIT,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's BaseTrigger is untyped
        from ..identity import EpisodeId

        self.episode_id = str(EpisodeId.parse(episode_id))
        if not isinstance(remote_ref, str) or not remote_ref:
            raise ValueError("remote_ref must be a non-empty string")
        if not provider_conn_id:
            raise ValueError("provider_conn_id must be given")
        if poll_initial_delay < 0 or poll_max_delay < 0:
            raise ValueError("poll delays must not be negative")
        if type(max_result_bytes) is not int or max_result_bytes < 0:
            raise ValueError("max_result_bytes must be a whole number >= 0")
        self.max_result_bytes = max_result_bytes
        self.remote_ref = remote_ref
        self.provider_conn_id = provider_conn_id
        self.poll_initial_delay = float(poll_initial_delay)
        self.poll_max_delay = float(poll_max_delay)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "episode_id": self.episode_id,
            "remote_ref": self.remote_ref,
            "provider_conn_id": self.provider_conn_id,
            "poll_initial_delay": self.poll_initial_delay,
            "poll_max_delay": self.poll_max_delay,
        }
        # Written only when not the default: the kwargs of a trigger serialized before this option
        # existed are then exactly those of one made now.
        if self.max_result_bytes != DEFAULT_RESULT_LIMIT:
            kwargs["max_result_bytes"] = self.max_result_bytes
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from ..hooks.http_provider import HttpPaidProviderHook
        from ..paid.provider import ProviderOutcomeUnknown, ProviderUnavailable
        from ..paid.results import bound_result, clean_text, redactor

        base = {"episode_id": self.episode_id, "remote_ref": self.remote_ref}
        try:
            provider = await HttpPaidProviderHook(self.provider_conn_id).aget_provider()
        except Exception as exc:
            yield _event({**base, "status": "error", "message": clean_text(f"cannot build the provider: {exc}")})
            return
        redact = redactor(provider)
        delay = self.poll_initial_delay
        while True:
            try:
                status = await provider.astatus(self.remote_ref)
            except (ProviderUnavailable, ProviderOutcomeUnknown) as exc:
                # A status call is read-only: a lost answer is simply asked again.
                reason = clean_text(str(exc), redact)
                self.log.warning("Episode %s: status of %s not known yet: %s", self.episode_id, self.remote_ref, reason)
            except Exception as exc:
                message = clean_text(f"{type(exc).__name__}: {exc}", redact)
                yield _event({**base, "status": "error", "message": message})
                return
            else:
                if status.state.terminal:
                    bounded = bound_result(status.result, self.max_result_bytes)
                    payload = {
                        **base,
                        "status": "terminal",
                        "state": status.state.value,
                        "cost": _event_cost(status.cost),
                        "result": bounded.value,
                        "error": None if status.error is None else clean_text(status.error, redact),
                    }
                    if bounded.omitted is not None:
                        payload["result_omitted"] = bounded.omitted.to_dict()
                    yield _event(payload)
                    return
                self.log.info("Episode %s: remote job %s is %s", self.episode_id, self.remote_ref, status.state.value)
            await asyncio.sleep(delay)
            delay = min(delay * 2 if delay > 0 else 0.01, self.poll_max_delay)


def _event_cost(cost: float | None) -> float | str | None:
    """The cost as JSON can hold it: NaN and infinities as text (``float()`` reads them back)."""
    if cost is None or (isinstance(cost, (int, float)) and math.isfinite(cost)):
        return cost
    return repr(cost)
