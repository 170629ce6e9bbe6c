"""Building blocks for a local double of a paid JSON API, as the example adapters' servers use them.

An adapter author who tests against a double of their provider's API takes these: `ApiSwitches`
(faults and behaviours switched at run time through ``POST /_admin/config``), `send_json` and
`credential_echo` for answers, `ThreadedServer`/`BackgroundServer` to serve it on a thread of the
test process, and `serve_until_terminated` for a ``python -m`` entry point.
"""

from __future__ import annotations

from ._api_switches import ApiSwitches, credential_echo, send_json
from ._background import BackgroundServer, ThreadedServer, serve_until_terminated

__all__ = [
    "ApiSwitches",
    "BackgroundServer",
    "ThreadedServer",
    "credential_echo",
    "send_json",
    "serve_until_terminated",
]
