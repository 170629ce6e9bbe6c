"""A fault-injecting HTTP/1.1 proxy on 127.0.0.1, placed between an adapter and its API.

The conformance kit points an adapter at `FaultProxy.base_url` and arms one `Fault` at a time for
the next request that matches; every other request is relayed as it is. The proxy relays real
HTTP/1.1: keep-alive client connections, chunked or length-framed bodies both ways (it re-frames
each body with a Content-Length, as an intermediary may), ``Expect: 100-continue``; each request
goes to the API on a fresh connection (`http.client`). h11 frames the client side; the faults act on
the socket under it (closed, reset with SO_LINGER 0, an answer held back), which no HTTP library
expresses. It records every exchange (`Exchange`): whether the API got the request, what it
answered, and whether the client got that answer. This record is the truth the kit judges an
adapter's claims against ("certainly not sent", "nothing was created").

A fault decides whether the API sees the request first (`Fault.forwards`): a lost or late answer,
a 5xx, 408 or 409 come after the API processed the call (the worst case: the job exists), while a
429 or another 4xx is answered instead of the API (an API that answers them created nothing).
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import select
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import h11

from ._background import BackgroundServer, ThreadedServer
from ._wire import HOP_BY_HOP, MAX_BODY, end_to_end

__all__ = ["Exchange", "Fault", "FaultProxy", "RouteMatcher", "refusing_url"]

#: (method, path without query) -> whether an armed fault applies to this request.
RouteMatcher = Callable[[str, str], bool]
Action = Literal["drop", "reset", "hold", "answer"]

#: Client errors an API answers for a request it may have processed: they never prove "not created".
_MAYBE_PROCESSED_4XX: Final = frozenset({408, 409})
#: Characters of a JSON fault body shown in its description.
_SHOWN: Final = 72
#: How often a held answer checks that its client is still there.
_HOLD_TICK: Final = 0.05
#: An idle keep-alive connection ends eventually.
_IDLE_TIMEOUT: Final = 120.0
#: The most a request's line and headers may take, and one read from a client.
_MAX_HEAD: Final = 256 * 1024
_RECV: Final = 64 * 1024
#: The methods relayed; any other is answered 501.
_METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Fault:
    """One thing that goes wrong with one request; build with `drop`, `reset`, `hold` or `answer`."""

    action: Action
    #: The status an ``answer`` fault sends: 400..599, or 200..299 for a success answer whose body is
    #: not the API's (a gateway's page, a captive portal): it says nothing about the job.
    status: int | None = None
    #: The body an ``answer`` fault sends; None: a small JSON error naming the kit.
    body: bytes | None = None
    content_type: str = "application/json"

    def __post_init__(self) -> None:
        if self.action == "answer" and (
            self.status is None or not (200 <= self.status <= 299 or 400 <= self.status <= 599)
        ):
            raise ValueError(f"an answer fault needs a status from 200 to 299 or 400 to 599, not {self.status!r}")

    @classmethod
    def drop(cls) -> Fault:
        """The API gets the request and answers; the client's connection is closed without an answer."""
        return cls("drop")

    @classmethod
    def reset(cls) -> Fault:
        """As `drop`, but the connection is reset (TCP RST) instead of closed."""
        return cls("reset")

    @classmethod
    def hold(cls) -> Fault:
        """The API answers; the proxy holds the answer for ``hold_seconds`` (past the client's read timeout)."""
        return cls("hold")

    @classmethod
    def answer(cls, status: int, body: bytes | None = None, content_type: str = "application/json") -> Fault:
        """The client gets ``status``; the API sees the request first unless it is a 429 or a refusal.

        A 2xx status stands for a success answer the client cannot read (give ``body``): the API
        got the request and answered, and the client got another body instead.
        """
        return cls("answer", status, body, content_type)

    @property
    def name(self) -> str:
        return f"HTTP {self.status}" if self.action == "answer" else self.action

    @property
    def forwards(self) -> bool:
        """Whether the API gets the request before the fault: always, except for a 429 or a refusing 4xx."""
        if self.action != "answer" or self.status is None:
            return True
        return not (400 <= self.status < 500 and self.status not in _MAYBE_PROCESSED_4XX)

    @property
    def description(self) -> str:
        if self.action == "drop":
            return "connection closed after the API got the request, without an answer"
        if self.action == "reset":
            return "connection reset after the API got the request"
        if self.action == "hold":
            return "answer held back past the read timeout (the API got the request)"
        where = "after the API got the request" if self.forwards else "instead of the API (it never got the request)"
        shown = self.shown_body()
        if self.unreadable:
            if shown:
                return f"HTTP {self.status} {shown}, which is not the API's answer, {where}"
            return f"HTTP {self.status} with a body that is not the API's answer, {where}"
        return f"HTTP {self.status}{' ' + shown if shown else ''} answered {where}"

    def shown_body(self) -> str:
        """A given JSON body on one line, cut short, for the check's name (two faults, two names); else ''."""
        if self.body is None or "json" not in self.content_type.lower():
            return ""
        text = " ".join(self.body.decode("utf-8", "replace").split())
        return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."

    @property
    def unreadable(self) -> bool:
        """A success status over a body that is not the API's answer: it proves nothing about the job."""
        return self.action == "answer" and self.status is not None and 200 <= self.status <= 299

    def payload(self) -> bytes:
        if self.body is not None:
            return self.body
        message = f"HTTP {self.status} injected by the conformance kit's proxy"
        return json.dumps({"error": {"code": "injected_by_conformance_kit", "message": message}}).encode()


