"""Keep a provider credential out of every text we produce, in any form a server may echo it.

APIs echo what they were sent (``401 {"error": "token X is not valid"}``), and the echo reaches us
escaped the way the server wrote it: URL-encoded, JSON-escaped, HTML-escaped, base64. So a
credential is redacted in each of those forms, and, as a net for escapings not listed, every run
of 8 or more letters and digits of it that holds a digit (escaping rewrites punctuation, never
letters or digits).
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import quote, quote_plus

__all__ = ["REDACTED", "Redactor", "secret_forms"]

REDACTED: Final = "<redacted>"
#: Shorter forms are not redacted on their own: a 1-character test token would eat every "x" of a
#: message (it stays redacted inside the longer forms, such as the whole header value).
MIN_FORM: Final = 6
#: Alphanumeric runs of a secret this long, with a digit in them, are redacted wherever they appear
#: (a digit keeps plain words such as "Provider" in a made-up token from being redacted in prose).
MIN_RUN: Final = 8


def secret_forms(value: str) -> tuple[str, ...]:
    """The texts that reveal ``value`` (an auth header value such as ``Bearer X``), longest first.

    The whole value and its credential part (after the scheme), each as sent, URL-encoded,
    JSON-escaped, HTML-escaped, as a Python repr and in base64; for ``Basic``, the decoded
    ``user:password`` and the password; and the credential's long alphanumeric runs with a digit.
    Forms shorter than `MIN_FORM` are left out.
    """
    if not value:
        return ()
    bases = [value]
    scheme, _, credential = value.partition(" ")
    credential = credential.strip()
    if credential:
        bases.append(credential)
        if scheme.lower() == "basic":
            bases += _basic_parts(credential)
    forms: set[str] = set()
    for base in bases:
        forms.update(_escapings(base))
    for base in bases[1:] or bases:  # the runs of the credential, not of the scheme's name
        forms.update(run for run in re.findall(r"[^\W_]+", base) if len(run) >= MIN_RUN and _has_digit(run))
    return tuple(sorted((form for form in forms if len(form) >= MIN_FORM), key=lambda form: (-len(form), form)))


def _has_digit(text: str) -> bool:
    return any(char.isdigit() for char in text)


def _escapings(text: str) -> Iterable[str]:
    raw = text.encode("utf-8", "surrogatepass")
    yield text
    yield quote(text, safe="")
    yield quote(text)
    yield quote_plus(text)
    yield json.dumps(text)[1:-1]
    yield json.dumps(text, ensure_ascii=False)[1:-1]
    yield html.escape(text)
    yield html.escape(text, quote=False)
    yield repr(text)[1:-1]
    yield repr(raw)[2:-1]
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        yield encoded.decode()
        yield encoded.decode().rstrip("=")


def _basic_parts(credential: str) -> list[str]:
    try:
        decoded = base64.b64decode(credential, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return []
    _, _, password = decoded.partition(":")
    return [decoded, password] if password else [decoded]


class Redactor:
    """Replaces every form of the given secrets; a Redactor without secrets returns text unchanged."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = sorted({form for secret in secrets for form in secret_forms(secret)}, key=lambda f: (-len(f), f))
        self.forms: tuple[str, ...] = tuple(forms)
        # Case-insensitive: a server may upper-case percent escapes or the whole echo.
        self._pattern = re.compile("|".join(map(re.escape, forms)), re.IGNORECASE) if forms else None

    def text(self, text: str) -> str:
        return self._pattern.sub(REDACTED, text) if self._pattern is not None else text

    def json(self, value: Any) -> Any:
        """``value`` (parsed JSON) with every string in it, keys included, redacted."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.json(item) for item in value]
        if isinstance(value, dict):
            return {self.text(str(key)): self.json(item) for key, item in value.items()}
        return value
