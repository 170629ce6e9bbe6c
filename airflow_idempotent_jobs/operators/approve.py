"""`ApproveEpisodeOperator`: a person approves or rejects an episode's spending, once, in the episode.

Built on Airflow's HITL `ApprovalOperator` (options "Approve"/"Reject", one optional ``comment``),
bound to the episode: the id is checked and the episode loaded before anything is asked, a decision
already recorded is returned without asking again (a retry, a cleared task, a re-run, another DAG
gating the same episode), and an answer is recorded in the episode under the store's lock
(`EpisodeStore.decide`) before the task goes on. A decision is final: an answer that contradicts
the one recorded meanwhile (someone used the CLI) fails the task without retry.

A timeout records nothing: with ``defaults=None`` the task fails (HITL's timeout error); with
``defaults="Reject"`` this run's downstream is skipped and a later run asks again. A clock never
approves spending, so ``defaults="Approve"`` is refused when the DAG is parsed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import Param

from ..links.episode import EpisodeLink
from ._common import AirflowFailException, StoreOperator, checked_episode_id, task_errors

if TYPE_CHECKING:
    from airflow.sdk import Context

    from ..episode import Decision, Episode
    from ..stores import EpisodeStore

__all__ = ["COMMENT_PARAM", "ApproveEpisodeOperator"]

#: The one form field besides the options: free text kept with the decision.
COMMENT_PARAM: Final = "comment"
#: Longest request shown whole in the question; a longer one is summarised.
MAX_SHOWN_REQUEST: Final = 2000
_VIA: Final = "airflow"


class ApproveEpisodeOperator(StoreOperator, ApprovalOperator):
    """Ask a person to approve the episode's spending; record the answer in the episode.

    Returns (and pushes as ``return_value``) ``{"episode_id", "decision", "by", "at", "comment",
    "asked"}``: ``decision`` is ``approved`` or ``rejected``, ``asked`` whether this try asked a
    person. Rejected: the downstream tasks are skipped (as `ApprovalOperator` does), or the task
    fails without retry with ``fail_on_reject=True``, whether the decision came now or before.

    :param episode_id: templated id of an existing episode.
    :param request: templated; shown to the approver (as JSON, summarised when long).
    :param estimated_cost: shown; ``weekly_budget`` too, with the week's spend so far. Both must
        be finite numbers >= 0 (refused when the DAG is parsed).
    :param subject: templated; default "Approve spending for episode <id>".
    :param weekly_budget: shown to the approver beside the week's spend (display only here: the paid
        step's own ``weekly_budget`` refuses).
    :param response_timeout: how long to wait for an answer (Airflow's HITL); ``None``: for ever.
    :param defaults: None or "Reject": what a ``response_timeout`` chooses (nothing is recorded).
        "Approve" is refused when the DAG is parsed: a clock never approves spending.
    :param fail_on_reject: fail the task (no retry) on a rejection instead of skipping downstream.
    :param ignore_downstream_trigger_rules: as Airflow's ``ApprovalOperator``: on a rejection, True
        skips every downstream task whatever its trigger rule; False lets trigger rules decide.
    :param assigned_users: Airflow's HITL ``assigned_users``: who may answer (default: anyone with
        the rights to).
    :param notifiers: Airflow's HITL notifiers, called when the question is asked.
    """

    template_fields: Sequence[str] = ("episode_id", "request", "store", "subject")
    template_fields_renderers: ClassVar[dict[str, str]] = {"request": "json"}
    ui_color = "#e8f4dc"
    #: "Episode" on the task instance opens this episode in the Idempotent Jobs page.
    operator_extra_links = (EpisodeLink(),)

    def __init__(
        self,
        *,
        episode_id: str | None,
        store: str | None = None,
        store_conn_id: str | None = None,
        lock_timeout: float | None = None,
        request: Mapping[str, Any] | None = None,
        estimated_cost: float | None = None,
        weekly_budget: float | None = None,
        subject: str | None = None,
        response_timeout: dt.timedelta | None = None,
        defaults: str | list[str] | None = None,
        fail_on_reject: bool = False,
        ignore_downstream_trigger_rules: bool = False,
        assigned_users: Any = None,
        notifiers: Any = None,
        **kwargs: Any,
    ) -> None:
        task_id = kwargs.get("task_id", "ApproveEpisodeOperator")
        if defaults not in (None, self.REJECT, [self.REJECT]):
            raise ValueError(
                f"{task_id}: defaults={defaults!r}: only None or {self.REJECT!r} may be taken on a timeout "
                "(a clock never approves spending)"
            )
        for name, value in (("estimated_cost", estimated_cost), ("weekly_budget", weekly_budget)):
            _refuse_amount(task_id, name, value)
        # Airflow hands the DAG's params in here too; HITLOperator keeps only task-level ones as form fields.
        params = {**dict(kwargs.pop("params", None) or {}), COMMENT_PARAM: _comment_param()}
        super().__init__(
            subject=subject or "",
            body=None,
            defaults=defaults,
            params=params,
            response_timeout=response_timeout,
            fail_on_reject=fail_on_reject,
            ignore_downstream_trigger_rules=ignore_downstream_trigger_rules,
            assigned_users=assigned_users,
            notifiers=notifiers,
            **kwargs,
        )
        self.episode_id = episode_id
        self.store = store
        self.store_conn_id = store_conn_id
        self.lock_timeout = lock_timeout
        self.request = request
        self.estimated_cost = estimated_cost
        self.weekly_budget = weekly_budget

    # -- ask ---------------------------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:
        eid = checked_episode_id(self.task_id, self.episode_id)
        store = self._open_store()
        try:
            episode = self._load(store, eid)
            if episode.approval.decision is not None:
                self.log.info("Episode %s: already %s; not asking again", eid, episode.approval.decision.value)
                return self._outcome(context, episode, asked=False)
            with task_errors():
                episode = store.ask(eid, by=asker(context), via=_VIA)
                week = [other for other in store.list(episode.week_id) if other.episode_id != eid]
        finally:
            store.close()
        self.subject = self.subject or f"Approve spending for episode {eid}"
        self.body = self._body(episode, week)
        self.log.info("Episode %s: asking for approval", eid)
        super().execute(context)  # records the question in Airflow and parks the task (awaiting input)
        raise AssertionError("unreachable: HITLOperator.execute parks the task")  # pragma: no cover

    # -- the answer --------------------------------------------------------------------------------
    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Record a person's answer under the store's lock, then go on or skip; a timeout records nothing."""
        from airflow.providers.standard.operators.hitl import HITLOperator

        from ..episode import Decision
        from ._answers import answer_comment, answer_time, answerer

        eid = checked_episode_id(self.task_id, self.episode_id)
        answer = HITLOperator.execute_complete(self, context, event)  # raises on a timeout without defaults
        if len(answer["chosen_options"]) != 1:
            raise AirflowFailException(f"{self.task_id}: the answer chose {answer['chosen_options']!r}, not one option")
        chosen = Decision.APPROVED if answer["chosen_options"][0] == self.APPROVE else Decision.REJECTED
        user = answer.get("responded_by_user")
        store = self._open_store()
        try:
            episode = self._load(store, eid)
            if event.get("timedout") or not user:
                self.log.warning("Episode %s: no answer in time; %s for this run only", eid, chosen.value)
                return self._timed_out(context, eid, chosen, answer.get("responded_at"))
            # Airflow accepted this answer: keep the decision whatever the name or comment hold (_answers).
            by = answerer(user)
            comment = answer_comment((answer.get("params_input") or {}).get(COMMENT_PARAM))
            at = answer_time(answer.get("responded_at"), episode.approval)
            with task_errors():  # DecisionConflict: someone decided otherwise meanwhile; final
                episode = store.decide(eid, chosen, by=by, via=_VIA, comment=comment, at=at)
        finally:
            store.close()
        self.log.info("Episode %s: %s by %s", eid, chosen.value, by)
        return self._outcome(context, episode, asked=True)

    # -- the form: one comment field, whatever params the DAG has -------------------------------------
    @property
    def serialized_params(self) -> dict[str, dict[str, Any]]:
        """The form's fields: the comment only. At run time Airflow merges the DAG's params into the
        task's, and HITLOperator would show them all (and demand them all back in the answer)."""
        return {COMMENT_PARAM: _comment_param().serialize()}

    def validate_params_input(self, params_input: Mapping[str, Any]) -> None:
        """Only the comment is kept; other fields (the REST API accepts any) are named in the log and dropped.

        Nothing here refuses the answer: Airflow has accepted it, and a refusal would leave the HITL
        row answered and the episode undecided. The comment is made fit for the record (`_answers`).
        """
        unknown = sorted(str(name)[:60] for name in set(params_input) - {COMMENT_PARAM})
        if unknown:
            self.log.warning("The answer's fields %s are not kept: only %r is", unknown, COMMENT_PARAM)

    # -- helpers -----------------------------------------------------------------------------------
    def _open_store(self) -> EpisodeStore:
        with task_errors():
            return self.hook.store

    def _load(self, store: EpisodeStore, eid: str) -> Episode:
        with task_errors():  # EpisodeNotFound, StoreCorrupted: final; StoreUnavailable: retried
            return store.get(eid)

    def _outcome(self, context: Context, episode: Episode, *, asked: bool) -> dict[str, Any]:
        approval = episode.approval
        assert approval.decision is not None
        result = {
            "episode_id": episode.episode_id,
            "decision": approval.decision.value,
            "by": approval.by,
            "at": approval.at,
            "comment": approval.comment,
            "asked": asked,
        }
        return self._go_on_or_skip(context, result)

    def _timed_out(self, context: Context, eid: str, chosen: Decision, at: object) -> dict[str, Any]:
        """A timeout's default ("Reject"): nothing is recorded, so ``by`` is None and a later run asks again."""
        result = {
            "episode_id": eid,
            "decision": chosen.value,
            "by": None,
            "at": at.isoformat() if isinstance(at, dt.datetime) else at,
            "comment": None,
            "asked": True,
        }
        return self._go_on_or_skip(context, result)

    def _go_on_or_skip(self, context: Context, result: dict[str, Any]) -> dict[str, Any]:
        if result["decision"] == "approved":
            return result
        who = f" by {result['by']}" if result["by"] else " (timeout default; not recorded)"
        if self.fail_on_reject:
            raise AirflowFailException(f"{self.task_id}: episode {result['episode_id']} was rejected{who}")
        # Skipping ends the task before its return value is pushed: push it first.
        context["ti"].xcom_push(key="return_value", value=result)
        tasks = (
            context["task"].get_flat_relatives(upstream=False)
            if self.ignore_downstream_trigger_rules
            else context["task"].get_direct_relatives(upstream=False)
        )
        self.log.info("Episode %s rejected%s: skipping downstream", result["episode_id"], who)
        self.skip(ti=context["ti"], tasks=[t for t in tasks if not t.is_teardown])
        return result

    def _body(self, episode: Episode, week: list[Episode]) -> str:
        """What the approver needs to decide, in Markdown."""
        request = shown_request(self.request)
        fence = code_fence(request)
        lines = [
            f"**Episode** `{episode.episode_id}` (week {episode.week_id})",
            "",
            "**Request**",
            "",
            fence + "json",
            request,
            fence,
            "",
            f"- Estimated cost: {_amount(self.estimated_cost)}",
            f"- Spent this week so far: {week_spend(week)}",
        ]
        if self.weekly_budget is not None:
            lines.append(f"- Weekly budget: {_amount(self.weekly_budget)}")
        return "\n".join(lines)