@dataclass
class Exchange:
    """One request through the proxy: what the API got and answered, and what the client got."""

    #: Order of arrival at the proxy.
    seq: int
    #: The client connection it came on (keep-alive requests share one).
    connection: int
    method: str
    #: Path and query, as sent.
    target: str
    #: The fault applied to it (`Fault.name`), or None.
    fault: str | None = None
    #: The API received the request.
    forwarded: bool = False
    upstream_status: int | None = None
    #: The API's answer body (the first 1 MiB).
    upstream_body: bytes = b""
    #: Why the API could not be reached or read (the client got a 502 from the proxy).
    upstream_error: str | None = None
    #: The client was sent the API's own answer.
    delivered: bool = False
    #: A held answer's client closed its connection before the hold ended.
    client_gave_up: bool | None = None
    #: The proxy is done with it: the fields above are final.
    finished: bool = False

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def route(self) -> str:
        return f"{self.method} {self.path}"


class FaultProxy(BackgroundServer):
    """``with FaultProxy("http://127.0.0.1:8080") as proxy: proxy.arm(Fault.drop()); ... proxy.exchanges()``."""

    def __init__(
        self, upstream: str, *, host: str = "127.0.0.1", hold_seconds: float = 5.0, upstream_timeout: float = 30.0
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ValueError(f"the API's URL must be http(s)://host[:port][/prefix], not {upstream!r}")
        self.upstream = upstream
        self.hold_seconds = hold_seconds
        self.upstream_timeout = upstream_timeout
        self._https = parts.scheme == "https"
        self._upstream_host = parts.hostname
        self._upstream_port = parts.port or (443 if self._https else 80)
        self._upstream_netloc = parts.netloc
        self._prefix = parts.path.rstrip("/")
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._log: list[Exchange] = []
        self._armed: tuple[Fault, RouteMatcher] | None = None
        super().__init__(_ProxyServer((host, 0), self), host)

    @property
    def base_url(self) -> str:
        """What to give the adapter instead of the API's URL: the proxy's origin and the API's path prefix."""
        return self.url + self._prefix

    # -- faults and the record -------------------------------------------------------------------
    def arm(self, fault: Fault, when: RouteMatcher | None = None) -> None:
        """Apply ``fault`` to the next request ``when`` accepts (default: the next request), once."""
        with self._lock:
            self._armed = (fault, when or (lambda method, path: True))

    def disarm(self) -> Fault | None:
        """Withdraw the armed fault; returns it if it never fired, else None."""
        with self._lock:
            armed, self._armed = self._armed, None
        return armed[0] if armed else None

    def exchanges(self, since: int = 0, *, settle: float = 1.0) -> list[Exchange]:
        """The exchanges from the ``since``-th on (`mark` gives the current count).

        Waits up to ``settle`` seconds for those in progress to finish: the proxy records that an
        answer was delivered after writing it, so a fast client holds it before the record says so.
        """
        deadline = time.monotonic() + settle
        with self._settled:
            while not all(e.finished for e in self._log[since:]):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._settled.wait(remaining)
            return self._log[since:]

    def _finish(self, exchange: Exchange) -> None:
        with self._settled:
            exchange.finished = True
            self._settled.notify_all()

    def mark(self) -> int:
        with self._lock:
            return len(self._log)

    def _begin(self, connection: int, method: str, target: str) -> tuple[Exchange, Fault | None]:
        with self._lock:
            exchange = Exchange(seq=len(self._log), connection=connection, method=method, target=target)
            self._log.append(exchange)
            fault = None
            if self._armed is not None and self._armed[1](method, exchange.path):
                fault, self._armed = self._armed[0], None
                exchange.fault = fault.name
            return exchange, fault

    # -- the API side ----------------------------------------------------------------------------
    def _forward(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """One request to the API on its own connection; its status, reason, headers and whole body."""
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._upstream_host, self._upstream_port, timeout=self.upstream_timeout)
        try:
            conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", self._upstream_netloc)
            for name, value in headers:
                conn.putheader(name, value)
            if body or method in ("POST", "PUT", "PATCH"):
                conn.putheader("Content-Length", str(len(body)))
            conn.putheader("Connection", "close")
            conn.endheaders(body or None)
            response = conn.getresponse()
            return response.status, response.reason, response.getheaders(), response.read()
        finally:
            conn.close()


class _ProxyServer(ThreadedServer):
    def __init__(self, address: tuple[str, int], proxy: FaultProxy) -> None:
        super().__init__(address, _Handler)
        self.proxy = proxy
        self.connection_ids = itertools.count(1)
        self._clients: set[socket.socket] = set()
        self._resets: set[socket.socket] = set()
        self._clients_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._clients_lock:
            self._clients.add(request)
        super().process_request(request, client_address)

    def reset_on_close(self, request: socket.socket) -> None:
        with self._clients_lock:
            self._resets.add(request)

    def shutdown_request(self, request: Any) -> None:
        with self._clients_lock:
            self._clients.discard(request)
            reset = request in self._resets
            self._resets.discard(request)
        if reset:
            # SO_LINGER 0: close() sends an RST; a shutdown(SHUT_WR) first would send a clean FIN.
            with contextlib.suppress(OSError):
                request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            request.close()
            return
        super().shutdown_request(request)

    def close_clients(self) -> None:
        """End idle keep-alive connections (a held answer's connection closes with them)."""
        with self._clients_lock:
            clients = list(self._clients)
        for client in clients:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)


