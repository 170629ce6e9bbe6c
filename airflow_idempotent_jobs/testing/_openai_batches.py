"""What the local OpenAI double computes: a batch's input, its usage, its output and error files, its pages.

Pure functions over plain dicts, so that `openai_api` only routes and answers. Usage is derived from
the request alone, so a test can compute the expected tokens (and cost) without the server:

* input tokens: the UTF-8 size of the compact JSON of the body's ``messages`` (chat) or ``input``
  (responses, embeddings), divided by 4, plus 1; a quarter of them (rounded down) are cached
  (none for embeddings);
* output tokens: half the body's max tokens, rounded up (none for embeddings).
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any, Final

__all__ = [
    "ENDPOINTS",
    "INF",
    "InputLine",
    "error_body",
    "faulty_page",
    "finish_lines",
    "metadata_problem",
    "newest_first",
    "parse_input",
    "request_usage",
]

#: The batch endpoints the double serves, with the body field that bounds their output.
ENDPOINTS: Final = {
    "/v1/chat/completions": ("max_completion_tokens", "max_tokens"),
    "/v1/responses": ("max_output_tokens",),
    "/v1/embeddings": (),
}

InputLine = tuple[str, dict[str, Any]]
#: The ``error.type`` OpenAI gives each status.
ERROR_TYPES: Final = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
                 409: "conflict", 429: "requests", 500: "server_error", 503: "server_error"}  # fmt: skip
#: Stands for a number JSON cannot carry (``1e999``): replaced in the answer's text.
INF: Final = "__aij_1e999__"


def error_body(code: int, message: str, param: str | None = None, error_code: str | None = None) -> dict[str, Any]:
    """An error answer as OpenAI writes it."""
    kind = ERROR_TYPES.get(code, "invalid_request_error" if code < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": error_code}}


def public(value: dict[str, Any]) -> dict[str, Any]:
    """A batch or file as the API shows it: without the double's own ``_`` fields."""
    return {k: copy.deepcopy(v) for k, v in value.items() if not k.startswith("_")}


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def parse_input(content: bytes, endpoint: str) -> tuple[list[InputLine], str | None]:
    """The ``(custom_id, body)`` lines of a batch input file, or the validation error that fails the batch."""
    lines: list[InputLine] = []
    seen: set[str] = set()
    for number, raw in enumerate(content.decode("utf-8", "replace").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            return [], f"line {number}: not JSON"
        if not isinstance(line, dict) or not isinstance(line.get("body"), dict):
            return [], f"line {number}: needs custom_id, method, url and body"
        custom_id = line.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id or custom_id in seen:
            return [], f"line {number}: custom_id must be a unique non-empty string"
        if line.get("method") != "POST" or line.get("url") != endpoint:
            return [], f"line {number}: method must be POST and url {endpoint}"
        if not isinstance(line["body"].get("model"), str):
            return [], f"line {number}: body.model is required"
        seen.add(custom_id)
        lines.append((custom_id, line["body"]))
    if not lines:
        return [], "the input file holds no requests"
    return lines, None


def _max_tokens(body: dict[str, Any], endpoint: str) -> int:
    for name in ENDPOINTS[endpoint]:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def request_usage(body: dict[str, Any], endpoint: str) -> dict[str, Any]:
    """The usage the double reports for one request, in the endpoint's own shape (module docstring)."""
    sent = body.get("messages") if endpoint == "/v1/chat/completions" else body.get("input")
    prompt = len(_compact(sent).encode()) // 4 + 1
    if endpoint == "/v1/embeddings":
        return {"prompt_tokens": prompt, "total_tokens": prompt}
    cached = prompt // 4
    output = (_max_tokens(body, endpoint) + 1) // 2
    if endpoint == "/v1/responses":
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + output,
        }
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _response_body(body: dict[str, Any], endpoint: str, model_suffix: str) -> dict[str, Any]:
    model = str(body["model"]) + model_suffix
    usage = request_usage(body, endpoint)
    now = int(time.time())
    if endpoint == "/v1/embeddings":
        data = [{"object": "embedding", "index": 0, "embedding": [0.0, 0.5, 1.0]}]
        return {"object": "list", "data": data, "model": model, "usage": usage}
    if endpoint == "/v1/responses":
        text = {"type": "output_text", "text": "ok", "annotations": []}
        output = [{"type": "message", "id": "msg_" + uuid.uuid4().hex[:16], "role": "assistant", "content": [text]}]
        return {"id": "resp_" + uuid.uuid4().hex[:16], "object": "response", "created_at": now, "model": model,
                "status": "completed", "output": output, "usage": usage}  # fmt: skip
    choice = {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    return {"id": "chatcmpl-" + uuid.uuid4().hex[:16], "object": "chat.completion", "created": now, "model": model,
            "choices": [choice], "usage": usage}  # fmt: skip


def _line(custom_id: str, response: dict[str, Any] | None, error: dict[str, Any] | None) -> bytes:
    one = {"id": "batch_req_" + uuid.uuid4().hex[:20], "custom_id": custom_id, "response": response, "error": error}
    return (json.dumps(one) + "\n").encode()


def finish_lines(
    lines: list[InputLine], endpoint: str, end_as: str, *, failed_lines: int, done_lines: int | None, model_suffix: str
) -> tuple[bytes, bytes, dict[str, int]]:
    """The output file, the error file and the request counts of a batch that ends ``end_as``.

    ``completed``: every line answers, but the last ``failed_lines`` with a 400. ``expired`` and
    ``cancelled``: the first ``done_lines`` (default: half) answer, the rest fail with
    ``batch_expired`` / ``batch_cancelled`` and no response.
    """
    total = len(lines)
    if end_as == "completed":
        answered = total - min(failed_lines, total)
    else:
        answered = min(total // 2 if done_lines is None else max(done_lines, 0), total)
    output, errors = bytearray(), bytearray()
    for index, (custom_id, body) in enumerate(lines):
        if index < answered:
            answer = _response_body(body, endpoint, model_suffix)
            output += _line(custom_id, {"status_code": 200, "request_id": uuid.uuid4().hex, "body": answer}, None)
        elif end_as == "completed":
            failure = {"message": "Invalid request", "type": "invalid_request_error", "param": None, "code": None}
            refused = {"status_code": 400, "request_id": uuid.uuid4().hex, "body": {"error": failure}}
            errors += _line(custom_id, refused, None)
        else:
            code = "batch_expired" if end_as == "expired" else "batch_cancelled"
            errors += _line(custom_id, None, {"code": code, "message": f"This request was not executed ({code})."})
    counts = {"total": total, "completed": answered, "failed": total - answered}
    return bytes(output), bytes(errors), counts


def newest_first(batches: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    """Batches as the API lists them: by creation time, newest first (the later of a tie first)."""
    return [b for _, b in sorted(enumerate(batches), key=lambda pair: (pair[1]["created_at"], pair[0]), reverse=True)]


def metadata_problem(metadata: Any) -> str | None:
    if not isinstance(metadata, dict) or len(metadata) > 16:
        return "metadata: at most 16 key-value pairs"
    for key, value in metadata.items():
        if not isinstance(key, str) or not 0 < len(key) <= 64:
            return f"metadata: key {key!r:.80} must be a string of 1 to 64 characters"
        if not isinstance(value, str) or len(value) > 512:
            return f"metadata[{key!r}]: the value must be a string of at most 512 characters"
    return None


def faulty_page(page: dict[str, Any], before: list[dict[str, Any]], fault: str) -> tuple[int, Any]:
    """The page as a faulty listing answers it."""
    if fault in ("500", "503"):
        return int(fault), error_body(int(fault), "The server had an error while processing your request.")
    if fault == "foreign_404":
        return 404, {"detail": "Not Found"}
    if fault == "malformed":
        return 200, {"object": "list", "data": {"batches": page["data"]}, "has_more": "maybe"}
    bad = copy.deepcopy(page)
    data = bad["data"]
    if fault == "out_of_order":
        data.reverse()  # oldest first: the page's own order is broken
        bad.update(first_id=data[0]["id"] if data else None, last_id=data[-1]["id"] if data else None)
    elif fault == "repeat":
        data = bad["data"] = [public(b) for b in before] or data  # the previous page again: the cursor ignored
        bad.update(first_id=data[0]["id"] if data else None, last_id=data[-1]["id"] if data else None)
    elif data and fault == "created_at_inf":
        data[-1]["created_at"] = INF
    elif data and fault == "created_at_text":
        data[-1]["created_at"] = "yesterday"
    elif data and fault == "metadata_not_text":
        data[-1]["metadata"] = {"aij_token": 7}
    return 200, bad
