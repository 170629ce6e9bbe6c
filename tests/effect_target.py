"""The target an effect acted on (a publishing API, say), as a real HTTP server on a thread of the test.

``GET /posts/<token>`` (or any path with ``?token=<token>``) answers what the test set for that
token (`EffectTarget.answer`), else the target's "no such post": 404 with a JSON body. A request
without the expected credential is 401, echoing the header it got (a server that echoes secrets).
Every request is recorded, so a test can say that nothing was sent.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.paid.background_server import BackgroundServer

#: The credential the target expects, as the CLI reads it from $IDEMPOTENT_JOBS_PROVIDER_TOKEN.
TOKEN = "tgt-7f3a9c21e5d04b6a"
#: Written into an answer's body in place of ``{auth}``: the Authorization header as received.
ECHO = "{auth}"


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str = "application/json"
    location: str | None = None


def json_answer(status: int, data: Any) -> Answer:
    return Answer(status, json.dumps(data).encode())


NO_SUCH_POST = json_answer(404, {"error": "no such post"})


class EffectTarget(BackgroundServer):
    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        #: Every request: path (as sent, still quoted), token (unquoted), Authorization header.
        self.seen: list[dict[str, str | None]] = []
        self._lock = threading.Lock()
        super().__init__(self._handler())

    def answer(self, token: str, answer: Answer) -> None:
        with self._lock:
            self.answers[token] = answer

    def requests(self) -> list[dict[str, str | None]]:
        with self._lock:
            return list(self.seen)

    def _reply(self, path: str, auth: str | None) -> Answer:
        parts = urlsplit(path)
        query = parse_qs(parts.query)
        token = query["token"][0] if "token" in query else unquote(parts.path.rsplit("/", 1)[-1])
        with self._lock:
            self.seen.append({"path": path, "token": token, "auth": auth})
            if auth != f"Bearer {TOKEN}":
                return json_answer(401, {"error": f"credential {auth} is not valid"})
            found = self.answers.get(token, NO_SUCH_POST)
        return Answer(found.status, found.body.replace(ECHO.encode(), (auth or "").encode()), found.content_type,
                      found.location)  # fmt: skip

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                reply = target._reply(self.path, self.headers.get("Authorization"))
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                if reply.location:
                    self.send_header("Location", reply.location)
                self.end_headers()
                self.wfile.write(reply.body)

        return Handler
