"""HTTP/1.1 framing the fault proxy needs: which headers are hop-by-hop, and reading request bodies."""

from __future__ import annotations

from typing import Any, Final

__all__ = ["HOP_BY_HOP", "MAX_BODY", "end_to_end", "read_chunked", "read_exact"]

#: Headers that belong to one connection (RFC 9110 7.6.1), never relayed; the body is re-framed.
HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
        "content-length",
        "host",
    }
)
MAX_BODY: Final = 64 * 1024 * 1024
_MAX_LINE: Final = 65536


def end_to_end(items: Any, connection_header: str) -> list[tuple[str, str]]:
    """The request's headers without hop-by-hop ones (and those its Connection header names)."""
    named = {token.strip().lower() for token in connection_header.split(",") if token.strip()}
    return [(name, value) for name, value in items if name.lower() not in HOP_BY_HOP | named]


def read_exact(stream: Any, length: int) -> bytes:
    data = stream.read(length) if length else b""
    if len(data) != length:
        raise ValueError("the client closed the connection inside the body")
    return bytes(data)


def read_chunked(stream: Any) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        line = stream.readline(_MAX_LINE)
        if not line:
            raise ValueError("the client closed the connection inside a chunked body")
        size = int(line.split(b";", 1)[0].strip() or b"x", 16)
        if size == 0:
            while stream.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                pass  # trailers: dropped, the body is re-framed
            return b"".join(parts)
        total += size
        if total > MAX_BODY:
            raise ValueError("chunked request body too large")
        parts.append(read_exact(stream, size))
        stream.readline(_MAX_LINE)
