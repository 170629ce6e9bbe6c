"""An HTTP server on a thread of this process, and the command-line loop that serves one until SIGTERM.

The local provider server (`server`), the conformance kit's `fault_proxy` and the example APIs
(``example_adapters``) all run this way, so that a test, the demo and ``python -m ...`` start and
stop them alike.
"""

from __future__ import annotations

import signal
import socketserver
import sys
import threading
from http.server import ThreadingHTTPServer
from typing import TypeVar

__all__ = ["BackgroundServer", "ThreadedServer", "serve_until_terminated"]

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


class BackgroundServer:
    """Serves ``server`` on a thread: ``with Subclass(...) as srv: srv.url``."""

    def __init__(self, server: ThreadedServer, host: str) -> None:
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
