"""A step of an existing episode, optionally run as an effect and followed by the episode's Asset event.

What ``@task.episode`` and `EpisodeEffectOperator` share. Order of one try (docs/design.md):

1. the episode id is checked (a malformed or empty one fails before anything is read);
2. the store is opened and the episode loaded (an unknown one fails without retry);
3. with ``effect=``: the function runs through `EffectLedger.run` (intent before, result after), at
   most once per episode and name; a done effect returns its recorded result and runs nothing;
   without: the store is closed first and the function runs on every try;
4. with ``asset_event=``: the episode's one event on that asset (`_asset_event.emit_once`).

The function gets the `Episode` as ``episode`` and, with ``effect=``, the effect's token as
``effect_token`` (pass it to the target as an idempotency key, or keep it to look the effect up).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..links.episode import EpisodeLink
from ._common import AirflowFailException, StoreOperator, checked_episode_id, task_errors

if TYPE_CHECKING:
    from airflow.sdk import Context

    from ..episode import Episode
    from ..stores import EpisodeStore

__all__ = ["CAPABILITIES", "EFFECT_TOKEN_PARAMETER", "EPISODE_PARAMETER", "EffectStep", "check_parameters"]

#: The parameter of the user's function that receives the loaded `Episode`.
EPISODE_PARAMETER: Final = "episode"
#: The parameter that receives the effect's token (with ``effect=`` only).
EFFECT_TOKEN_PARAMETER: Final = "effect_token"
#: ``effect_capability`` values (`EffectCapability`): what the target does with a repeated token.
CAPABILITIES: Final = ("none", "idempotent_key", "lookup")


class EffectStep(StoreOperator):
    """Loads the episode, runs ``python_callable`` with it (as an effect with ``effect=``), emits its event.

    Subclasses set ``python_callable``, ``op_args`` and ``op_kwargs`` (as ``@task`` and
    ``PythonOperator`` name them). See the module docstring for the order of one try.

    :param episode_id: templated id of an existing episode (e.g. ``"{{ ti.xcom_pull('allocate') }}"``).
    :param effect: run the body as this named effect of the episode, at most once (``publish``,
        ``notify:slack``); on a mapped task ``[map_index]`` is appended unless
        ``effect_per_map_index=False``. ``None``: a plain step on the loaded episode.
    :param effect_capability: what the target does with a repeated token: ``"none"`` (default: an
        effect that may have happened waits for reconcile), ``"idempotent_key"`` (running again with the
        same token is harmless), ``"lookup"`` (``effect_lookup(token)`` returns `Happened` or None).
    :param effect_inputs: templated JSON value the effect acts on; by default the call's own arguments
        (``op_args``, ``op_kwargs``). A retry with other inputs is refused.
    :param asset_event: an ``airflow.sdk.Asset``: the episode's one event on it, emitted after the
        effect, through an alias (never on a later try or clear); its extra holds the episode id, week,
        cost, remote ref and each effect's result.
    :param effect_lookup: with ``effect_capability="lookup"``: ``callable(token)`` returning
        ``airflow_idempotent_jobs.effects.Happened(result)`` when the target has the effect, or None
        when it certainly has not.
    :param effect_per_map_index: on a mapped task, one effect per map index (``upload[0]``, ...);
        False: one effect shared by every map index (give it ``effect_inputs`` they all share).
    """

    template_fields: Sequence[str] = ("episode_id", "store", "effect_inputs")
    #: "Episode" on the task instance opens this episode in the Idempotent Jobs page.
    operator_extra_links = (EpisodeLink(),)

    python_callable: Callable[..., Any]
    op_args: Collection[Any]
    op_kwargs: Mapping[str, Any]

    def __init__(
        self,
        *,
        episode_id: str | None,
        store: str | None = None,
        store_conn_id: str | None = None,
        lock_timeout: float | None = None,
        effect: str | None = None,
        effect_capability: str = "none",
        effect_lookup: Callable[[str], Any] | None = None,
        effect_inputs: Any = None,
        effect_per_map_index: bool = True,
        asset_event: Any = None,
        **kwargs: Any,
    ) -> None:
        task_id = kwargs.get("task_id", "?")
        _check_effect_options(task_id, effect, effect_capability, effect_lookup, effect_inputs, effect_per_map_index)
        if asset_event is not None:
            from ._asset_event import checked_asset

            kwargs["outlets"] = checked_asset(task_id, asset_event, kwargs.get("outlets"))
        super().__init__(**kwargs)
        self.episode_id = episode_id
        self.store = store
        self.store_conn_id = store_conn_id
        self.lock_timeout = lock_timeout
        self.effect = effect
        self.effect_capability = effect_capability
        self.effect_lookup = effect_lookup
        self.effect_inputs = effect_inputs
        self.effect_per_map_index = effect_per_map_index
        self.asset_event = asset_event

    def execute(self, context: Context) -> Any:
        eid = checked_episode_id(self.task_id, self.episode_id)
        map_index = context["ti"].map_index
        if self.asset_event is not None and map_index is not None and map_index >= 0:
            raise AirflowFailException(
                f"{self.task_id}: asset_event on a mapped task would emit once per map index;"
                " emit it from one task downstream of the mapped ones"
            )
        if self.effect is None and self.asset_event is None:
            episode = self._load(eid)  # the store is closed before the function runs
            return self._call(context, episode, None)
        with task_errors():
            store = self.hook.store
        try:
            with task_errors():
                episode = store.get(eid)
            self.log.info("Episode %s loaded (submission %s)", eid, episode.submission.state.value)
            result = (
                self._call(context, episode, None) if self.effect is None else self._effect(context, store, episode)
            )
            if self.asset_event is not None:
                from ..effects import EffectLedger
                from ._asset_event import emit_once

                emit_once(EffectLedger(store), eid, self.asset_event, context, self.log)
            return result
        finally:
            store.close()

    def _load(self, eid: str) -> Episode:
        with task_errors():  # EpisodeNotFound, StoreCorrupted: no retry; StoreUnavailable: retried
            store = self.hook.store
            try:
                episode = store.get(eid)
            finally:
                store.close()
        self.log.info("Episode %s loaded (submission %s)", eid, episode.submission.state.value)
        return episode

    def _effect(self, context: Context, store: EpisodeStore, episode: Episode) -> Any:
        """The function run as the effect (at most once); its recorded result."""
        from ..effects import EffectLedger
        from ..errors import InvalidRequest
        from ..paid.fingerprint import request_fingerprint

        assert self.effect is not None
        name = self.effect
        map_index = context["ti"].map_index
        if self.effect_per_map_index and map_index is not None and map_index >= 0:
            name = f"{name}[{map_index}]"
        inputs = self._inputs()
        try:
            request_fingerprint(inputs)
        except InvalidRequest as exc:
            raise AirflowFailException(
                f"{self.task_id}: effect {name}: its inputs have no canonical JSON form ({exc});"
                " pass effect_inputs= with the JSON values the effect acts on"
            ) from exc
        with task_errors():
            run = EffectLedger(store).run(
                episode.episode_id,
                name,
                lambda token: self._call(context, episode, token),
                inputs=inputs,
                capability=self.effect_capability,
                lookup=self.effect_lookup,
                redact=masked,
            )
        effect = run.effect
        if run.ran:
            self.log.info("Episode %s: effect %s done (attempt %s)", episode.episode_id, name, effect.attempts)
        else:
            self.log.info(
                "Episode %s: effect %s was done before: its recorded result, nothing run", episode.episode_id, name
            )
        if effect.result_omitted is not None:
            self.log.warning(
                "Episode %s: effect %s's result not kept: %s", episode.episode_id, name, effect.result_omitted.reason
            )
        return run.result

    def _inputs(self) -> dict[str, Any]:
        """What the effect acts on: ``effect_inputs`` as given, else the call's own arguments."""
        if self.effect_inputs is not None:
            return {"inputs": self.effect_inputs}
        own = {k: v for k, v in self.op_kwargs.items() if k not in (EPISODE_PARAMETER, EFFECT_TOKEN_PARAMETER)}
        return {"args": list(self.op_args), "kwargs": own}

    def _call(self, context: Context, episode: Episode, token: str | None) -> Any:
        """The user's function with its arguments, context keys, ``episode`` and (effects only) ``effect_token``."""
        from airflow.sdk.definitions.context import context_merge

        from ..airflow_compat import determine_kwargs

        context_merge(context, self.op_kwargs)
        kwargs = dict(determine_kwargs(self.python_callable, self.op_args, context))
        kwargs[EPISODE_PARAMETER] = episode
        if token is not None:
            kwargs[EFFECT_TOKEN_PARAMETER] = token
        return self.python_callable(*self.op_args, **kwargs)


