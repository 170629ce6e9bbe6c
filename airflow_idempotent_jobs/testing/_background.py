"""An HTTP server on a thread of this process, and the command-line loop that serves one until SIGTERM.

The local provider server (`server`) and the example APIs (``example_adapters``) are Starlette apps
served by uvicorn (`UvicornServer`); the conformance kit's `fault_proxy` is a socketserver
(`ThreadedServer`) because its faults act on the client's socket. All run as a `BackgroundServer`,
so that a test, the demo and ``python -m ...`` start and stop them alike.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import socketserver
import sys
import threading
from http.server import ThreadingHTTPServer
from typing import Any, Protocol, TypeVar

import uvicorn

__all__ = ["BackgroundServer", "Served", "ThreadedServer", "UvicornServer", "serve_until_terminated"]

S = TypeVar("S", bound="BackgroundServer")


class ThreadedServer(ThreadingHTTPServer):
    """One thread per connection, none of which may hold up `BackgroundServer.stop`."""

    daemon_threads = True
    block_on_close = False  # a held ("slow") answer or an idle keep-alive handler must not stall stop()

    def __init__(self, address: tuple[str, int], handler: type[socketserver.BaseRequestHandler]) -> None:
        super().__init__(address, handler)
        #: Set by `BackgroundServer.stop`: a handler holding an answer back waits on it, not a plain sleep.
        self.stopping = threading.Event()

    def close_clients(self) -> None:
        """End connections still open after the listener closed (nothing is tracked here)."""


class Served(Protocol):
    """What `BackgroundServer` runs: a socketserver's serving methods."""

    stopping: threading.Event
    server_address: Any

    def serve_forever(self, poll_interval: float = ...) -> None: ...
    def shutdown(self) -> None: ...
    def server_close(self) -> None: ...
    def close_clients(self) -> None: ...


class _Uvicorn(uvicorn.Server):
    async def main_loop(self) -> None:
        """uvicorn's loop (a tick every 0.1 s), looking at ``should_exit`` every 10 ms: tests stop many servers."""
        counter = 0
        while not await self.on_tick(counter):
            for _ in range(10):
                await asyncio.sleep(0.01)
                if self.should_exit:
                    break
            counter = (counter + 1) % 864000


class UvicornServer:
    """An ASGI app served by uvicorn on a socket bound here (its port is known before it serves)."""

    def __init__(self, address: tuple[str, int], app: Any, stopping: threading.Event | None = None) -> None:
        #: Set by `BackgroundServer.stop`: an answer held back (`_api_switches.hold`) ends on it.
        self.stopping = stopping or threading.Event()
        self._socket = socket.create_server(address)
        self.server_address = self._socket.getsockname()
        config = uvicorn.Config(
            app,
            http="h11",  # `abort_connection` closes h11's transport
            loop="asyncio",
            lifespan="off",
            log_config=None,  # the host process (pytest, Airflow) owns logging
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
        )
        self._uvicorn = _Uvicorn(config)
        self._serving = threading.Event()
        self._done = threading.Event()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._serving.set()
        try:
            self._uvicorn.run(sockets=[self._socket])
        finally:
            self._done.set()

    def shutdown(self) -> None:
        self._uvicorn.should_exit = True
        if self._serving.is_set():
            self._done.wait(timeout=10)

    def server_close(self) -> None:
        self._socket.close()

    def close_clients(self) -> None:
        """uvicorn closes its idle connections when it shuts down."""


class BackgroundServer:
    """Serves ``server`` on a thread: ``with Subclass(...) as srv: srv.url``."""

    def __init__(self, server: Served, host: str) -> None:
        self.host = host
        self._server = server
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The server's origin, ``http://127.0.0.1:<port>``."""
        return f"http://{self.host}:{self.port}"

    def start(self: S) -> S:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening, release held answers (their connections close) and end tracked connections."""
        self._server.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._server.close_clients()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self: S) -> S:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_until_terminated(server: BackgroundServer) -> int:
    """Start ``server``, print its URL as the first stdout line, serve until SIGTERM or Ctrl-C; exit code 0."""
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with server:
        sys.stdout.write(server.url + "\n")
        sys.stdout.flush()
        try:
            done.wait()
        except KeyboardInterrupt:
            pass
    return 0