def asker(context: Context) -> str:
    """Who asks, for the episode's history: ``<dag_id>/<run_id>/<task_id>/<map_index> try <n>``.

    Ids can be 250 characters each; a name over `approval.MAX_BY` keeps its start and a digest.
    """
    from ..approval import MAX_BY

    ti = context["ti"]
    tries = f" try {ti.try_number}"
    name = f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{ti.map_index}"
    if len(name) + len(tries) > MAX_BY:
        digest = "~" + hashlib.sha256(name.encode()).hexdigest()[:16]
        name = name[: MAX_BY - len(tries) - len(digest)] + digest
    return name + tries


def shown_request(request: Mapping[str, Any] | None) -> str:
    """The request as indented JSON; a long one as its start, its size and its sha256."""
    if request is None:
        return "null"
    text = json.dumps(request, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) <= MAX_SHOWN_REQUEST:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()
    return f"{text[:MAX_SHOWN_REQUEST]}\n... ({len(text)} characters in all, sha256 {digest})"


def code_fence(text: str) -> str:
    """A Markdown fence longer than any run of backticks in ``text``.

    The request may carry run conf (user input). JSON escapes its newlines, so no value can start
    a line today; the fence does not rely on that staying true of what is shown.
    """
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def week_spend(week: list[Episode]) -> str:
    """The other episodes' committed spend (`budget.committed_cost`), or what makes it unknowable."""
    from ..paid.budget import committed_cost

    costs = {ep.episode_id: committed_cost(ep.submission) for ep in week}
    unknown = sorted(eid for eid, cost in costs.items() if cost is None)
    spent = sum(cost for cost in costs.values() if cost is not None)
    paid = sum(1 for ep in week if ep.submission.state.value != "none")
    text = f"{spent:g} ({paid} paid submission(s) among {len(week)} other episode(s))"
    if unknown:
        text += f"; unknown for {', '.join(unknown)} (the provider reported no valid cost)"
    return text


def _comment_param() -> Param:
    return Param("", type="string", description="Why (kept with the decision)")


def _amount(value: float | None) -> str:
    return "not given" if value is None else f"{value:g}"


def _refuse_amount(task_id: str, name: str, value: object) -> None:
    """A cost or budget that is not a finite number >= 0 (or is ``-0.0``) is refused when the DAG is parsed."""
    from ..episode import amount_problem

    problem = None if value is None else amount_problem(value)
    if problem:
        raise ValueError(f"{task_id}: {name}={value!r:.40} is {problem}; give a finite number >= 0")
