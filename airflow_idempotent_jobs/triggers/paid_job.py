"""`PaidJobTrigger`: polls an accepted paid job in the triggerer until it is terminal.

It only reads (status calls); recording the outcome is the operator's ``execute_complete``,
through the ledger. A trigger may run more than once, so it must have no side effects.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

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
        self.remote_ref = remote_ref
        self.provider_conn_id = provider_conn_id
        self.poll_initial_delay = float(poll_initial_delay)
        self.poll_max_delay = float(poll_max_delay)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "episode_id": self.episode_id,
                "remote_ref": self.remote_ref,
                "provider_conn_id": self.provider_conn_id,
                "poll_initial_delay": self.poll_initial_delay,
                "poll_max_delay": self.poll_max_delay,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from ..hooks.http_provider import HttpPaidProviderHook
        from ..paid.provider import ProviderOutcomeUnknown, ProviderUnavailable

        base = {"episode_id": self.episode_id, "remote_ref": self.remote_ref}
        try:
            provider = await HttpPaidProviderHook(self.provider_conn_id).aget_provider()
        except Exception as exc:
            yield _event({**base, "status": "error", "message": f"cannot build the provider: {exc}"})
            return
        delay = self.poll_initial_delay
        while True:
            try:
                status = await provider.astatus(self.remote_ref)
            except (ProviderUnavailable, ProviderOutcomeUnknown) as exc:
                # A status call is read-only: a lost answer is simply asked again.
                self.log.warning("Episode %s: status of %s not known yet: %s", self.episode_id, self.remote_ref, exc)
            except Exception as exc:
                yield _event({**base, "status": "error", "message": f"{type(exc).__name__}: {exc}"})
                return
            else:
                if status.state.terminal:
                    yield _event(
                        {
                            **base,
                            "status": "terminal",
                            "state": status.state.value,
                            "cost": status.cost,
                            "result": status.result,
                            "error": status.error,
                        }
                    )
                    return
                self.log.info("Episode %s: remote job %s is %s", self.episode_id, self.remote_ref, status.state.value)
            await asyncio.sleep(delay)
            delay = min(delay * 2 if delay > 0 else 0.01, self.poll_max_delay)
