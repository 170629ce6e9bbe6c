"""A local API shaped like the batch style of hosted-model APIs: two calls per job, a free upload and a paid batch.

Runnable (``python -m example_adapters.batch_api --port 0 --token SECRET`` prints its URL) and
importable (`BatchApi`, a context manager running in a thread). Every call needs
``Authorization: Bearer <token>``; errors are ``{"error": {"message", "type"}}``::

    POST /v1/files                {"purpose": "batch", "filename", "content": {...}}   (free)
                                  -> 200 {"id": "file-...", "object": "file", "bytes", "filename"}
    GET  /v1/files/{id}/content   the file's content (a batch's output file holds its result)
    POST /v1/batches              {"input_file_id", "endpoint", "completion_window", "metadata": {...}}  (paid)
                                  -> 200 {"id": "batch_...", "status": "validating", ...}; 404 for an unknown file
    GET  /v1/batches/{id}         {"id", "status", "metadata", "output_file_id", "errors", "usage": {"cost"}}
                                  status: validating -> in_progress -> completed | failed
    GET  /v1/batches?metadata.token=T
                                  {"object": "list", "data": [batches whose metadata matches], "has_more": false};
                                  an empty list means no batch carries T. 501 when listing is switched off.

The cost is ``price * content.units`` (default 1); ``"fail": true`` in the content makes the batch
fail, an empty ``prompt`` is refused with 400 at creation. ``fault`` applies to batch creation and
``upload_fault`` (with ``upload_fault_times``) to uploads, each drawn as in
`example_adapters._api_server`. Counters: ``uploads`` and ``files_per_name`` (files by filename),
``accepted`` and ``batches_per_token`` (batches by ``metadata.token``).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._api_server import Answer, ApiConfig, ApiServer, Progress, bump, public, serve_main

__all__ = ["BatchApi", "BatchConfig", "main"]

PROGRESS = Progress(queued="validating", running="in_progress", done="completed", failed="failed")


@dataclass
class BatchConfig(ApiConfig):
    #: Fault for the next ``upload_fault_times`` uploads (-1: all of them).
    upload_fault: str | None = None
    upload_fault_times: int = 1


class BatchApi(ApiServer):
    """The batch-style API; ``accepted(token)`` and ``jobs_for(token)`` count its batches."""

    config_class = BatchConfig
    config: BatchConfig
    per_token = "batches_per_token"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.files: dict[str, dict[str, Any]] = {}
        self.counters.update(uploads=0, files_per_name={})

    def error(self, code: int, message: str) -> Answer:
        kind = "server_error" if code >= 500 else "invalid_request_error"
        return Answer(code, {"error": {"message": message, "type": kind}})

    def snapshot(self) -> dict[str, Any]:
        return {
            **super().snapshot(),
            "files": {file_id: public(f) for file_id, f in self.files.items() if f["purpose"] == "batch"},
        }

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        if (method, path) == ("POST", "/v1/files"):
            return self._upload(body)
        if method == "GET" and path.startswith("/v1/files/") and path.endswith("/content"):
            return self._content(path[len("/v1/files/") : -len("/content")])
        if (method, path) == ("POST", "/v1/batches"):
            return self._create(body)
        if (method, path) == ("GET", "/v1/batches"):
            return self._list(query)
        if method == "GET" and path.startswith("/v1/batches/"):
            return self._get(path[len("/v1/batches/") :])
        return self.error(404, f"no route {method} {path}")

    # -- files -----------------------------------------------------------------------------------
    def _upload(self, body: Any) -> Answer:
        self.counters["uploads"] += 1
        fault = self.config.take_fault("upload_fault")
        refused = self.refusal(fault, "upload refused before anything was stored")
        if refused is not None:
            return refused
        if not isinstance(body, dict) or body.get("purpose") != "batch" or not isinstance(body.get("content"), dict):
            return self.error(400, "a file needs purpose 'batch' and an object as content")
        name = body.get("filename")
        if not isinstance(name, str) or not name:
            return self.error(400, "filename: must be a non-empty string")
        file_id = "file-" + uuid.uuid4().hex[:20]
        size = len(json.dumps(body["content"]).encode())
        self.files[file_id] = {"id": file_id, "object": "file", "bytes": size, "filename": name, "purpose": "batch"}
        self.files[file_id]["_content"] = body["content"]
        bump(self.counters["files_per_name"], name)
        return Answer(200, public(self.files[file_id]), fault=fault)

    def _content(self, file_id: str) -> Answer:
        found = self.files.get(file_id)
        if found is None:
            return self.error(404, f"no such file {file_id}")
        return Answer(200, found["_content"])

    # -- batches ---------------------------------------------------------------------------------
    def _create(self, body: Any) -> Answer:
        fault, refused = self.paid_call()
        if refused is not None:
            return refused
        if not isinstance(body, dict):
            return self.error(400, "the body must be an object")
        source = self.files.get(str(body.get("input_file_id")))
        if source is None or source["purpose"] != "batch":
            return self.error(404, f"no batch input file {body.get('input_file_id')!r}")
        metadata = body.get("metadata", {})
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            return self.error(400, "metadata: must map names to strings")
        if source["_content"].get("prompt") == "":
            return self.error(400, "the input's prompt must not be empty")
        batch_id = "batch_" + uuid.uuid4().hex[:20]
        batch = {
            "id": batch_id,
            "object": "batch",
            "status": PROGRESS.queued,
            "input_file_id": source["id"],
            "endpoint": body.get("endpoint"),
            "metadata": metadata,
            "output_file_id": None,
            "errors": None,
            "usage": {},
            "_polls": 0,
            "_started": time.monotonic(),
        }
        self.accept(batch_id, batch)
        return Answer(200, public(batch), fault=fault)

    def _get(self, batch_id: str) -> Answer:
        refused = self.status_refusal()
        if refused is not None:
            return refused
        batch = self.jobs.get(batch_id)
        if batch is None:
            return self.error(404, f"no such batch {batch_id}")
        content = self.files[batch["input_file_id"]]["_content"]
        if PROGRESS.advance(batch, self.config, content.get("units", 1), bool(content.get("fail"))):
            batch["usage"] = {"cost": batch.pop("_cost")}
            if batch["status"] == PROGRESS.failed:
                batch["errors"] = {"data": [{"code": "generation_failed", "message": "the model failed on this input"}]}
            else:
                out_id = "file-" + uuid.uuid4().hex[:20]
                result = {"url": f"https://media.invalid/{batch_id}.mp4"}
                self.files[out_id] = {"id": out_id, "object": "file", "purpose": "batch_output", "_content": result}
                batch["output_file_id"] = out_id
        return Answer(200, public(batch))

    def _list(self, query: dict[str, list[str]]) -> Answer:
        refused = self.listing_refusal("listing batches by metadata is not offered")
        if refused is not None:
            return refused
        return Answer(200, {"object": "list", "data": self.listed(query), "has_more": False})

    # -- for tests -------------------------------------------------------------------------------
    def uploads_named(self, filename: str) -> int:
        with self.lock:
            return int(self.counters["files_per_name"].get(filename, 0))


def main(argv: Sequence[str] | None = None) -> int:
    return serve_main(BatchApi, "python -m example_adapters.batch_api", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
