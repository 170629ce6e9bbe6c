"""`PaidJobTrigger`: polls an accepted paid job in the triggerer until it is terminal.

It only reads (status calls); recording the outcome is the operator's ``execute_complete``,
through the ledger. A trigger may run more than once, so it must have no side effects.
The provider is re-created here from serialisable data: the hook's class path and the
connection id (`hooks.paid_provider`), built with the hook's ``aget_provider``. A provider with
an ``astatus`` coroutine is polled on the event loop; any other has its ``status`` run in a
worker thread, so no provider blocks the loop.
Its event (`paid.trigger_event.encode_status_event`) is a row in Airflow's database: the result in it is
bounded (``max_result_bytes``), error texts are redacted by the provider and bounded, and a cost
JSON cannot hold (NaN, infinity) travels as text for the ledger to record as an anomaly.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..paid.results import DEFAULT_RESULT_LIMIT

if TYPE_CHECKING:
    from ..hooks.paid_provider import PaidProviderHook
    from ..paid.provider import PaidProvider, RemoteStatus

__all__ = ["PaidJobTrigger"]

#: Why a hook the task imported may not import here: Airflow's triggerer puts its plugins folder on
#: its path, not the DAGs folder (``dag.test()`` runs the trigger in the task's process, so it works there).
_TRIGGERER_PATH = (
    "the triggerer imports the hook: install it as a package or put it in the plugins folder "
    "(the DAGs folder is not on the triggerer's path)"
)
#: What ``provider_hook=None`` means: the hook every trigger serialized before custom hooks used.
DEFAULT_PROVIDER_HOOK = "airflow_idempotent_jobs.hooks.http_provider.HttpPaidProviderHook"


def _event(payload: dict[str, Any]) -> TriggerEvent:
    return TriggerEvent(payload)  # type: ignore[no-untyped-call]  # Airflow's TriggerEvent is untyped


class PaidJobTrigger(BaseTrigger):
    """Yields one event: ``{"status": "terminal", state, cost, result, error, ...}`` or ``{"status": "error"}``.

    ``provider_hook``: class path of the `PaidProviderHook` that builds the provider from
    ``provider_conn_id``; None is the HTTP provider's hook.
    """

    def __init__(
        self,
        *,
        episode_id: str,
        remote_ref: str,
        provider_conn_id: str,
        provider_hook: str | None = None,
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
        if provider_hook is not None and not (isinstance(provider_hook, str) and "." in provider_hook):
            raise ValueError("provider_hook must be a 'package.module.Class' path or None")
        if poll_initial_delay < 0 or poll_max_delay < 0:
            raise ValueError("poll delays must not be negative")
        if type(max_result_bytes) is not int or max_result_bytes < 0:
            raise ValueError("max_result_bytes must be a whole number >= 0")
        self.max_result_bytes = max_result_bytes
        self.remote_ref = remote_ref
        self.provider_conn_id = provider_conn_id
        self.provider_hook = provider_hook
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
        # Options written only when set: the kwargs of a trigger serialized before they existed
        # are then exactly those of one made now.
        if self.provider_hook is not None:
            kwargs["provider_hook"] = self.provider_hook
        if self.max_result_bytes != DEFAULT_RESULT_LIMIT:
            kwargs["max_result_bytes"] = self.max_result_bytes
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from ..errors import ProviderOutcomeUnknown, ProviderUnavailable
        from ..paid.backoff import doubling
        from ..paid.results import clean_text, redactor
        from ..paid.trigger_event import encode_error_event, encode_status_event

        try:
            provider = await self._provider()
        except Exception as exc:
            message = clean_text(f"cannot build the provider: {exc}")
            yield _event(encode_error_event(self.episode_id, self.remote_ref, message))
            return
        redact = redactor(provider)
        delays = doubling(self.poll_initial_delay, self.poll_max_delay)
        while True:
            try:
                status = await self._status(provider)
            except (ProviderUnavailable, ProviderOutcomeUnknown) as exc:
                # A status call is read-only: a lost answer is simply asked again.
                reason = clean_text(str(exc), redact)
                self.log.warning("Episode %s: status of %s not known yet: %s", self.episode_id, self.remote_ref, reason)
            except Exception as exc:
                message = clean_text(f"{type(exc).__name__}: {exc}", redact)
                yield _event(encode_error_event(self.episode_id, self.remote_ref, message))
                return
            else:
                if status.state.terminal:
                    yield _event(
                        encode_status_event(
                            self.episode_id, self.remote_ref, status, result_limit=self.max_result_bytes, redact=redact
                        )
                    )
                    return
                self.log.info("Episode %s: remote job %s is %s", self.episode_id, self.remote_ref, status.state.value)
            await asyncio.sleep(next(delays))

    async def _provider(self) -> PaidProvider:
        """The hook named by class path, re-created from the connection id, builds the provider."""
        from ..errors import InvalidConfiguration
        from ..hooks.paid_provider import construct_hook, provider_hook_class

        def hook() -> PaidProviderHook:
            try:
                cls = provider_hook_class(self.provider_hook or DEFAULT_PROVIDER_HOOK)
            except InvalidConfiguration as exc:
                if not exc.reason.startswith("cannot import"):
                    raise
                raise InvalidConfiguration(exc.what, exc.field, f"{exc.reason}; {_TRIGGERER_PATH}") from None
            return construct_hook(cls, self.provider_conn_id)

        # Importing the hook's module reads files, and a hook's constructor may read its Connection
        # (many do): both off the event loop, which every deferred task of the triggerer shares.
        return await (await asyncio.to_thread(hook)).aget_provider()

    async def _status(self, provider: PaidProvider) -> RemoteStatus:
        """``astatus`` on the loop when the provider has it; else ``status`` in a worker thread."""
        astatus = getattr(provider, "astatus", None)
        if astatus is not None and inspect.iscoroutinefunction(astatus):
            status: RemoteStatus = await astatus(self.remote_ref)
            return status
        return await asyncio.to_thread(provider.status, self.remote_ref)
