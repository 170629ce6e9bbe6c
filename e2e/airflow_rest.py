"""Airflow's public REST API as a logged-in person uses it (the UI makes the same calls).

Log in with ``POST /auth/token`` (the simple auth manager: JSON username/password; not part of the
REST API, so not of its client) for a JWT, then call ``/api/v2`` with it as a Bearer token through
``apache-airflow-client`` (its version is Airflow's). Only the calls the approval suite and the demo
need; `AirflowRest._call` is the plain call for the few the tests make themselves.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from airflow_client.client import (
    ApiClient,
    ApiException,
    AssetApi,
    BackfillApi,
    BackfillPostBody,
    ClearTaskInstancesBody,
    Configuration,
    DagRunApi,
    TaskInstanceApi,
    TriggerDAGRunPostBody,
    UpdateHITLDetailPayload,
)
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


class RestError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status


@dataclass
class AirflowRest:
    base_url: str
    username: str
    password: str
    token: str = ""
    _client: ApiClient | None = field(default=None, init=False, repr=False)

    def login(self) -> str:
        """A JWT for this user (``POST /auth/token``)."""
        answer = self._call("POST", "/auth/token", {"username": self.username, "password": self.password}, auth=False)
        self.token = str(answer["access_token"])
        self._client = None  # the next call's client carries the new token
        return self.token

    def _api(self) -> ApiClient:
        if not self.token:
            self.login()
        if self._client is None:
            self._client = ApiClient(Configuration(host=self.base_url, access_token=self.token))
        return self._client

    def _typed(self, method: str, path: str, call: Callable[[ApiClient], M]) -> dict[str, Any]:
        """One call through the client; its answer as the JSON object it was (RestError for an HTTP error)."""
        try:
            answer = call(self._api())
        except ApiException as exc:
            body = exc.body if isinstance(exc.body, str) else (exc.body or b"").decode(errors="replace")
            raise RestError(method, path, int(exc.status or 0), body) from None
        return answer.model_dump(mode="json", by_alias=True)

    def _call(self, method: str, path: str, body: Any = None, auth: bool = True) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if auth:
            if not self.token:
                self.login()
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as exc:
            raise RestError(method, path, exc.code, exc.read().decode(errors="replace")) from None
        return json.loads(raw) if raw else None

    # -- runs ----------------------------------------------------------------------------------
    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        """A manual run now (no logical date); its run_id."""
        body = TriggerDAGRunPostBody(logical_date=None, conf=conf or {})
        answer = self._typed("POST", f"dags/{dag_id}/dagRuns", lambda c: DagRunApi(c).trigger_dag_run(dag_id, body))
        return str(answer["dag_run_id"])

    def run_state(self, dag_id: str, run_id: str) -> str:
        answer = self._typed(
            "GET", f"dags/{dag_id}/dagRuns/{run_id}", lambda c: DagRunApi(c).get_dag_run(dag_id, run_id)
        )
        return str(answer["state"])

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return self._typed(
            "GET",
            f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}",
            lambda c: TaskInstanceApi(c).get_task_instance(dag_id, run_id, task_id),
        )

    def clear_run(self, dag_id: str, run_id: str) -> Any:
        """Clear every task of one run (``POST .../clearTaskInstances``), as the UI's Clear does."""
        body = ClearTaskInstancesBody(dry_run=False, dag_run_id=run_id, only_failed=False, reset_dag_runs=True)
        return self._typed(
            "POST",
            f"dags/{dag_id}/clearTaskInstances",
            lambda c: TaskInstanceApi(c).post_clear_task_instances(dag_id, body),
        )

    def backfill(self, dag_id: str, from_date: str, to_date: str, reprocess_behavior: str) -> dict[str, Any]:
        """A backfill over [from_date, to_date] (``POST /api/v2/backfills``), as the UI's Backfill dialog starts one."""
        body = BackfillPostBody.from_dict(
            {
                "dag_id": dag_id,
                "from_date": from_date,
                "to_date": to_date,
                "reprocess_behavior": reprocess_behavior,
                "max_active_runs": 1,
                "run_backwards": False,
                "dag_run_conf": {},
            }
        )
        assert body is not None
        return self._typed("POST", "backfills", lambda c: BackfillApi(c).create_backfill(body))

    def dag_runs(self, dag_id: str) -> list[dict[str, Any]]:
        answer = self._typed("GET", f"dags/{dag_id}/dagRuns", lambda c: DagRunApi(c).get_dag_runs(dag_id, limit=100))
        return list(answer["dag_runs"])

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """One try's log as text (``GET .../logs/{try}``), its structured lines joined."""
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}/logs/{try_number}"
        answer = self._call("GET", path + "?full_content=true")
        return json.dumps(answer)

    # -- assets --------------------------------------------------------------------------------
    def asset_id(self, name: str) -> int | None:
        """The id of the asset called exactly ``name`` (``GET /api/v2/assets``), None when Airflow has none.

        ``only_active=False``: an asset that only an `AssetAlias` emits to, with no DAG naming it in
        its schedule or outlets, is not "active" and the endpoint leaves it out by default.
        """
        answer = self._typed(
            "GET", "assets", lambda c: AssetApi(c).get_assets(name_pattern=name, only_active=False, limit=100)
        )
        ids = [int(a["id"]) for a in answer["assets"] if a["name"] == name]
        return ids[0] if ids else None

    def asset_events(self, asset_id: int) -> list[dict[str, Any]]:
        """Every event of one asset (``GET /api/v2/assets/events?asset_id=``)."""
        answer = self._typed(
            "GET", "assets/events", lambda c: AssetApi(c).get_asset_events(asset_id=asset_id, limit=100)
        )
        return list(answer["asset_events"])

    # -- human in the loop ---------------------------------------------------------------------
    def hitl_path(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
        return f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}/{map_index}/hitlDetails"

    def hitl_detail(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any] | None:
        """The task's question (subject, options, params, response), or None when it asked nothing."""
        try:
            return self._typed(
                "GET",
                self.hitl_path(dag_id, run_id, task_id),
                lambda c: TaskInstanceApi(c).get_hitl_detail(dag_id, run_id, task_id, -1),
            )
        except RestError as exc:
            if exc.status == 404:
                return None
            raise

    def answer(
        self, dag_id: str, run_id: str, task_id: str, option: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Choose ``option`` (``PATCH .../hitlDetails``); Airflow's answer names who responded."""
        body = UpdateHITLDetailPayload(chosen_options=[option], params_input=params or {})
        return self._typed(
            "PATCH",
            self.hitl_path(dag_id, run_id, task_id),
            lambda c: TaskInstanceApi(c).update_hitl_detail(dag_id, run_id, task_id, -1, body),
        )

    def wait_for_question(self, dag_id: str, run_id: str, task_id: str, timeout: float) -> dict[str, Any]:
        """The question once the task waits for input (state ``awaiting_input``; Airflow 3.1 and 3.2 have
        no such state: their waiting task is ``deferred``, and the question exists once it asked)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.task_instance(dag_id, run_id, task_id).get("state")
            if state in ("awaiting_input", "deferred"):
                detail = self.hitl_detail(dag_id, run_id, task_id)
                if detail is not None:
                    return detail
            elif state in ("failed", "success", "skipped", "upstream_failed"):
                raise RuntimeError(f"{dag_id}/{run_id}/{task_id} ended {state} without asking")
            time.sleep(1.0)
        raise TimeoutError(f"{dag_id}/{run_id}/{task_id} did not ask within {timeout:.0f}s")

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run_state(dag_id, run_id)
            if state in ("success", "failed"):
                return state
            time.sleep(1.0)
        raise TimeoutError(f"run {dag_id}/{run_id} did not finish within {timeout:.0f}s")


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")
