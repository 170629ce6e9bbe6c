"""Building blocks for a local double of a paid JSON API, as the example adapters' servers use them.

An adapter author who tests against a double of their provider's API takes these: `ApiSwitches`
(faults and behaviours switched at run time through ``POST /_admin/config``); `json_answer`,
`credential_echo`, `hold`, `drop_connection` and `with_drops` for a Starlette app's answers and
faults; `UvicornServer`/`BackgroundServer` to serve it on a thread of the test process; and
`serve_until_terminated` for a ``python -m`` entry point.
"""

from __future__ import annotations

from ._api_switches import ApiSwitches, credential_echo, drop_connection, hold, json_answer, with_drops
from ._background import BackgroundServer, UvicornServer, serve_until_terminated

__all__ = [
    "ApiSwitches",
    "BackgroundServer",
    "UvicornServer",
    "credential_echo",
    "drop_connection",
    "hold",
    "json_answer",
    "serve_until_terminated",
    "with_drops",
]
