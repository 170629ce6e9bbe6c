"""`PaidGenerationOperator`: run the paid job of an existing episode, at most once.

Order matters (docs/design.md): validate the episode id, load the episode, check its state, and only
then read credentials and build the provider client. A bad id therefore fails the task without
retry before any connection, variable or secret is looked up.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ..links.episode import EpisodeLink
from ._common import AirflowFailException, StoreOperator, checked_episode_id, task_errors
from ._metrics import paid_try

if TYPE_CHECKING:
    from airflow.sdk import Context

    from ..episode import Episode
    from ..paid.ledger import SubmissionLedger
    from ..paid.provider import PaidProvider
    from ..stores import EpisodeStore

__all__ = ["PaidGenerationOperator"]


class PaidGenerationOperator(StoreOperator):
    """Submit the episode's paid job through the submission ledger and wait for its outcome.

    It never allocates: ``episode_id`` must name an existing episode (typically
    ``"{{ ti.xcom_pull('allocate') }}"``). A retry never submits twice: it resumes polling an
    accepted job, and refuses (no retry) when an earlier submission's outcome was lost, naming the
    ``idempotent-jobs reconcile`` command to run. The episode's one paid job is bound to its
    request: a try (a retry, another map index) whose rendered request differs from the one paid
    for fails without retry, naming both fingerprints. Pushes XComs ``remote_ref``, ``state``,
    ``cost`` (``cost_anomaly`` too when the provider reported a cost that is no cost) and returns a
    summary (episode id, remote ref, state, cost, result; ``result_omitted`` when the result was
    over ``max_result_bytes``).

    :param episode_id: templated id of an existing episode.
    :param provider_conn_id: the provider's Connection: of a type whose registered hook is a
        `PaidProviderHook` (``idempotent_jobs_http``: base URL, token, options), or any type
        (``http``, ``generic``, ...) with ``provider_hook``.
    :param provider_hook: ``"package.module.Class"`` of a `PaidProviderHook` subclass that builds
        the provider from ``provider_conn_id``; it wins over the connection's type. Resolved
        after the episode is loaded; a path that cannot work fails the task without retry. It is
        imported in the worker and, when deferred, in the triggerer, which has the plugins folder on
        ``sys.path`` but not the DAGs folder: keep the hook in an installed package or in
        ``$AIRFLOW_HOME/plugins``, not beside the DAG file.
    :param request: templated JSON object (a dict) sent to the provider; ``{}`` for an empty one.
        Anything else (``None`` or no request, text, a list, a number) fails the task on its first
        try, before anything is read: text is never parsed, so a template such as
        ``"{{ params.req }}"`` needs a DAG with ``render_template_as_native_obj=True``.
    :param deferrable: hand polling to the triggerer instead of holding a worker slot.
    :param poll_timeout: seconds to wait for a terminal state (per try; a retry resumes polling).
    :param poll_initial_delay: first delay between status calls; doubles up to ``poll_max_delay``.
    :param poll_max_delay: longest delay between two status calls, in seconds.
    :param weekly_budget: refuse a submission that would pass the week's spend (provider units).
    :param estimated_cost: this job's expected cost, counted against ``weekly_budget``. Both must
        be finite numbers >= 0: anything else fails the task before anything is read or sent.
        Not given, a provider offering ``worst_case(request)`` (the LLM batch providers) gives it;
        one offering ``validate(request)`` refuses a bad request before anything is sent.
    :param max_result_bytes: largest provider result kept in the record, the XCom and the trigger
        event (bytes of canonical JSON); a larger one is left out, its size and sha256 recorded.
    :param require_approval: refuse (no retry) unless the episode's recorded decision is approved
        (`ApproveEpisodeOperator`, or ``idempotent-jobs approve``); checked once the episode is
        loaded, before any connection or secret is read, and again under the lock when the
        submitting intent is written. A rejected episode is refused whatever this says. May be a
        template rendering to True or False (``"{{ params.require_approval }}"``), so a DAG whose gate
        is a param refuses an undecided episode whenever the gate is on, even when someone marked
        the approval task done by hand; any other rendering fails the task without retry.
    """

    template_fields: Sequence[str] = ("episode_id", "request", "store", "require_approval")
    template_fields_renderers: ClassVar[dict[str, str]] = {"request": "json"}
    ui_color = "#fdf1dc"
    #: "Episode" on the task instance opens this episode in the Idempotent Jobs page.
    operator_extra_links = (EpisodeLink(),)

    def __init__(
        self,
        *,
        episode_id: str | None,
        provider_conn_id: str,
        provider_hook: str | None = None,
        request: Mapping[str, Any] | None = None,
        store: str | None = None,
        store_conn_id: str | None = None,
        lock_timeout: float | None = None,
        deferrable: bool = False,
        poll_timeout: float = 3600.0,
        poll_initial_delay: float = 1.0,
        poll_max_delay: float = 30.0,
        weekly_budget: float | None = None,
        estimated_cost: float | None = None,
        max_result_bytes: int = 64 * 1024,  # paid.results.DEFAULT_RESULT_LIMIT (not imported: DAG files parse this)
        require_approval: bool | str = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.episode_id = episode_id
        self.provider_conn_id = provider_conn_id
        self.provider_hook = provider_hook
        #: The resolved hook's class path, for the trigger (set where the provider is built).
        self._provider_hook_path: str | None = None
        self.request = request
        self.store = store
        self.store_conn_id = store_conn_id
        self.lock_timeout = lock_timeout
        self.deferrable = deferrable
        self.poll_timeout = poll_timeout
        self.poll_initial_delay = poll_initial_delay
        self.poll_max_delay = poll_max_delay
        self.weekly_budget = weekly_budget
        self.estimated_cost = estimated_cost
        self.max_result_bytes = max_result_bytes
        if not isinstance(require_approval, bool) and not (
            isinstance(require_approval, str) and "{{" in require_approval
        ):
            raise TypeError(
                f"{self.task_id}: require_approval must be True or False (or a template rendering to one),"
                f" not {require_approval!r}"
            )
        self.require_approval: bool | str = require_approval

    # -- the steps, in the order docs/design.md requires -------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:
        self._validated_settings()
        eid = checked_episode_id(self.task_id, self.episode_id)
        store = self._open_store()
        try:
            with paid_try(context) as attempt:  # metrics: how this try ended (never fails the task)
                episode = attempt.loaded(self._load(store, eid))
                if episode.submission.state.terminal:
                    self.log.info(
                        "Episode %s: submission already %s; nothing sent", eid, episode.submission.state.value
                    )
                    return self._finish(context, episode)
                provider = self._provider()  # the first place a connection or secret is read
                estimate = self._checked_by_provider(episode, provider)
                episode = self._submit(store, eid, provider, estimate)
                if episode.submission.state.terminal:
                    return self._finish(context, attempt.seen(episode))
                if self.deferrable:
                    self._defer(episode)
                return self._finish(context, attempt.seen(self._poll(store, eid, provider)))
        finally:
            store.close()

    def execute_complete(self, context: Context, event: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Resume after the trigger: record its final status through the ledger.

        The order is `execute`'s: the episode is loaded (and the request checked against it: it
        may not change while deferred) before the event's text is redacted through the provider,
        which reads its Connection. An event that is not the trigger's fails without retry; an
        "error" event (the trigger could not poll, e.g. the provider refused the token) is retried.
        """
        from ..paid.trigger_event import decode_event

        self._validated_settings()
        eid = checked_episode_id(self.task_id, self.episode_id)
        store = self._open_store()
        try:
            with paid_try(context) as attempt:  # metrics: the deferred try's outcome, counted on resume
                attempt.loaded(self._load(store, eid))
                try:
                    status = decode_event(event, eid, redact=self._redacted)
                except ValueError as exc:
                    raise AirflowFailException(f"{self.task_id}: {exc}") from exc
                with task_errors():
                    episode = self._ledger(store).record_status(eid, status)
                self.log.info("Episode %s: the trigger reported %s", eid, status.state.value)
                return self._finish(context, attempt.seen(episode))
        finally:
            store.close()

    def _validated_settings(self) -> None:
        """A request, costs, budget and result bound that cannot work fail the task before anything is read or sent."""
        from ..errors import InvalidConfiguration
        from ..paid.budget import checked_amount

        rendered = {"True": True, "true": True, "False": False, "false": False}.get(str(self.require_approval).strip())
        if rendered is None:
            raise AirflowFailException(
                f"{self.task_id}: require_approval rendered {self.require_approval!r:.60}, not True or False;"
                " nothing was read or sent"
            )
        self.require_approval = rendered
        self._validated_request()
        with task_errors():
            checked_amount("estimated_cost", self.estimated_cost)
            checked_amount("weekly_budget", self.weekly_budget)
            if type(self.max_result_bytes) is not int or self.max_result_bytes < 0:
                raise InvalidConfiguration(self.task_id, "max_result_bytes", "must be a whole number >= 0")

    def _validated_request(self) -> None:
        """``request=`` that is not a dict fails here, before the store's or provider's connection is read."""
        self._request()

    def _request(self) -> dict[str, Any]:
        from ._request import checked_request

        return checked_request(self.task_id, self.request)

    def _redacted(self, text: str) -> str:
        """``text`` through the provider's ``redact`` (the trigger did it already: defence in depth)."""
        from ..paid.results import clean_text, redactor

        try:
            provider: object = self._provider()
        except Exception:  # no provider, no secret of its to remove
            provider = None
        return clean_text(text, redactor(provider))

    def _open_store(self) -> EpisodeStore:
        with task_errors():
            return self.hook.store

    def _load(self, store: EpisodeStore, eid: str) -> Episode:
        """The episode and its coherent submission record (`SubmissionLedger.preflight`)."""
        with task_errors():
            return self._ledger(store).preflight(eid, self._request(), require_approval=self.require_approval is True)

    def _provider(self) -> PaidProvider:
        """The provider the resolved hook builds (`resolve_provider_hook`): the first connection read."""
        from ..hooks.paid_provider import build_provider, hook_class_path, resolve_provider_hook

        with task_errors():  # a hook or config that cannot work (InvalidConfiguration) is final
            hook = resolve_provider_hook(self.provider_conn_id, self.provider_hook)
            self._provider_hook_path = hook_class_path(hook)
            return build_provider(hook)

    def _checked_by_provider(self, episode: Episode, provider: PaidProvider) -> float | None:
        """What the provider can check before anything is sent, when it may be sent on this try.

        A provider offering ``validate(request)`` refuses a bad request here (`InvalidRequest`,
        `InvalidConfiguration`: no retry) before the intent is written; one offering
        ``worst_case(request)`` gives the estimate the budget counts when ``estimated_cost`` is
        not given (a batch whose worst case passes ``weekly_budget`` is refused, nothing sent).
        An accepted submission only polls: its request is not checked again (its file may be gone).
        """
        from ..episode import SubmissionState
        from ..paid.budget import checked_amount

        estimate = self.estimated_cost
        state = episode.submission.state
        if state not in (SubmissionState.NONE, SubmissionState.SUBMITTING, SubmissionState.UNKNOWN):
            return estimate
        request = self._request()
        validate = getattr(provider, "validate", None)
        worst_case = getattr(provider, "worst_case", None)
        with task_errors():
            if callable(validate):
                validate(request)
            if self.estimated_cost is None and callable(worst_case) and state is SubmissionState.NONE:
                estimate = checked_amount("estimated_cost (the provider's worst case)", worst_case(request))
                self.log.info("Episode %s: estimated cost %s (the worst case)", episode.episode_id, estimate)
        return estimate

    def _ledger(self, store: EpisodeStore) -> SubmissionLedger:
        from ..paid.ledger import SubmissionLedger

        return SubmissionLedger(store, weekly_budget=self.weekly_budget, result_limit=self.max_result_bytes)

    def _submit(self, store: EpisodeStore, eid: str, provider: PaidProvider, estimate: float | None) -> Episode:
        from ..errors import SubmissionStateUnknown

        with task_errors():
            try:
                episode = self._ledger(store).submit(
                    eid,
                    provider,
                    self._request(),
                    estimated_cost=estimate,
                    require_approval=self.require_approval is True,
                )
            except SubmissionStateUnknown as exc:
                raise AirflowFailException(
                    f"{exc} -- not retrying: a second submission could be paid twice. "
                    f"After checking with the provider, run: {exc.command}"
                ) from exc
        sub = episode.submission
        self.log.info("Episode %s: submission %s (remote ref %s)", eid, sub.state.value, sub.remote_ref)
        return episode

    def _defer(self, episode: Episode) -> None:
        from ..triggers.paid_job import PaidJobTrigger

        sub = episode.submission
        assert sub.remote_ref is not None
        self.defer(
            trigger=PaidJobTrigger(
                episode_id=episode.episode_id,
                remote_ref=sub.remote_ref,
                provider_conn_id=self.provider_conn_id,
                provider_hook=self._provider_hook_path,
                poll_initial_delay=self.poll_initial_delay,
                poll_max_delay=self.poll_max_delay,
                max_result_bytes=self.max_result_bytes,
            ),
            method_name="execute_complete",
            timeout=dt.timedelta(seconds=self.poll_timeout),
        )

    def _poll(self, store: EpisodeStore, eid: str, provider: PaidProvider) -> Episode:
        from ..paid.poll import wait_for_terminal

        with task_errors():
            return wait_for_terminal(
                self._ledger(store),
                eid,
                provider,
                timeout=self.poll_timeout,
                initial_delay=self.poll_initial_delay,
                max_delay=self.poll_max_delay,
            )

    def _finish(self, context: Context, episode: Episode) -> dict[str, Any]:
        sub = episode.submission
        ti = context["ti"]
        ti.xcom_push(key="remote_ref", value=sub.remote_ref)
        ti.xcom_push(key="state", value=sub.state.value)
        ti.xcom_push(key="cost", value=sub.cost)  # a finite number >= 0 or None: the record holds nothing else
        summary: dict[str, Any] = {
            "episode_id": episode.episode_id,
            "remote_ref": sub.remote_ref,
            "state": sub.state.value,
            "cost": sub.cost,
            "result": sub.result,
        }
        if sub.cost_anomaly is not None:
            ti.xcom_push(key="cost_anomaly", value=sub.cost_anomaly)
            self.log.warning("Episode %s: %s (not recorded as its cost)", episode.episode_id, sub.cost_anomaly)
        if sub.result_omitted is not None:
            summary["result_omitted"] = sub.result_omitted.to_dict()
            self.log.warning("Episode %s: result left out: %s", episode.episode_id, sub.result_omitted.reason)
        if sub.state.value != "succeeded":
            raise AirflowFailException(
                f"episode {episode.episode_id}: paid job {sub.remote_ref} ended {sub.state.value}"
                f"{': ' + sub.error if sub.error else ''}; not retrying (the job is settled: a retry cannot change it)"
            )
        self.log.info("Episode %s: paid job %s succeeded, cost %s", episode.episode_id, sub.remote_ref, sub.cost)
        return summary
