"""``@task.paid_generation``: the function builds the request; `PaidGenerationOperator` pays for it.

The decorated operator is a `PaidGenerationOperator` whose ``_request()`` is the function's return
value (built once per try from its arguments and upstream XComs), so everything else is the
operator's: the same parameters, the ledger, deferral, the XComs ``remote_ref``/``state``/``cost``
and the summary it returns.

Order: the episode id is validated and the episode loaded (an unknown or malformed id fails without
retry, and so does an episode that ``require_approval=True`` finds unapproved) before the function
runs; the function runs before any connection or secret is read. The request it returns is then
bound to the episode's submission: a retry whose function builds another request than the one
recorded with the intent fails without retry, naming both fingerprints, and nothing is sent. After
a deferral the function runs again, in the resumed process, for the same check.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk.bases.decorator import DecoratedOperator, task_decorator_factory
from airflow.sdk.definitions.context import context_merge

from ..airflow_compat import determine_kwargs
from ..operators._common import AirflowFailException, task_errors
from ..operators.paid_generation import PaidGenerationOperator

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.bases.decorator import TaskDecorator

    from ..episode import Episode
    from ..stores import EpisodeStore

__all__ = ["paid_generation_task"]


class _PaidGenerationDecoratedOperator(DecoratedOperator, PaidGenerationOperator):
    """`PaidGenerationOperator` with the request returned by the user's function."""

    template_fields: Sequence[str] = (
        *DecoratedOperator.template_fields,
        *(f for f in PaidGenerationOperator.template_fields if f != "request"),
    )
    template_fields_renderers: ClassVar[dict[str, str]] = dict(DecoratedOperator.template_fields_renderers)
    custom_operator_name: str = "@task.paid_generation"

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if "request" in kwargs:
            name = getattr(python_callable, "__name__", "the function")
            raise TypeError(f"@task.paid_generation takes no request=: the request is what {name}() returns")
        super().__init__(python_callable=python_callable, op_args=op_args, op_kwargs=op_kwargs, **kwargs)
        self._context: Context | None = None
        self._built: dict[str, Any] | None = None

    def execute(self, context: Context) -> Any:
        self._context, self._built = context, None
        return super().execute(context)

    def execute_complete(self, context: Context, event: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self._context, self._built = context, None
        return super().execute_complete(context, event)

    def _load(self, store: EpisodeStore, eid: str) -> Episode:
        """Load the episode first (an unknown or unapproved one fails before the user's code runs), then
        bind the request."""
        with task_errors():
            self._ledger(store).preflight(eid, require_approval=self.require_approval is True)
        return super()._load(store, eid)  # runs the function through `_request`

    def _request(self) -> dict[str, Any]:
        """The function's request, built once per try (or per resume) from its arguments and XComs."""
        if self._built is None:
            if self._context is None:
                raise AirflowFailException(f"{self.task_id}: the request is built only while the task runs")
            context_merge(self._context, self.op_kwargs)
            kwargs = determine_kwargs(self.python_callable, self.op_args, self._context)
            from ..operators._request import checked_request
            from ..paid.fingerprint import request_fingerprint

            name = self.python_callable.__name__
            built = checked_request(self.task_id, self.python_callable(*self.op_args, **kwargs), function=name)
            self.log.info("Request built by %s(): %s", name, request_fingerprint(built))
            self._built = built
        return self._built

    def _validated_request(self) -> None:
        """No ``request=`` to check up front: the function's return value is checked when it returns."""


def paid_generation_task(python_callable: Callable[..., Any] | None = None, **kwargs: Any) -> TaskDecorator:
    """``@task.paid_generation(provider_conn_id=..., episode_id=..., ...)`` (see the module docstring).

    The task's XComs are the operator's: a function annotated ``-> dict`` would otherwise have its
    return value (the summary) unrolled into one XCom per key.
    """
    if kwargs.pop("multiple_outputs", False):
        raise TypeError("@task.paid_generation pushes the operator's XComs; multiple_outputs=True is not supported")
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=False,
        decorated_operator_class=_PaidGenerationDecoratedOperator,
        **kwargs,
    )