def masked(text: str) -> str:
    """``text`` with every secret Airflow's masker knows in this task (connection passwords it read,
    sensitive variables, ``mask_secret``) replaced: a body's error is kept in the episode's record."""
    try:
        from airflow.sdk._shared.secrets_masker import redact
    except ImportError:  # another layout of the task SDK: the ledger still bounds and cleans the text
        return text
    out = redact(text)
    return out if isinstance(out, str) else text


def _check_effect_options(
    task_id: str, effect: str | None, capability: str, lookup: object, inputs: object, per_map_index: object
) -> None:
    """Options that cannot work fail when the DAG file is parsed, naming the task."""
    if effect is None:
        if capability != "none" or lookup is not None or inputs is not None:
            raise TypeError(f"{task_id}: effect_capability, effect_lookup and effect_inputs need effect=")
        return
    from ..effect import validate_effect_name
    from ..errors import InvalidIdentifier

    try:
        validate_effect_name(effect)
    except InvalidIdentifier as exc:
        raise ValueError(f"{task_id}: {exc}") from None
    if capability not in CAPABILITIES:
        raise ValueError(f"{task_id}: effect_capability must be one of {', '.join(CAPABILITIES)}, not {capability!r}")
    if (capability == "lookup") != (lookup is not None):
        raise TypeError(
            f"{task_id}: effect_lookup (a callable) is given with effect_capability='lookup', and only then"
        )
    if lookup is not None and not callable(lookup):
        raise TypeError(f"{task_id}: effect_lookup must be callable(token) -> Happened | None")
    if not isinstance(per_map_index, bool):
        raise TypeError(f"{task_id}: effect_per_map_index must be True or False")


def check_parameters(
    python_callable: Callable[..., Any], op_kwargs: Mapping[str, Any] | None, *, effect: bool, kind: str
) -> None:
    """The function takes ``episode`` (and with an effect ``effect_token``) by name or ``**kwargs``; the
    caller passes neither."""
    name = getattr(python_callable, "__name__", repr(python_callable))
    parameters = inspect.signature(python_callable).parameters
    wildcard = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    for wanted, needed in ((EPISODE_PARAMETER, True), (EFFECT_TOKEN_PARAMETER, effect)):
        takes = parameters.get(wanted)
        if needed and takes is None and not wildcard:
            raise TypeError(f"{kind} function {name}() must take a parameter named {wanted!r}")
        if takes is not None and not needed:
            raise TypeError(f"{kind} function {name}() takes {wanted!r}, which only effect= passes")
        if takes is not None and takes.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"{kind} function {name}(): {wanted!r} must not be positional-only")
        if op_kwargs and wanted in op_kwargs:
            what = "the loaded episode" if wanted == EPISODE_PARAMETER else "the effect's token"
            raise TypeError(f"{name}() got {wanted!r}: {kind} passes {what} itself; name the episode with episode_id=")
