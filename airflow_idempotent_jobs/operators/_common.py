"""What the operators share: store selection, refused renderings, and our errors in Airflow's terms.

Kept free of heavy imports at module level: DAG files import the operators, and Airflow parses
DAG files constantly.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

try:
    from airflow.sdk.exceptions import AirflowFailException
except ImportError:  # Airflow < 3.2
    from airflow.exceptions import AirflowFailException  # type: ignore[attr-defined,no-redef,unused-ignore]

from airflow.sdk import BaseOperator

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import Context

    from ..stores import EpisodeStore

__all__ = [
    "DEFAULT_STORE_DIRNAME",
    "EMPTY_RENDERINGS",
    "AirflowFailException",
    "StoreOperator",
    "checked_episode_id",
    "default_store_path",
    "is_empty_rendering",
    "open_task_store",
    "refuse_empty_renderings",
    "task_errors",
]

#: The embedded default store lives here, under ``$AIRFLOW_HOME``.
DEFAULT_STORE_DIRNAME = "idempotent_jobs"
#: What a template renders to when the value it reads is missing (compared stripped, any case).
EMPTY_RENDERINGS: Final = frozenset({"", "none", "null"})


def default_store_path() -> Path:
    """``$AIRFLOW_HOME/idempotent_jobs``; Airflow's own default home is ``~/airflow``."""
    home = os.environ.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow")
    return Path(home) / DEFAULT_STORE_DIRNAME


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
    Airflow stores and shows ``postgresql://user:***@host/db``; `open_task_store` connects with the
    real URL. ``_do_render_template_fields`` is the one method both a plain and a mapped task call
    on the operator to render it.
    """

    store: Any

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


def open_task_store(store: Any, store_conn_id: str | None, lock_timeout: float | None) -> EpisodeStore:
    """The store a task names: ``store=`` wins, then ``store_conn_id=``, then the deployment's
    ``[idempotent_jobs] store`` or ``store_conn_id``; else the file store under ``$AIRFLOW_HOME``,
    which only a single-host executor may use (each host would have its own).
    """
    from ..hooks._store_url import SealedStoreUrl

    options: dict[str, Any] = {} if lock_timeout is None else {"lock_timeout": lock_timeout}
    if store is not None:
        if is_empty_rendering(store):
            raise AirflowFailException(f"store is {store!r}: name a directory, file:// or postgresql:// URL")
        url = store.secret if isinstance(store, SealedStoreUrl) else str(store)
        return _open_url(url, options)
    if store_conn_id is not None:
        if is_empty_rendering(store_conn_id):
            raise AirflowFailException(f"store_conn_id is {store_conn_id!r}: name a Connection")
        return _open_connection(store_conn_id, lock_timeout)
    deployment = _deployment_store(options, lock_timeout)
    if deployment is not None:
        return deployment
    _refuse_per_host_store()
    from ..stores import open_store

    return open_store(default_store_path(), **options)


def _open_url(url: str, options: dict[str, Any], setting: str | None = None) -> EpisodeStore:
    """`open_store`; a URL it refuses is reported by the setting it came from (never with its password)."""
    from ..errors import InvalidConfiguration
    from ..stores import open_store

    try:
        return open_store(url, **options)
    except InvalidConfiguration as exc:
        if setting is None:
            raise
        raise InvalidConfiguration("deployment setting", setting, str(exc)) from None


def _open_connection(conn_id: str, lock_timeout: float | None) -> EpisodeStore:
    from ..hooks.store import EpisodeStoreHook

    return EpisodeStoreHook(conn_id, lock_timeout=lock_timeout).store


def _deployment_store(options: dict[str, Any], lock_timeout: float | None) -> EpisodeStore | None:
    """The store ``[idempotent_jobs]`` names for the whole deployment, if any."""
    from ..config import SECTION, env_name, setting
    from ..errors import InvalidConfiguration
    from ..hooks._store_url import mask_secrets, url_passwords

    url, conn_id = setting("store"), setting("store_conn_id")
    if url and conn_id:
        raise InvalidConfiguration(
            "deployment settings",
            f"[{SECTION}] store and [{SECTION}] store_conn_id",
            "both are set; set one of them",
        )
    if url:
        mask_secrets(url_passwords(url))
        return _open_url(url, options, setting=f"[{SECTION}] store ({env_name('store')})")
    if conn_id:
        return _open_connection(conn_id, lock_timeout)
    return None


def _refuse_per_host_store() -> None:
    """No store named anywhere: refuse the per-host default unless every task runs on this host."""
    from ._executors import configured_executors, distributed_executors

    spread = distributed_executors(configured_executors())
    if spread:
        raise AirflowFailException(
            f"no episode store configured, and the executor ({', '.join(spread)}) may run tasks on several "
            f"hosts, each with its own default store {default_store_path()}: a retry on another host would "
            "allocate (and pay) again. Name one store for all hosts: store= or store_conn_id= on the operator, "
            "or [idempotent_jobs] store or store_conn_id for the deployment "
            "(AIRFLOW__IDEMPOTENT_JOBS__STORE=postgresql://... or AIRFLOW__IDEMPOTENT_JOBS__STORE_CONN_ID=...)"
        )


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
