"""Who may see which episodes: Airflow's auth manager decides, per owning DAG.

An episode's owner is the task instance recorded when Airflow's operator allocated it
(`Episode.allocated_by`). A user sees an episode when the auth manager lets them read that DAG
(``get_authorized_dag_ids``, which honours multi-team bundles). An episode without a recorded owner
(allocated by the CLI, the library, a migration or an earlier release's operator; the owner its
key names is shown, marked, but a key is any author's choice and proves nothing) or whose DAG
Airflow does not know (deleted, never parsed) could belong to any pipeline, so it needs store-wide
access: the Plugins view *and* read access to Connections. The second is what a plain viewer of
some DAGs does not have (simple auth manager: role ``op`` or ``admin``), and it is the right bar:
whoever may read Connections may read the store's own credentials, hence the store, anyway.

A record that cannot be read has no owner anyone can read either: only store-wide users learn it
is damaged; for everyone else it does not exist (404, as a missing one; left out of its week).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import Request

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser

    from ..episode import Episode
    from ..record_rules import WeekRead
    from ..stores import EpisodeStore

__all__ = ["Access", "VisibleStore", "access_for", "api_user", "page_user"]


@dataclass(frozen=True)
class Access:
    """What one user may see, read once per request."""

    #: DAGs the user may read (GET).
    readable_dags: frozenset[str]
    #: Every DAG Airflow's metadata knows; an owner outside it counts as no owner. Read for
    #: store-wide users only (one query per request): the readable DAGs are known ones anyway.
    known_dags: frozenset[str]
    #: May see episodes that no known DAG owns.
    store_wide: bool

    def may_see(self, episode: Episode) -> bool:
        owner = episode.allocated_by
        if owner is None:  # none recorded: whatever the key says, no DAG is proven to own it
            return self.store_wide
        if owner.dag_id in self.readable_dags:
            return True
        return self.store_wide and owner.dag_id not in self.known_dags


async def api_user(request: Request) -> BaseUser:
    """The logged-in user (Bearer token or the UI's ``_token`` cookie); 401 when anonymous."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    credentials = await bearer_scheme(request)
    return await get_user(request, None, credentials)


async def page_user(request: Request) -> BaseUser | None:
    """Like `api_user`, but None instead of an error: the page sends those to the login page."""
    from fastapi import HTTPException

    try:
        return await api_user(request)
    except HTTPException:
        return None


def access_for(user: BaseUser) -> Access:
    """Ask the auth manager (and read the DAG ids from Airflow's metadata); blocking, run in a thread."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    manager = get_auth_manager()
    readable = manager.get_authorized_dag_ids(user=user, method="GET")
    store_wide = manager.is_authorized_view(access_view=AccessView.PLUGINS, user=user) and (
        manager.is_authorized_connection(method="GET", user=user)
    )
    known: set[str] = set()
    if store_wide:  # only they see unknown DAGs' episodes; for anyone else "known" cannot change a thing
        with create_session() as session:
            known = set(session.scalars(select(DagModel.dag_id)))
    return Access(frozenset(readable), frozenset(known), bool(store_wide))


class VisibleStore:
    """The store as one user sees it: reads return only the episodes `Access.may_see` allows.

    The read model takes a store; handing it this view makes every total, count and attention
    item count only what the user may see. An episode the user may not see is "not found",
    whether it is there, missing or damaged, so its existence is not revealed; damaged records
    are named to store-wide users only. Writes are not offered at all.
    """

    def __init__(self, store: EpisodeStore, access: Access) -> None:
        self._store = store
        self._may_see: Callable[[Episode], bool] = access.may_see
        self._store_wide = access.store_wide

    def list(self, week: Any = None) -> builtins.list[Episode]:
        return self._visible(self._store.list(week))

    def read_week(self, week: Any) -> WeekRead:
        from ..record_rules import WeekRead

        read = self._store.read_week(week)
        return WeekRead(self._visible(read.episodes), read.damaged if self._store_wide else [])

    def get(self, episode_id: Any) -> Episode:
        from ..errors import EpisodeNotFound, StoreCorrupted
        from ..identity import EpisodeId

        eid = str(EpisodeId.parse(episode_id))
        try:
            episode = self._store.get(eid)
        except StoreCorrupted:
            if self._store_wide:
                raise
            episode = None  # whose it is cannot be read: for this user, no such episode
        if episode is None or not self._may_see(episode):
            raise EpisodeNotFound(eid, self._store.location)
        return episode

    def find(self, allocation_key: str) -> Episode | None:
        found = self._store.find(allocation_key)
        return found if found is not None and self._may_see(found) else None

    def _visible(self, episodes: Iterable[Episode]) -> builtins.list[Episode]:
        return [episode for episode in episodes if self._may_see(episode)]

    def __getattr__(self, name: str) -> Any:
        if name in _READ_ONLY:
            return getattr(self._store, name)
        raise AttributeError(f"the page's store view offers no {name!r}")


#: Store attributes the read model may use besides list/get/find: none of them writes (``namespace``
#: is not one: the file store creates itself to answer it).
_READ_ONLY = frozenset({"location"})
