"""Every form in which a provider credential could leak, and a finder for them in any text.

The test token mixes characters that URL, JSON, HTML and repr escaping each change, around one
long alphanumeric core that none of them changes: whatever escaping a leak went through, the core
(or one of the base64 forms) still shows.
"""

from __future__ import annotations

import base64
import html
import json
from urllib.parse import quote, quote_plus

#: A credential whose escaped forms all differ from the bare one.
TOKEN = 'tok/S3cr3tCore4Leaks+echo="q"&z%41'
#: A second, wrong credential (its 401 answer echoes it).
WRONG = "wrong/Wr0ngCoreSecret+x=1"


def token_forms(token: str) -> dict[str, str]:
    """Name -> text of each form a server or library might show the token in."""
    raw = token.encode()
    forms = {
        "bare": token,
        "header": f"Bearer {token}",
        "url": quote(token, safe=""),
        "url_path": quote(token),
        "url_plus": quote_plus(token),
        "json": json.dumps(token)[1:-1],
        "html": html.escape(token),
        "repr": repr(token)[1:-1],
        "b64": base64.b64encode(raw).decode(),
        "b64url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "b64_header": base64.b64encode(f"Bearer {token}".encode()).decode(),
    }
    cores = [run for run in _alnum_runs(token) if len(run) >= 8]
    forms.update({f"core{i}": run for i, run in enumerate(cores)})
    return forms


def leaks(text: str, *tokens: str) -> list[str]:
    """The names of the forms of ``tokens`` found in ``text`` (empty: clean)."""
    found = []
    for token in tokens or (TOKEN, WRONG):
        found += [f"{token[:4]}..:{name}" for name, form in token_forms(token).items() if form in text]
    return found


def _alnum_runs(text: str) -> list[str]:
    runs, current = [], ""
    for char in text:
        if char.isalnum():
            current += char
        else:
            runs.append(current)
            current = ""
    return [*runs, current]
