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

import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ._api_server import Answer, ApiServer, Progress, public, serve_main

__all__ = ["PredictionApi", "main"]

PROGRESS = Progress(queued="starting", running="processing", done="succeeded", failed="failed")
PREFIX = "/v1/predictions"


class PredictionApi(ApiServer):
    """The prediction-style API; ``accepted(token)`` and ``jobs_for(token)`` count what it holds."""

    per_token = "jobs_per_token"

    def error(self, code: int, message: str) -> Answer:
        return Answer(code, {"detail": message})

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        if path == PREFIX and method == "POST":
            return self._create(body)
        if path == PREFIX and method == "GET":
            return self._list(query)
        if path.startswith(PREFIX + "/") and method == "GET":
            return self._get(path[len(PREFIX) + 1 :])
        return self.error(404, f"no route {method} {path}")

    def _create(self, body: Any) -> Answer:
        fault, refused = self.paid_call()
        if refused is not None:
            return refused
        if not isinstance(body, dict) or not isinstance(body.get("input"), dict):
            return self.error(422, "input: must be an object")
        metadata = body.get("metadata", {})
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            return self.error(422, "metadata: must map names to strings")
        if body["input"].get("prompt") == "":
            return self.error(422, "input.prompt: must not be empty")
        job_id = "p" + uuid.uuid4().hex[:20]
        job = {
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
        self.accept(job_id, job)
        return Answer(201, {"id": job_id, "status": PROGRESS.queued}, fault=fault)

    def _get(self, job_id: str) -> Answer:
        refused = self.status_refusal()
        if refused is not None:
            return refused
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
        refused = self.listing_refusal("listing predictions is not offered")
        if refused is not None:
            return refused
        return Answer(200, {"results": self.listed(query), "next": None})


def main(argv: Sequence[str] | None = None) -> int:
    return serve_main(PredictionApi, "python -m example_adapters.prediction_api", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
