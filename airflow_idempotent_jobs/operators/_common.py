"""What the operators share: their store's hook, refused renderings, and our errors in Airflow's terms.

Kept free of heavy imports at module level: DAG files import the operators, and Airflow parses
DAG files constantly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

try:
    from airflow.sdk.exceptions import AirflowFailException
except ImportError:  # Airflow < 3.2
    from airflow.exceptions import AirflowFailException  # type: ignore[attr-defined,no-redef,unused-ignore]

from airflow.sdk import BaseOperator

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import Context

    from ..hooks.store import EpisodeStoreHook

__all__ = [
    "EMPTY_RENDERINGS",
    "AirflowFailException",
    "StoreOperator",
    "checked_episode_id",
    "is_empty_rendering",
    "refuse_empty_renderings",
    "task_errors",
]

#: What a template renders to when the value it reads is missing (compared stripped, any case).
EMPTY_RENDERINGS: Final = frozenset({"", "none", "null"})


def is_empty_rendering(value: Any) -> bool:
    """None, or text that is blank, ``None`` or ``null`` in any case: a template that found nothing."""
    return value is None or (isinstance(value, str) and value.strip().lower() in EMPTY_RENDERINGS)


def checked_episode_id(task_id: str, raw: Any) -> str:
    """The rendered ``episode_id`` in its canonical form; `AirflowFailException` (no retry) when it is
    empty (the upstream allocation pushed nothing) or breaks the id grammar. Nothing is read first."""
    from ..errors import InvalidIdentifier
    from ..identity import EpisodeId

    if is_empty_rendering(raw):
        raise AirflowFailException(
            f"{task_id}: episode_id is empty ({raw!r}); it must name an existing episode, "
            "e.g. \"{{ ti.xcom_pull('allocate') }}\""
        )
    try:
        return str(EpisodeId.parse(raw.strip() if isinstance(raw, str) else raw))
    except InvalidIdentifier as exc:
        raise AirflowFailException(f"{task_id}: {exc}") from exc


def refuse_empty_renderings(task_id: str, templates: Mapping[str, Any], rendered: Mapping[str, Any]) -> None:
    """Fail (no retry) when an argument the author gave rendered empty, ``None`` or ``null``.

    ``allocation_key="{{ dag_run.conf.get('key') }}"`` renders ``None`` in every run without conf:
    taken as a key, every such run would share the first one's episode (and its paid job). The
    same goes for a week, fingerprint, time zone or store that the template failed to produce.
    """
    for field, template in templates.items():
        if template is None:
            continue
        value = rendered.get(field)
        if is_empty_rendering(value):
            from ..hooks._store_url import redact_text

            shown = redact_text(template) if isinstance(template, str) else template
            raise AirflowFailException(
                f"{task_id}: {field} rendered {value!r} from the template {shown!r}: a missing value cannot "
                f"stand for this run (a key rendered 'None' in every run would share one episode and its paid "
                f"job); make the template always render a value, or leave {field} out"
            )


class StoreOperator(BaseOperator):
    """Base of the operators with a templated ``store``: its rendered value never shows a password.

    Airflow keeps every task's rendered template fields and shows them in the UI. A store URL
    whose password was rendered from a Variable becomes a `SealedStoreUrl` right after rendering:
    Airflow stores and shows ``postgresql://user:***@host/db``; the store's hook (`hook`) connects
    with the real URL. ``_do_render_template_fields`` is the one method both a plain and a mapped
    task call on the operator to render it.

    :param store: templated store URL (a path, ``file://`` or ``postgresql://``); its password never
        reaches the rendered fields Airflow shows.
    :param store_conn_id: a Connection naming the store (``idempotent_jobs_store`` or ``postgres``).
        With neither: ``[idempotent_jobs] store`` / ``store_conn_id``, else the file store under
        ``$AIRFLOW_HOME``, which is refused when the executor runs tasks on several hosts.
    :param lock_timeout: seconds to wait for the store's lock; ``None``: the store's own (the URL's
        ``lock_timeout``, else 30).
    """

    store: Any
    store_conn_id: str | None
    lock_timeout: float | None

    @property
    def hook(self) -> EpisodeStoreHook:
        """A new hook for this task's store on each access: each opens its own store, which its user closes.

        ``store=`` wins, then ``store_conn_id=``, then the deployment's (`EpisodeStoreHook.store`).
        One that rendered empty fails the task without retry.
        """
        from ..hooks.store import EpisodeStoreHook

        if self.store is not None:
            if is_empty_rendering(self.store):
                raise AirflowFailException(f"store is {self.store!r}: name a directory, file:// or postgresql:// URL")
        elif self.store_conn_id is not None and is_empty_rendering(self.store_conn_id):
            raise AirflowFailException(f"store_conn_id is {self.store_conn_id!r}: name a Connection")
        return EpisodeStoreHook(self.store_conn_id, store_url=self.store, lock_timeout=self.lock_timeout)

    def _do_render_template_fields(
        self,
        parent: Any,
        template_fields: Iterable[str],
        context: Context,
        jinja_env: jinja2.Environment,
        seen_oids: set[int],
    ) -> None:
        template_fields = list(template_fields)
        super()._do_render_template_fields(parent, template_fields, context, jinja_env, seen_oids)
        if parent is self and "store" in template_fields:
            from ..hooks._store_url import seal_store_url

            self.store = seal_store_url(self.store)


@contextmanager
def task_errors() -> Iterator[None]:
    """Translate this package's errors for Airflow inside the ``with`` body.

    An error a retry cannot fix (``retryable`` is false: a bad id, a conflict, a corrupt file, an
    unknown episode, an uncertain paid submission, a bad configuration) fails the task without
    retry; everything else, notably `StoreUnavailable` (lock timeout, database down), stays
    retryable. `AirflowFailException` passes through untouched.
    """
    from ..errors import IdempotentJobsError

    try:
        yield
    except IdempotentJobsError as exc:
        if not exc.retryable:
            raise AirflowFailException(str(exc)) from exc
        raise
