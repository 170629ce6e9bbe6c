"""The conformance kit's fault proxy: real HTTP/1.1 relayed between real clients and a real server.

An adapter under test talks to the proxy as to its API, with httpx, urllib or requests, so the proxy
must relay keep-alive connections and chunked bodies (both ways) faithfully, and each fault must be
what a client really meets: a connection closed or reset after the API got the request, an answer
held back, an injected status that the API did (5xx, 408, 409) or did not (4xx, 429) process.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
import requests

from airflow_idempotent_jobs.testing.fault_proxy import Fault, FaultProxy, refusing_url
from tests.paid.background_server import BackgroundServer


class EchoServer(BackgroundServer):
    """Answers every request with what it received; ``/chunked`` answers chunked, ``/close`` until close."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        super().__init__(self._handler())

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        echo = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                seen = {
                    "method": self.command,
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": self.rfile.read(length).decode(),
                }
                with echo._lock:
                    echo.received.append(seen)
                raw = json.dumps(seen).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Upstream", "echo")
                if self.path == "/chunked":
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for start in range(0, len(raw), 7):
                        piece = raw[start : start + 7]
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                elif self.path == "/close":
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(raw)
                    self.close_connection = True
                else:
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

        return Handler


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    with EchoServer() as server:
        yield server


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[FaultProxy]:
    with FaultProxy(echo.url, hold_seconds=3.0) as running:
        yield running


# -- relaying ----------------------------------------------------------------------------------------
def test_httpx_keep_alive_requests_share_one_client_connection(proxy: FaultProxy, echo: EchoServer) -> None:
    with httpx.Client(base_url=proxy.url) as client:
        first = client.post("/a?x=1", json={"n": 1}, headers={"X-Mine": "kept"})
        second = client.get("/b")
    assert first.status_code == second.status_code == 200
    assert first.json()["body"] == '{"n":1}' and first.json()["path"] == "/a?x=1"
    assert first.json()["headers"]["x-mine"] == "kept"
    assert first.headers["x-upstream"] == "echo"
    seen = proxy.exchanges()
    assert [(e.method, e.target) for e in seen] == [("POST", "/a?x=1"), ("GET", "/b")]
    assert seen[0].connection == seen[1].connection, "httpx reused its connection through the proxy"
    assert all(e.forwarded and e.delivered and e.upstream_status == 200 for e in seen)
    assert len(echo.received) == 2


def test_the_record_of_an_answer_is_complete_once_the_client_has_read_it(proxy: FaultProxy) -> None:
    # The kit judges "recovered" by whether an answer of the API reached the adapter: the proxy
    # marks that after its write, so a client can hold the answer before the mark. Reading the
    # record must wait for the request's handling to end, or a fast client is judged on half of it.
    with httpx.Client(base_url=proxy.url) as client:
        for attempt in range(200):
            mark = proxy.mark()
            assert client.get(f"/n/{attempt}").status_code == 200
            [seen] = proxy.exchanges(mark)
            assert seen.delivered, f"request {attempt}: answered, but not yet recorded as delivered"


def test_a_chunked_request_body_reaches_the_api_whole(proxy: FaultProxy, echo: EchoServer) -> None:
    def pieces() -> Iterator[bytes]:
        yield b'{"prompt": '
        yield b'"in pieces"}'

    with httpx.Client(base_url=proxy.url) as client:
        answer = client.post("/jobs", content=pieces())
    assert answer.status_code == 200
    assert echo.received[0]["body"] == '{"prompt": "in pieces"}'
    assert "transfer-encoding" not in echo.received[0]["headers"]


@pytest.mark.parametrize("path", ["/chunked", "/close"])
def test_chunked_and_until_close_answers_reach_every_client_whole(proxy: FaultProxy, path: str) -> None:
    with httpx.Client(base_url=proxy.url) as client:
        assert client.get(path).json()["path"] == path
        assert client.get(path).json()["path"] == path  # the client connection survives both framings
    with urllib.request.urlopen(proxy.url + path, timeout=5) as answer:
        assert json.loads(answer.read())["path"] == path
    with requests.Session() as session:
        assert session.get(proxy.url + path, timeout=5).json()["path"] == path


def test_the_host_header_names_the_api_and_hop_by_hop_headers_stay_behind(proxy: FaultProxy, echo: EchoServer) -> None:
    with httpx.Client(base_url=proxy.url) as client:
        client.get("/h", headers={"Connection": "keep-alive, X-Hop", "X-Hop": "no", "Keep-Alive": "timeout=5"})
    headers = echo.received[0]["headers"]
    assert headers["host"] == echo.url.removeprefix("http://")
    assert "x-hop" not in headers and "keep-alive" not in headers


def test_a_base_url_keeps_the_apis_path_prefix(echo: EchoServer) -> None:
    with FaultProxy(echo.url + "/api/v2") as proxy:
        assert proxy.base_url == proxy.url + "/api/v2"
        assert httpx.get(proxy.base_url + "/jobs").json()["path"] == "/api/v2/jobs"


