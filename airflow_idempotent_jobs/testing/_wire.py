"""What the fault proxy keeps to one connection: the hop-by-hop headers it never relays, and its body limit."""

from __future__ import annotations

from typing import Any, Final

__all__ = ["HOP_BY_HOP", "MAX_BODY", "end_to_end"]

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


def end_to_end(items: Any, connection_header: str) -> list[tuple[str, str]]:
    """The request's headers without hop-by-hop ones (and those its Connection header names)."""
    named = {token.strip().lower() for token in connection_header.split(",") if token.strip()}
    return [(name, value) for name, value in items if name.lower() not in HOP_BY_HOP | named]
