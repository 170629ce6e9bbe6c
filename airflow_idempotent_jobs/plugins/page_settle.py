"""Settling an ``unknown`` paid submission from the page: who may, and how a request proves it is the page's.

The two answers that need no provider call, as ``idempotent-jobs reconcile`` gives them: "this is
our job: REF" (``ours``) and "not submitted" (``not_submitted``), each with a required comment. They
go through the same ledger call as the CLI (`SubmissionLedger.reconcile`), recorded with the Airflow
user, ``via: ui`` and the comment, refused when the episode changed since the page showed it.

Who may: a user allowed to change the task instances of the DAG that owns the episode (the task
instance recorded at allocation); an episode with no known owner needs store-wide access and the
right to edit Connections. Everyone else gets 403, and an episode they may not see is 404 as on
every read.

A state-changing request must come from the page, not from another site that holds the user's
cookie: it carries ``X-CSRF-Token``, an HMAC keyed with the user's own Airflow token (which another
site cannot read, so cannot compute), which ``GET /api/session`` hands to the page; and a browser's
``Origin``, when sent, must be this server's.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from fastapi import HTTPException, Request

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser

    from ..episode import Episode
    from .page_auth import Access

__all__ = [
    "CSRF_HEADER",
    "Settlement",
    "check_same_origin",
    "csrf_token",
    "may_settle",
    "parse_settlement",
    "settle_offer",
    "settler_name",
]

#: The header a state-changing request carries its token in.
CSRF_HEADER: Final = "X-CSRF-Token"
_CSRF_PURPOSE: Final = b"airflow-idempotent-jobs: settle from the page"
#: Longest comment and remote ref kept (they are shown in every listing).
MAX_COMMENT: Final = 2000
MAX_REF: Final = 512
ANSWERS: Final = ("ours", "not_submitted")


def _credential(request: Request) -> tuple[str | None, bool]:
    """The Airflow token this request is authenticated with, and whether it came from the UI's cookie
    (a browser sends that by itself): the Bearer header's when it holds one, else the cookie's."""
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer ") and header[7:].strip():
        return header[7:].strip(), False
    return request.cookies.get("_token") or None, True


def csrf_token(request: Request) -> str:
    """The token for this user's session: anyone who can read the page's answers, and no one else."""
    credential, _ = _credential(request)
    if credential is None:
        raise HTTPException(401, "not logged in")
    return hmac.new(credential.encode(), _CSRF_PURPOSE, hashlib.sha256).hexdigest()


def check_same_origin(request: Request) -> None:
    """403 unless the request carries this session's token and, when a browser says where it comes from, is ours."""
    given = request.headers.get(CSRF_HEADER.lower(), "")
    if not given or not hmac.compare_digest(given, csrf_token(request)):
        raise HTTPException(403, f"refused: a state-changing request needs the page's {CSRF_HEADER} header")
    origin = request.headers.get("origin")
    if origin is None:
        if _credential(request)[1]:
            raise HTTPException(403, "refused: a browser request without Origin")
        return
    if urlsplit(origin).netloc.lower() not in _own_hosts(request):
        raise HTTPException(403, "refused: a cross-site request")


def _own_hosts(request: Request) -> set[str]:
    """This server as the browser names it: the Host header, and ``[api] base_url``'s host behind a proxy."""
    from ..config import api_base_url

    hosts = {request.headers.get("host", "").lower()}
    base = api_base_url()
    if base:
        hosts.add(urlsplit(base).netloc.lower())
    return {h for h in hosts if h}


@dataclass(frozen=True)
class Settlement:
    """One person's answer about an ``unknown`` submission, checked before anything is read."""

    answer: str
    remote_ref: str | None
    comment: str
    #: The episode's ``updated_at`` as the page showed it: a record changed since is refused.
    seen_updated_at: str | None


def parse_settlement(body: Any) -> Settlement:
    """The request's JSON body, or 400 naming what is wrong (nothing is read or written before)."""

    def bad(message: str) -> HTTPException:
        return HTTPException(400, message)

    if not isinstance(body, dict):
        raise bad("the body must be a JSON object")
    unknown = set(body) - {"answer", "remote_ref", "comment", "seen_updated_at"}
    if unknown:
        raise bad(f"unknown field {sorted(unknown)[0]!r}")
    answer = body.get("answer")
    if answer not in ANSWERS:
        raise bad(f"answer must be one of {', '.join(ANSWERS)}")
    comment = body.get("comment")
    if not isinstance(comment, str) or not comment.strip():
        raise bad("comment is required: say why (it is recorded with your name)")
    if len(comment) > MAX_COMMENT or not all(c.isprintable() or c in "\n\t" for c in comment):
        raise bad(f"comment must be printable text of at most {MAX_COMMENT} characters")
    ref = body.get("remote_ref")
    if answer == "ours":
        if not isinstance(ref, str) or not ref.strip() or len(ref) > MAX_REF or not ref.isprintable():
            raise bad(f"remote_ref (the provider's job id) is required for 'ours': printable, 1..{MAX_REF} characters")
    elif ref is not None:
        raise bad("remote_ref goes with answer 'ours' only")
    seen = body.get("seen_updated_at")
    if seen is not None and not isinstance(seen, str):
        raise bad("seen_updated_at must be the episode's updated_at as shown")
    return Settlement(answer, ref, comment, seen)


def settler_name(user: BaseUser) -> str:
    """The Airflow user name recorded as who settled it, held to the CLI's ``--by`` rule (one printable
    line, at most `cli._settling.MAX_WORD`): a name that could not be listed is refused (400), not stored."""
    from ..cli._settling import MAX_WORD

    name = user.get_name()
    if not isinstance(name, str) or not name.strip() or not name.isprintable() or len(name) > MAX_WORD:
        raise HTTPException(
            400,
            f"your Airflow user name cannot be recorded as who settled it (one printable line of at most "
            f"{MAX_WORD} characters, as the CLI's --by): settle with the CLI instead",
        )
    return name


def may_settle(user: BaseUser, episode: Episode, access: Access) -> bool:
    """Edit rights on the owning DAG's task instances; with no known owner, store-wide and Connection edit rights."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    manager = get_auth_manager()
    owner = episode.allocated_by
    if owner is not None and (not access.store_wide or owner.dag_id in access.known_dags):
        details = DagDetails(id=owner.dag_id)
        entity = DagAccessEntity.TASK_INSTANCE
        return bool(manager.is_authorized_dag(method="PUT", access_entity=entity, details=details, user=user))
    return access.store_wide and bool(manager.is_authorized_connection(method="PUT", user=user))


def settle_offer(user: BaseUser, episode: Episode, access: Access, now: dt.datetime) -> dict[str, Any] | None:
    """What the episode view offers this user: None unless its paid submission needs a person's
    answer (it is in "needs attention", as `operations.attention` says) and the user may give it."""
    from ..operations import attention

    if attention(episode, now=now) is None or not may_settle(user, episode, access):
        return None
    return {"answers": list(ANSWERS), "seen_updated_at": episode.updated_at}
