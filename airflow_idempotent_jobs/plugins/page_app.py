"""The plugin's FastAPI app: the page (static HTML + JS) and the JSON API it reads, nothing else.

Routes (under the mount prefix ``/idempotent-jobs``)::

    GET /                          the week view (``?week=2026-W32``); the JS reads the API
    GET /episodes/{episode_id}     the episode view (same page, the JS reads the path)
    GET /static/{name}             the page's script and style sheet
    GET /api/weeks                 recent weeks, newest first
    GET /api/weeks/{week_id}       one week: rows, totals, needs attention
    GET /api/episodes/{episode_id} one episode's full record
    GET /api/session               the user's name and the token state-changing requests carry
    POST /api/episodes/{episode_id}/settle   settle an unknown paid submission (`page_settle`)

Every route needs a logged-in user (Airflow's auth manager): the API answers 401 to anonymous
requests; the pages redirect them to Airflow's login page, which brings the user back. What each
user sees is filtered by `auth.Access`. The one write is ``settle``, through the ledger.
"""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, cast

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response

from .page_auth import VisibleStore, access_for, api_user, page_user
from .page_settings import (
    PageStore,
    currency,
    current_week,
    name_the_store,
    page_now,
    weekly_budget,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser

    from ..stores import EpisodeStore

__all__ = ["create_app"]

log = logging.getLogger(__name__)

STATIC: Final = Path(__file__).parent / "static"
#: The only files ``/static/`` serves, with their media types.
ASSETS: Final = {"app.js": "text/javascript", "style.css": "text/css"}
#: The logged-in user (401 when anonymous), and the same or None for the pages.
ApiUser = Annotated[Any, Depends(api_user)]
PageUser = Annotated[Any, Depends(page_user)]
#: How many weeks ``/api/weeks`` looks back over (the page charts those that had episodes).
WEEKS_LISTED: Final = 26
#: On every answer: the page runs only its own script and style, loads nothing from elsewhere, and
#: may be framed by Airflow's UI (same origin) only; no answer is sniffed into another media type.
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "SAMEORIGIN",
    "Referrer-Policy": "same-origin",
}