# -- faults ------------------------------------------------------------------------------------------
def test_a_drop_closes_the_connection_after_the_api_answered(proxy: FaultProxy, echo: EchoServer) -> None:
    proxy.arm(Fault.drop(), lambda method, path: method == "POST")
    with httpx.Client(base_url=proxy.url) as client:
        assert client.get("/free").status_code == 200  # not matched: relayed
        with pytest.raises(httpx.RemoteProtocolError):
            client.post("/paid", json={})
        assert client.post("/paid", json={}).status_code == 200  # a fault fires once
    lost = proxy.exchanges()[1]
    assert (lost.fault, lost.forwarded, lost.upstream_status, lost.delivered) == ("drop", True, 200, False)
    assert b'"/paid"' in lost.upstream_body
    assert [r["path"] for r in echo.received] == ["/free", "/paid", "/paid"]


def test_stdlib_clients_see_a_drop_as_a_remote_disconnect(proxy: FaultProxy) -> None:
    proxy.arm(Fault.drop())
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
    conn.request("POST", "/paid", body=b"{}")
    with pytest.raises(http.client.RemoteDisconnected):
        conn.getresponse()
    conn.close()


def test_a_reset_is_a_connection_reset(proxy: FaultProxy) -> None:
    proxy.arm(Fault.reset())
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
    conn.request("POST", "/paid", body=b"{}")
    with pytest.raises(ConnectionResetError) as caught:
        conn.getresponse()
    assert not isinstance(caught.value, http.client.RemoteDisconnected), "an RST, not a clean close"
    conn.close()
    assert proxy.exchanges()[0].forwarded


def test_a_held_answer_outlasts_the_read_timeout_and_the_proxy_notices_the_client_leaving(proxy: FaultProxy) -> None:
    proxy.arm(Fault.hold())
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(proxy.url + "/paid", json={}, timeout=httpx.Timeout(0.3))
    assert time.monotonic() - started < 2.0
    held = proxy.exchanges()[0]
    assert held.forwarded and held.upstream_status == 200
    deadline = time.monotonic() + 3.0
    while held.client_gave_up is not True and time.monotonic() < deadline:
        time.sleep(0.02)
    assert held.client_gave_up is True and not held.delivered


def test_a_client_that_waits_longer_than_the_hold_gets_the_answer_late(echo: EchoServer) -> None:
    with FaultProxy(echo.url, hold_seconds=0.3) as proxy:
        proxy.arm(Fault.hold())
        assert httpx.get(proxy.url + "/late", timeout=5).json()["path"] == "/late"
        assert proxy.exchanges()[0].delivered


@pytest.mark.parametrize(("status", "forwarded"), [(500, True), (503, True), (408, True), (409, True)])
def test_an_injected_status_the_api_may_have_processed_is_sent_after_forwarding(
    proxy: FaultProxy, echo: EchoServer, status: int, forwarded: bool
) -> None:
    proxy.arm(Fault.answer(status))
    answer = httpx.post(proxy.url + "/paid", json={})
    assert answer.status_code == status and "conformance" in answer.text
    assert len(echo.received) == 1 and proxy.exchanges()[0].forwarded


@pytest.mark.parametrize("status", [400, 401, 422, 429])
def test_an_injected_refusal_never_reaches_the_api(proxy: FaultProxy, echo: EchoServer, status: int) -> None:
    proxy.arm(Fault.answer(status))
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(urllib.request.Request(proxy.url + "/paid", data=b"{}", method="POST"), timeout=5)
    assert caught.value.code == status
    assert echo.received == [] and not proxy.exchanges()[0].forwarded


def test_an_answer_fault_carries_the_body_and_content_type_given(proxy: FaultProxy) -> None:
    proxy.arm(Fault.answer(404, body=b"<h1>Not Found</h1>", content_type="text/html"))
    answer = httpx.get(proxy.url + "/jobs?token=t")
    assert (answer.status_code, answer.headers["content-type"], answer.text) == (404, "text/html", "<h1>Not Found</h1>")


def test_a_refusing_url_refuses_connections() -> None:
    with refusing_url() as url, pytest.raises(httpx.ConnectError):
        httpx.get(url + "/jobs", timeout=2)


def test_an_unreachable_api_is_a_502_from_the_proxy_and_recorded() -> None:
    with refusing_url() as dead, FaultProxy(dead) as proxy:
        assert httpx.get(proxy.url + "/x").status_code == 502
        assert proxy.exchanges()[0].upstream_error


def test_stop_releases_a_held_answer_and_closes_listening(echo: EchoServer) -> None:
    proxy = FaultProxy(echo.url, hold_seconds=60.0).start()
    proxy.arm(Fault.hold())
    caught: list[BaseException] = []

    def call() -> None:
        try:
            httpx.get(proxy.url + "/held", timeout=30)
        except httpx.HTTPError as exc:
            caught.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.3)
    started = time.monotonic()
    proxy.stop()
    caller.join(timeout=10)
    assert not caller.is_alive() and time.monotonic() - started < 5.0
    assert len(caught) == 1, "the held client's connection was closed, not answered"
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", proxy.port), timeout=1):
        pass
