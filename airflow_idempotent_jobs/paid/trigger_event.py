"""The trigger's event: encoded by `PaidJobTrigger`, decoded by the paid operator's ``execute_complete``.

An event is a row in Airflow's database and may be read by a later release of the operator, so its
payload is strict JSON of a fixed shape: a ``terminal`` event carries a bounded `RemoteStatus`, an
``error`` event says polling failed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..episode import OmittedResult
from ..errors import ProviderError
from .provider import RemoteState, RemoteStatus
from .results import bound_result, clean_text

__all__ = ["ERROR_EVENT", "TERMINAL_EVENT", "decode_event", "encode_error_event", "encode_status_event"]

#: ``status`` of an event carrying a terminal `RemoteStatus`.
TERMINAL_EVENT: Final = "terminal"
#: ``status`` of an event saying polling failed.
ERROR_EVENT: Final = "error"


def encode_status_event(
    episode_id: str, remote_ref: str, status: RemoteStatus, *, result_limit: int, redact: Callable[[str], str]
) -> dict[str, Any]:
    """A terminal status as the event's strict-JSON payload (a row in Airflow's database).

    The result is bounded (`results.bound_result`: over ``result_limit``, only its size and
    sha256 travel), the error text redacted and bounded, and a cost JSON cannot hold (NaN, an
    infinity) travels as text, for the ledger to record as an anomaly.
    """
    bounded = bound_result(status.result, result_limit)
    payload: dict[str, Any] = {
        "episode_id": episode_id,
        "remote_ref": remote_ref,
        "status": TERMINAL_EVENT,
        "state": status.state.value,
        "cost": _event_cost(status.cost),
        "result": bounded.value,
        "error": None if status.error is None else clean_text(status.error, redact),
    }
    if bounded.omitted is not None:
        payload["result_omitted"] = bounded.omitted.to_dict()
    return payload


def encode_error_event(episode_id: str, remote_ref: str, message: str) -> dict[str, Any]:
    """An event saying the trigger could not poll; ``message`` must be redacted already."""
    return {"episode_id": episode_id, "remote_ref": remote_ref, "status": ERROR_EVENT, "message": clean_text(message)}


def decode_event(event: object, episode_id: str, *, redact: Callable[[str], str]) -> RemoteStatus:
    """The `RemoteStatus` a terminal event for ``episode_id`` carries.

    An error event raises `ProviderError` (retryable: polling again may work), its message
    through ``redact``. Anything else (not an event of ours, another episode's, a malformed one)
    raises ValueError, whose text is safe to show.
    """
    if not isinstance(event, Mapping) or event.get("status") not in (TERMINAL_EVENT, ERROR_EVENT):
        raise ValueError(f"unexpected trigger event: {clean_text(repr(event))}")
    if event.get("episode_id") != episode_id:
        raise ValueError(f"trigger event for episode {event.get('episode_id')!r:.80}, expected {episode_id}")
    if event["status"] == ERROR_EVENT:
        message = clean_text(str(event.get("message")), redact)
        raise ProviderError(f"episode {episode_id}: polling in the triggerer failed: {message}")
    try:
        omitted = event.get("result_omitted")
        cost = event.get("cost")
        if isinstance(cost, bool) or not (cost is None or isinstance(cost, (int, float, str))):
            raise TypeError(f"cost {cost!r:.80}")
        return RemoteStatus(
            state=RemoteState(event["state"]),
            cost=None if cost is None else float(cost),
            result=event.get("result") if omitted is None else OmittedResult.from_dict(omitted),
            error=None if event.get("error") is None else clean_text(str(event["error"]), redact),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed trigger event for episode {episode_id}: {clean_text(repr(event))}") from exc


def _event_cost(cost: float | None) -> float | str | None:
    """The cost as JSON can hold it: NaN and infinities as text (``float()`` reads them back)."""
    if cost is None or (isinstance(cost, (int, float)) and math.isfinite(cost)):
        return cost
    return repr(cost)