def create_app() -> FastAPI:
    """A new app; the plugin mounts one per api-server process."""
    app = FastAPI(
        title="Idempotent Jobs",
        description="The week's jobs, spend and stuck submissions of airflow-idempotent-jobs.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,  # the schema would be the one route an anonymous user could read
    )
    store = PageStore()

    @app.middleware("http")
    async def hardened(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    def answer(work: Callable[[], dict[str, Any]], user: BaseUser) -> dict[str, Any]:
        """Run ``work``; our errors become one-line HTTP answers that carry no password or traceback.

        A damaged record names its episode and path: only a user with store-wide access is told
        which, since the record may belong to a DAG this user may not read. A store setting the
        page cannot use is told to everyone: its message names the setting, never its password.
        """
        from ..errors import (
            EpisodeNotFound,
            IdempotentJobsError,
            InvalidConfiguration,
            InvalidIdentifier,
            InvalidPageSetting,
            StoreUnavailable,
        )

        try:
            return work()
        except InvalidIdentifier as exc:
            raise HTTPException(400, store.scrub(str(exc))) from None
        except EpisodeNotFound as exc:
            raise HTTPException(404, f"episode {exc.episode_id} not found") from None
        except StoreUnavailable as exc:
            raise HTTPException(503, "episode store unavailable: " + store.scrub(str(exc))) from None
        except InvalidPageSetting as exc:
            raise HTTPException(503, "the page is misconfigured: " + store.scrub(str(exc))) from None
        except InvalidConfiguration as exc:
            raise HTTPException(503, "episode store misconfigured: " + store.scrub(str(exc))) from None
        except IdempotentJobsError as exc:
            if not access_for(user).store_wide:
                raise HTTPException(
                    503, "episode store cannot be read: a record is damaged (a user with store-wide access sees which)"
                ) from None
            raise HTTPException(503, f"episode store cannot be read: {store.scrub(str(exc))}") from None
        except HTTPException:
            raise
        except Exception as exc:
            if type(exc).__name__ == "AirflowFailException":  # the per-host store refused (distributed)
                raise HTTPException(503, store.scrub(str(exc))) from None
            log.exception("Idempotent Jobs page: unexpected error")
            raise HTTPException(500, "internal error of the Idempotent Jobs page; see the api-server log") from None

    def for_the_page(view: dict[str, Any]) -> dict[str, Any]:
        # The read model's view as the page answers it: commands naming the store, costs' unit.
        return {**view, "attention": name_the_store(view["attention"]), "currency": currency()}

    def visible(user: BaseUser) -> EpisodeStore:
        # The read model's functions take a store; they call only list() and get(), which the view filters.
        return cast("EpisodeStore", VisibleStore(store.get(), access_for(user)))

    @app.get("/api/weeks")
    async def api_weeks(user: ApiUser) -> dict[str, Any]:
        from ..operations import weeks_view

        def work() -> dict[str, Any]:
            now = page_now()
            view = weeks_view(visible(user), current=current_week(now), count=WEEKS_LISTED, now=now)
            # The zone whose calendar says which week is current; the unit costs are shown in.
            return {**view, "week_zone": str(now.tzinfo), "currency": currency()}

        return await run_in_threadpool(answer, work, user)

    @app.get("/api/weeks/{week_id}")
    async def api_week(week_id: str, request: Request, user: ApiUser) -> dict[str, Any]:
        from ..operations import week_view

        def work() -> dict[str, Any]:
            from ..identity import WeekId
            from ..week_rows import RowQuery

            week = WeekId.parse(week_id)  # a bad id is 400 before the store or the auth manager is asked
            rows = RowQuery.parse(dict(request.query_params))  # so is a bad filter, sort or page
            return for_the_page(week_view(visible(user), week, budget=weekly_budget(), now=page_now(), rows=rows))

        return await run_in_threadpool(answer, work, user)

    @app.get("/api/episodes/{episode_id}")
    async def api_episode(episode_id: str, user: ApiUser) -> dict[str, Any]:
        from ..operations import episode_view

        def work() -> dict[str, Any]:
            from ..identity import EpisodeId
            from .page_settle import settle_offer

            eid = str(EpisodeId.parse(episode_id))
            access = access_for(user)
            visible_store = VisibleStore(store.get(), access)
            now = page_now()
            view = episode_view(visible_store, eid, now=now)
            offer = settle_offer(user, visible_store.get(eid), access, now)
            if offer is not None:  # the record as this view shows it: a change since is refused on settling
                offer["seen_updated_at"] = view["episode"]["updated_at"]
            return {**for_the_page(view), "settle": offer}

        return await run_in_threadpool(answer, work, user)

    @app.get("/api/session")
    async def api_session(request: Request, user: ApiUser) -> dict[str, Any]:
        from .page_settle import csrf_token

        return {"user": user.get_name(), "csrf_token": csrf_token(request)}

    @app.post("/api/episodes/{episode_id}/settle")
    async def api_settle(episode_id: str, request: Request, user: ApiUser) -> dict[str, Any]:
        from .page_settle import check_same_origin, parse_settlement

        check_same_origin(request)  # before the body is even read
        try:
            body = await request.json()
        except ValueError:
            raise HTTPException(400, "the body must be JSON") from None
        settlement = parse_settlement(body)

        def work() -> dict[str, Any]:
            from ..errors import NotReconcilable
            from ..identity import EpisodeId
            from ..operations import episode_view
            from ..paid import SubmissionLedger
            from .page_settle import may_settle, settler_name

            eid = str(EpisodeId.parse(episode_id))
            access = access_for(user)
            seen = VisibleStore(store.get(), access).get(eid)  # 404 for an episode this user may not see
            if not may_settle(user, seen, access):
                raise HTTPException(403, f"you may not change the task instances of the DAG that owns {eid}")
            try:
                SubmissionLedger(store.get()).reconcile(
                    eid,
                    remote_ref=settlement.remote_ref,
                    not_submitted=settlement.answer == "not_submitted",
                    settled_by=settler_name(user),
                    via="ui",
                    comment=settlement.comment,
                    expected_updated_at=settlement.seen_updated_at,
                )
            except NotReconcilable as exc:
                raise HTTPException(409, store.scrub(str(exc))) from None
            return for_the_page(episode_view(visible(user), eid, now=page_now()))

        return await run_in_threadpool(answer, work, user)

    @app.get("/api/{rest:path}", include_in_schema=False)
    async def api_unknown(rest: str, user: ApiUser) -> JSONResponse:
        return JSONResponse({"detail": "no such API route"}, status_code=404)

    @app.get("/static/{name}", include_in_schema=False)
    async def asset(name: str, user: ApiUser) -> Response:
        if name not in ASSETS:
            raise HTTPException(404, "no such file")
        return FileResponse(STATIC / name, media_type=ASSETS[name], headers={"Cache-Control": "no-cache"})

    @app.get("/", include_in_schema=False)
    async def week_page(request: Request, user: PageUser) -> Response:
        return _page(request, user)

    @app.get("/episodes/{episode_id}", include_in_schema=False)
    async def episode_page(request: Request, user: PageUser) -> Response:
        return _page(request, user)

    return app


def _page(request: Request, user: BaseUser | None) -> Response:
    """The page for a logged-in user; anyone else goes to Airflow's login, and comes back here."""
    if user is None:
        from airflow.api_fastapi.app import get_auth_manager

        return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)), status_code=303)
    # The mount prefix as the browser sees it (it includes [api] base_url's path, if any): the
    # page's only server-side value, so the same static files work under any prefix.
    root = str(request.scope.get("root_path", "")).rstrip("/")
    text = (STATIC / "index.html").read_text(encoding="utf-8").replace("{{ROOT}}", html.escape(root, quote=True))
    return HTMLResponse(text, headers={"Cache-Control": "no-store"})
