"""The paid request's one form: a JSON object (a dict), checked before anything is read or sent.

``request=`` is templated. Airflow renders a template to text unless the DAG sets
``render_template_as_native_obj=True``: ``"{{ params.req }}"`` becomes ``"{'prompt': ...}"``, the
dict's Python text, which is not JSON. Text is therefore never parsed (a guess could pay for a
request nobody wrote); nor is ``None`` an empty request (an omitted ``request=`` is refused, never sent as
``{}``), nor a list of pairs (which ``dict()`` would take). What a retry cannot fix fails without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._common import AirflowFailException, task_errors

__all__ = ["checked_request"]


def checked_request(task_id: str, value: Any, *, function: str | None = None) -> dict[str, Any]:
    """``value`` as the request to send; `AirflowFailException` (no retry) unless it is a JSON object.

    ``function``: the ``@task.paid_generation`` function whose return value it is; None for the
    operator's ``request=``. A dict with NaN or a key that is not text fails the same way
    (`request_fingerprint`'s `InvalidRequest`).
    """
    if isinstance(value, Mapping):
        from ..paid.fingerprint import request_fingerprint

        with task_errors():
            request_fingerprint(value)
        return dict(value)
    if function is not None:  # the wording @task.paid_generation has always had, with the same hints
        hints = {type(None): "; return {} for an empty request", str: "; text is never parsed as JSON"}
        raise AirflowFailException(
            f"{task_id}: {function}() must return the request as a JSON object (a dict), not "
            f"{type(value).__name__}{hints.get(type(value), '')}; nothing was sent"
        )
    if value is None:
        hint = "pass a dict (request={} for an empty request)"
    elif isinstance(value, str):
        hint = (
            "pass a dict; text is never parsed as JSON (a template renders text unless the DAG sets"
            " render_template_as_native_obj=True, which renders '{{ params.req }}' as the dict itself)"
        )
    else:
        hint = "pass a dict"
    raise AirflowFailException(
        f"{task_id}: request is {_kind(value)}, not a JSON object (a dict): {hint}; nothing was read or sent"
    )


def _kind(value: Any) -> str:
    """``None``, ``a str (12 characters)``, ``an int``: what the value is, never the value (it may be secret)."""
    if value is None:
        return "None"
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return f"{article} {name}{size}"
