"""How a local double of an AWS REST-JSON API answers, the way botocore reads it: a `Reply` per call,
errors as the ``x-amzn-ErrorType`` header with ``{"message"}`` (or S3's XML ``<Error>``), a SigV4
``Authorization`` header required but not checked (which key signed is counted), and the faults a
paid call may meet after the API made its job (the answer dropped, held, or a 5xx in its place).

Both Bedrock doubles answer through it (`bedrock_api`, `bedrock_control_api`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Final, Protocol
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._api_switches import drop_connection, hold, with_drops

__all__ = ["AwsDouble", "Reply", "aws_app", "aws_error", "iso", "parameters_digest", "s3_error", "when"]

#: The error type botocore reads for each HTTP code a double answers, unless the reply names another.
ERROR_TYPES: Final = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


@dataclass
class Reply:
    """One answer: JSON ``body``, or ``raw`` bytes of ``media_type`` (an S3 object, an XML error)."""

    code: int
    body: Any = None
    fault: str | None = None
    error_type: str | None = None
    raw: bytes | None = None
    media_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


class AwsDouble(Protocol):
    """What `aws_app` needs of a double: its lock, counters (``unsigned``, ``signed_by``: calls per access
    key id), switches and router."""

    lock: threading.Lock
    counters: dict[str, Any]

    @property
    def slow_seconds(self) -> float: ...

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Reply: ...

    def unsigned(self, path: str) -> Reply: ...


def aws_error(code: int, message: str, error_type: str | None = None) -> Reply:
    return Reply(code, {"message": message}, error_type=error_type or ERROR_TYPES.get(code, "ValidationException"))


def s3_error(code: int, error_code: str, message: str, resource: str) -> Reply:
    """S3's XML error document, which botocore's ``s3`` parser reads (``Error.Code``)."""
    text = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>'
        f"{escape(error_code)}</Code><Message>{escape(message)}</Message><Resource>{escape(resource)}</Resource>"
        f"<RequestId>{uuid.uuid4().hex[:16].upper()}</RequestId></Error>"
    )
    return Reply(code, raw=text.encode(), media_type="application/xml")


def iso(moment: float) -> str:
    return dt.datetime.fromtimestamp(moment, dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def when(values: list[str] | None) -> float | None:
    """A query's timestamp (botocore sends ISO 8601) as epoch seconds; ValueError when unreadable."""
    if not values:
        return None
    return dt.datetime.fromisoformat(values[-1].replace("Z", "+00:00")).timestamp()


def parameters_digest(body: dict[str, Any], token_field: str = "clientRequestToken") -> str:
    """What a repeated token must repeat: every field but the token, canonical."""
    rest = {k: v for k, v in body.items() if k != token_field}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _key_id(authorization: str) -> str:
    """The access key id a SigV4 ``Authorization`` header names (``Credential=<id>/...``); "" if none."""
    _, found, rest = authorization.partition("Credential=")
    return rest.split("/", 1)[0] if found else ""


def aws_app(api: AwsDouble, stopping: threading.Event) -> Any:
    """The double's Starlette app: every path to ``api.route`` under its lock, then the reply's fault."""

    async def endpoint(request: Request) -> Response:
        path = request.url.path
        body: Any = None
        if request.method == "POST":
            try:
                body = json.loads((await request.body()) or b"null")
            except ValueError:
                body = None
        authorization = request.headers.get("Authorization", "")
        signed = authorization.startswith("AWS4-HMAC-SHA256")
        with api.lock:
            if signed and (key_id := _key_id(authorization)):
                api.counters["signed_by"][key_id] = api.counters["signed_by"].get(key_id, 0) + 1
            if path.startswith("/_admin/") or signed:
                reply = api.route(request.method, path, parse_qs(request.url.query), body)
            else:
                api.counters["unsigned"] += 1
                reply = api.unsigned(path)
        if reply.fault == "drop_after_accept":
            await drop_connection(request)  # made; the client never hears of it
        elif reply.fault == "hang_after_accept":
            await hold(stopping, api.slow_seconds)
        elif reply.fault in ("500_after_accept", "503_after_accept"):
            code = int(reply.fault.split("_", 1)[0])
            reply = aws_error(code, f"HTTP {code} after the job was made")
        headers = {"x-amzn-RequestId": str(uuid.uuid4()), "x-amz-request-id": uuid.uuid4().hex[:16], **reply.headers}
        if reply.error_type is not None:
            headers["x-amzn-ErrorType"] = f"{reply.error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        content = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
        return Response(content, reply.code, headers, media_type=reply.media_type)

    return with_drops(Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST"])]))