class _Handler(socketserver.BaseRequestHandler):
    """One client connection, framed by h11: requests in order (keep-alive, pipelined), each relayed or faulted."""

    server: _ProxyServer
    request: socket.socket

    def setup(self) -> None:
        # Small writes (a "100 Continue", an answer) go out at once, not after the client's
        # delayed ACK (Nagle's algorithm: some 40 ms a request).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.request.settimeout(_IDLE_TIMEOUT)
        self.connection_id = next(self.server.connection_ids)
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        self.method = ""

    def handle(self) -> None:
        while True:
            try:
                event = self._next_event()
            except h11.RemoteProtocolError as exc:
                self._refuse(exc.error_status_hint, "malformed request")
                return
            except OSError:
                return
            if not isinstance(event, h11.Request):
                return  # the client closed its connection between requests
            self.method = method = event.method.decode("ascii", "replace")
            if method not in _METHODS:
                self._refuse(501, f"unsupported method {method!r}")
                return
            if not self._relay(method, event) or self.h11.our_state is not h11.DONE:
                return
            try:
                self.h11.start_next_cycle()
            except h11.LocalProtocolError:
                return  # h11 says the connection must close (HTTP/1.0, Connection: close)

    def _next_event(self) -> Any:
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            if self.h11.they_are_waiting_for_100_continue:
                go_on = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
                self.request.sendall(self.h11.send(go_on) or b"")
            self.h11.receive_data(self.request.recv(_RECV))

    def _relay(self, method: str, request: h11.Request) -> bool:
        """Relay (or fault) one request; whether the client connection may carry another."""
        proxy = self.server.proxy
        exchange, fault = proxy._begin(self.connection_id, method, request.target.decode("latin-1"))
        try:
            return self._relay_one(proxy, exchange, fault, request)
        finally:
            proxy._finish(exchange)

    def _relay_one(self, proxy: FaultProxy, exchange: Exchange, fault: Fault | None, request: h11.Request) -> bool:
        method, target = exchange.method, exchange.target
        try:
            body = self._request_body(request)
        except (ValueError, OSError, h11.RemoteProtocolError):
            return False
        if fault is not None and not fault.forwards:
            return self._send(fault.status or 500, "", [("Content-Type", fault.content_type)], fault.payload())
        items = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in request.headers.raw_items()]
        connection = ", ".join(value for name, value in items if name.lower() == "connection")
        try:
            status, reason, answer_headers, answer = proxy._forward(method, target, end_to_end(items, connection), body)
        except (OSError, http.client.HTTPException) as exc:
            exchange.upstream_error = f"{type(exc).__name__}: {exc}"
            failed = b"conformance proxy: the API failed"
            return self._send(502, "Bad Gateway", [("Content-Type", "text/plain")], failed)
        exchange.forwarded, exchange.upstream_status, exchange.upstream_body = True, status, answer[: 1 << 20]
        if fault is None:
            exchange.delivered = self._send(status, reason, answer_headers, answer)
            return exchange.delivered
        if fault.action == "drop":
            return False
        if fault.action == "reset":
            self.server.reset_on_close(self.request)
            return False
        if fault.action == "hold":
            if self._client_left_within(proxy.hold_seconds):
                exchange.client_gave_up = True
                return False
            exchange.client_gave_up = False
            exchange.delivered = self._send(status, reason, answer_headers, answer)
            return exchange.delivered
        return self._send(fault.status or 500, "", [("Content-Type", fault.content_type)], fault.payload())

    def _request_body(self, request: h11.Request) -> bytes:
        """The whole body, however framed (h11 undoes chunking and drops trailers: it is re-framed)."""
        declared = next((value for name, value in request.headers if name == b"content-length"), b"0")
        if int(declared) > MAX_BODY:
            raise ValueError(f"request body of {int(declared)} bytes")
        parts: list[bytes] = []
        total = 0
        while True:
            event = self._next_event()
            if isinstance(event, h11.EndOfMessage):
                return b"".join(parts)
            if not isinstance(event, h11.Data):
                raise ValueError("the client closed the connection inside the body")
            total += len(event.data)
            if total > MAX_BODY:
                raise ValueError("request body too large")
            parts.append(bytes(event.data))

    def _client_left_within(self, seconds: float) -> bool:
        """Wait up to ``seconds``; True as soon as the client closes its connection (or the proxy stops)."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            if self.server.stopping.is_set():
                return True
            readable, _, _ = select.select([self.request], [], [], min(remaining, _HOLD_TICK))
            if readable:
                try:
                    if not self.request.recv(1, socket.MSG_PEEK):
                        return True
                except OSError:
                    return True
                time.sleep(min(remaining, _HOLD_TICK))  # a pipelined request waits its turn
        return self.server.stopping.is_set()

    def _send(self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes) -> bool:
        """Write one answer with a Content-Length; False if the client is gone."""
        kept = [(name, value) for name, value in headers if name.lower() not in HOP_BY_HOP]
        head_request = self.method == "HEAD"
        no_body = head_request or status in (204, 304)
        if head_request:
            kept += [(n, v) for n, v in headers if n.lower() == "content-length"][:1]
        elif not no_body:
            kept.append(("Content-Length", str(len(body))))
        try:
            data = self.h11.send(h11.Response(status_code=status, reason=_reason(status, reason), headers=kept)) or b""
            if not no_body and body:
                data += self.h11.send(h11.Data(data=body)) or b""
            data += self.h11.send(h11.EndOfMessage()) or b""
            self.request.sendall(data)
            return True
        except OSError:
            return False

    def _refuse(self, status: int, message: str) -> None:
        """Answer a request the proxy cannot relay (if h11 still lets it) and close the connection."""
        body = f"conformance proxy: {message}".encode()
        headers = [("Content-Type", "text/plain"), ("Content-Length", str(len(body))), ("Connection", "close")]
        with contextlib.suppress(OSError, h11.LocalProtocolError):
            data = self.h11.send(h11.Response(status_code=status, reason=_reason(status, ""), headers=headers)) or b""
            data += self.h11.send(h11.Data(data=body)) or b""
            self.request.sendall(data + (self.h11.send(h11.EndOfMessage()) or b""))


def _reason(status: int, given: str) -> bytes:
    if given:
        return given.encode("latin-1", "replace")
    try:
        return HTTPStatus(status).phrase.encode("latin-1")
    except ValueError:
        return b""


@contextlib.contextmanager
def refusing_url(host: str = "127.0.0.1") -> Iterator[str]:
    """A URL whose port refuses every connection (bound, never listening), for as long as the block runs."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, 0))
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        sock.close()
