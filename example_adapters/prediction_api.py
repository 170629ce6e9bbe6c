"""A local API shaped like the prediction style of hosted-model APIs: one paid call per job, no idempotency header.

Runnable (``python -m example_adapters.prediction_api --port 0 --token SECRET`` prints its URL) and
importable (`PredictionApi`, a context manager running in a thread). Every call needs
``Authorization: Bearer <token>``; errors are ``{"detail": "..."}``::

    POST /v1/predictions          {"input": {...}, "metadata": {"k": "v"}}  (paid)
                                  -> 201 {"id", "status": "starting"}; 422 for an invalid input
    GET  /v1/predictions/{id}     {"id", "status", "input", "metadata", "output", "error", "metrics": {"cost"}}
                                  status: starting -> processing -> succeeded | failed
    GET  /v1/predictions?metadata.token=T
                                  {"results": [jobs whose metadata matches], "next": null}; an empty
                                  list means no job carries T. 501 when listing is switched off.

The job's ``metadata`` echoes what the client sent, which is how a client finds the job a lost
answer made. The cost is ``price * input.units`` (default 1); ``"fail": true`` in the input makes the
job fail, an empty ``prompt`` is refused with 422. Faults, switches and ``/_admin/*``: see
`example_adapters._api_server`; ``jobs_per_token`` counts jobs by ``metadata.token``.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ._api_server import REFUSALS, Answer, ApiServer, Progress, bump, common_config, public, serve_main, take_fault

__all__ = ["PredictionApi", "main"]

PROGRESS = Progress(queued="starting", running="processing", done="succeeded", failed="failed")
PREFIX = "/v1/predictions"


class PredictionApi(ApiServer):
    """The prediction-style API; ``accepted(token)`` and ``jobs_for(token)`` count what it holds."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.jobs: dict[str, dict[str, Any]] = {}
        self.counters.update(submissions=0, accepted=0, jobs_per_token={})

    def error(self, code: int, message: str) -> Answer:
        return Answer(code, {"detail": message})

    def snapshot(self) -> dict[str, Any]:
        return {**super().snapshot(), "jobs": {job_id: public(job) for job_id, job in self.jobs.items()}}

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        if path == PREFIX and method == "POST":
            return self._create(body)
        if path == PREFIX and method == "GET":
            return self._list(query)
        if path.startswith(PREFIX + "/") and method == "GET":
            return self._get(path[len(PREFIX) + 1 :])
        return self.error(404, f"no route {method} {path}")

    def _create(self, body: Any) -> Answer:
        self.counters["submissions"] += 1
        fault = take_fault(self.config)
        code = REFUSALS.get(fault or "")
        if code is not None:
            return self.error(code, f"refused before anything was created (HTTP {code})")
        if not isinstance(body, dict) or not isinstance(body.get("input"), dict):
            return self.error(422, "input: must be an object")
        metadata = body.get("metadata", {})
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            return self.error(422, "metadata: must map names to strings")
        if body["input"].get("prompt") == "":
            return self.error(422, "input.prompt: must not be empty")
        job_id = "p" + uuid.uuid4().hex[:20]
        self.jobs[job_id] = {
            "id": job_id,
            "status": PROGRESS.queued,
            "input": body["input"],
            "metadata": metadata,
            "output": None,
            "error": None,
            "metrics": {},
            "_polls": 0,
            "_started": time.monotonic(),
        }
        self.counters["accepted"] += 1
        bump(self.counters["jobs_per_token"], metadata.get("token"))
        return Answer(201, {"id": job_id, "status": PROGRESS.queued}, fault=fault)

    def _get(self, job_id: str) -> Answer:
        self.counters["status_calls"] += 1
        if self.config.status_errors:
            code = self.config.status_errors.pop(0)
            return self.error(code, f"status refused with HTTP {code}")
        job = self.jobs.get(job_id)
        if job is None:
            return self.error(404, "prediction not found")
        request = job["input"]
        if PROGRESS.advance(job, self.config, request.get("units", 1), bool(request.get("fail"))):
            job["metrics"] = {"cost": job.pop("_cost")}
            if job["status"] == PROGRESS.failed:
                job["error"] = "the model failed on this input"
            else:
                job["output"] = {"url": f"https://media.invalid/{job_id}.mp4"}
        return Answer(200, public(job))

    def _list(self, query: dict[str, list[str]]) -> Answer:
        self.counters["lookup_calls"] += 1
        if self.config.lookup_errors:
            code = self.config.lookup_errors.pop(0)
            return self.error(code, f"listing refused with HTTP {code}")
        if not self.config.lookup:
            return self.error(501, "listing predictions is not offered")
        wanted = {key[len("metadata.") :]: values[-1] for key, values in query.items() if key.startswith("metadata.")}
        found = [
            public(job)
            for job in reversed(self.jobs.values())  # newest first
            if self.config.ignore_filter or all(job["metadata"].get(k) == v for k, v in wanted.items())
        ]
        return Answer(200, {"results": found, "next": None})

    # -- for tests -----------------------------------------------------------------------------
    def accepted(self, token: str | None = None) -> int:
        """Paid jobs created, in all or for one ``metadata.token``."""
        with self.lock:
            if token is None:
                return int(self.counters["accepted"])
            return int(self.counters["jobs_per_token"].get(token, 0))

    def jobs_for(self, token: str) -> list[str]:
        with self.lock:
            return sorted(job_id for job_id, job in self.jobs.items() if job["metadata"].get("token") == token)


def main(argv: Sequence[str] | None = None) -> int:
    def factory(args: argparse.Namespace) -> ApiServer:
        return PredictionApi(auth_token=args.token, host=args.host, port=args.port, **common_config(args))

    return serve_main("python -m example_adapters.prediction_api", __doc__, factory, argv)


if __name__ == "__main__":
    sys.exit(main())
