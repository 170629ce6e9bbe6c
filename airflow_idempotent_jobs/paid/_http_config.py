"""`HttpProviderConfig`: where a job API lives and how its JSON reads, every field checked.

A wrong value here costs money or hides a job: ``tokens_honoured="false"`` read as true resubmits
to a provider that ignores tokens; a lookup URL that is not the lookup endpoint reads "no job" and
pays again. So every field is checked at construction (`InvalidConfiguration`, naming the field and
never echoing a header value), and `from_dict` also reads the all-string values of a connection
URI: booleans from ``true/false/1/0`` only, numbers from their text, mappings from JSON text.
"""

from __future__ import annotations

import dataclasses
import math
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn
from urllib.parse import urlsplit

from .. import safe_json
from ..errors import InvalidConfiguration
from .provider import ProviderCapabilities, RemoteState

__all__ = ["DEFAULT_STATE_MAP", "NEVER_NO_JOB", "HttpProviderConfig", "valid_header_name"]

#: Provider state words understood out of the box; extend with ``state_map``.
DEFAULT_STATE_MAP: Final[Mapping[str, str]] = {
    "pending": "pending",
    "queued": "pending",
    "submitted": "pending",
    "running": "running",
    "in_progress": "running",
    "succeeded": "succeeded",
    "completed": "succeeded",
    "done": "succeeded",
    "failed": "failed",
    "error": "failed",
    "cancelled": "failed",
}
WHAT: Final = "provider config"
#: Headers `headers` may not set: ours (auth, idempotency) or the transport's.
_RESERVED_HEADERS: Final = frozenset({"authorization", "host", "content-length", "transfer-encoding", "connection"})
#: Statuses that can never prove "no job": they say the answer is unknown or the call was refused.
NEVER_NO_JOB: Final = frozenset({408, 409, 425, 429})
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NUMBER: Final = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_INTEGER: Final = re.compile(r"[+-]?\d{1,9}")
#: (lowest, highest) accepted for each number; beyond them a value is a typo, not a setting.
_RANGES: Final[Mapping[str, tuple[float, float]]] = {
    "connect_timeout": (0.001, 300.0),
    "read_timeout": (0.001, 3600.0),
    "backoff_initial": (0.0, 60.0),
    "backoff_max": (0.0, 600.0),
    "connect_retries": (0, 10),
}


@dataclass(frozen=True)
class HttpProviderConfig:
    """Where a job API lives and how its JSON reads; JSON-serialisable (no secrets) for triggers.

    Lookup (capability (b)) needs ``lookup_path``. A lookup proves "no job carries this token"
    only by the answer declared in ``lookup_no_job_status`` + ``lookup_no_job_path`` (+
    ``lookup_no_job_value``); any other answer without a job id (a 404 page of another server, an
    HTML error, a 200 without the fields, a redirect) leaves the submission unknown. Without a
    declared answer, "no job" can never be proven, and a retry never submits after a lookup.
    """

    #: ``http(s)://host[:port][/prefix]``: no credentials, query or fragment; paths are appended.
    base_url: str
    #: Path of the submit call (starts with ``/``; no placeholders).
    submit_path: str = "/jobs"
    submit_method: str = "POST"
    #: Status URL template: a path with ``{remote_ref}`` and no other placeholder.
    status_path: str = "/jobs/{remote_ref}"
    #: Header carrying the idempotency token (a non-empty header name), or None if the API has none.
    idempotency_header: str | None = "Idempotency-Key"
    #: The API returns the existing job for a repeated token: capability (a), with a header only.
    tokens_honoured: bool = True
    #: Lookup URL template with ``{token}`` and no other placeholder (capability (b)), or None.
    lookup_path: str | None = None
    #: Dotted JSON path of the job id in a lookup answer (default: ``ref_path``).
    lookup_ref_path: str | None = None
    #: The HTTP status of the lookup's "no job for this token" answer (e.g. 404, or 200).
    lookup_no_job_status: int | None = None
    #: Dotted JSON path, in that answer, of the field that says so ...
    lookup_no_job_path: str | None = None
    #: ... and the text it must hold (e.g. ``no_job``); None: it must be an empty list.
    lookup_no_job_value: str | None = None
    #: Dotted JSON paths (``data.id``, ``items.0.id``) in the submit/status answers.
    ref_path: str = "id"
    state_path: str = "state"
    cost_path: str | None = "cost"
    result_path: str | None = "result"
    error_path: str | None = "error"
    #: Provider state word -> pending|running|succeeded|failed; merged over `DEFAULT_STATE_MAP`.
    state_map: Mapping[str, str] = field(default_factory=dict)
    #: Seconds (above 0; at most 300 and 3600).
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    #: Retries (0..10) of a request that certainly did not reach the server, with doubling backoff.
    connect_retries: int = 3
    #: Seconds (0..60 and 0..600).
    backoff_initial: float = 0.2
    backoff_max: float = 5.0
    #: Extra non-secret headers sent with every request (never the auth or idempotency header).
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_base_url(self.base_url)
        _check_path("submit_path", self.submit_path, placeholder=None)
        if not isinstance(self.submit_method, str) or self.submit_method.upper() not in ("POST", "PUT"):
            _bad("submit_method", "must be POST or PUT")
        _check_path("status_path", self.status_path, placeholder="remote_ref")
        if self.lookup_path is not None:
            _check_path("lookup_path", self.lookup_path, placeholder="token")
        if self.idempotency_header is not None and not valid_header_name(self.idempotency_header):
            _bad("idempotency_header", "must be a non-empty HTTP header name, or null if the API has none")
        if not isinstance(self.tokens_honoured, bool):
            _bad("tokens_honoured", "must be true or false")
        for name in ("ref_path", "state_path"):
            _check_dotted(name, getattr(self, name))
        for name in ("lookup_ref_path", "cost_path", "result_path", "error_path", "lookup_no_job_path"):
            if getattr(self, name) is not None:
                _check_dotted(name, getattr(self, name))
        self._check_no_job()
        _check_state_map(self.state_map)
        for name, (low, high) in _RANGES.items():
            _check_number(name, getattr(self, name), low, high, whole=name == "connect_retries")
        _check_headers(self.headers, self.idempotency_header)

    def _check_no_job(self) -> None:
        status, path, value = self.lookup_no_job_status, self.lookup_no_job_path, self.lookup_no_job_value
        if status is None and path is None and value is None:
            return
        if self.lookup_path is None:
            _bad("lookup_no_job_status", "declares a lookup answer, but there is no lookup_path")
        if status is None or path is None:
            _bad("lookup_no_job_status", "and lookup_no_job_path go together: the status and the field of the answer")
        if isinstance(status, bool) or not isinstance(status, int) or not (200 <= status < 300 or 400 <= status < 500):
            _bad("lookup_no_job_status", "must be a 2xx or 4xx HTTP status")
        if status in NEVER_NO_JOB:
            _bad("lookup_no_job_status", f"{status} says the answer is unknown, never that there is no job")
        if value is not None and (not isinstance(value, str) or not value or not value.isprintable()):
            _bad("lookup_no_job_value", "must be a non-empty text, or null for an empty list")

    @property
    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities(
            idempotent_tokens=bool(self.idempotency_header) and self.tokens_honoured,
            lookup=self.lookup_path is not None,
        )

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["state_map"] = dict(self.state_map)
        data["headers"] = dict(self.headers)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HttpProviderConfig:
        """The inverse of `to_dict`, also reading a connection URI's strings; unknown keys are refused."""
        if not isinstance(data, Mapping):
            _bad("(the whole config)", "must be a JSON object")
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            exc = InvalidConfiguration(WHAT, unknown[0], "unknown key")
            exc.args = (f"invalid {WHAT} {unknown}: unknown keys (known: {', '.join(sorted(known))})",)
            raise exc
        if "base_url" not in data:
            _bad("base_url", "is required")
        values = {name: _parse(name, known[name].type, value) for name, value in data.items()}
        return cls(**values)


def valid_header_name(name: object) -> bool:
    """An RFC 9110 field name: one or more token characters."""
    return isinstance(name, str) and _HEADER_NAME.fullmatch(name) is not None


def _bad(name: str, reason: str) -> NoReturn:
    raise InvalidConfiguration(WHAT, name, reason)


# -- parsing (from_dict) ----------------------------------------------------------------------------
def _parse(name: str, kind: object, value: Any) -> Any:
    """A JSON value, or the text a connection URI gives, as the type the field ``kind`` declares."""
    kind = str(kind)
    if value is None:
        return None if "None" in kind else _bad(name, "must not be null")
    if kind == "bool":
        return _boolean(name, value)
    if kind == "float":
        return _number(name, value, whole=False)
    if kind in ("int", "int | None"):
        return _number(name, value, whole=True)
    if kind.startswith("Mapping"):
        return _mapping(name, value)
    if not isinstance(value, str):
        _bad(name, f"must be a text, not {type(value).__name__}")
    return value


def _boolean(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "false", "0"):
        return value.strip().lower() in ("true", "1")
    return _bad(name, "must be true or false (or 1/0)")


def _number(name: str, value: Any, *, whole: bool) -> float | int:
    if isinstance(value, str):
        text = value.strip()
        if not (_INTEGER if whole else _NUMBER).fullmatch(text):
            return _bad(name, "must be a whole number" if whole else "must be a number")
        value = int(text) if whole else float(text)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _bad(name, "must be a number")
    if whole and not isinstance(value, int):
        return _bad(name, "must be a whole number")
    return value if whole else float(value)


def _mapping(name: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = safe_json.loads(value)
        except ValueError:
            _bad(name, "must be a JSON object of texts")
    if not isinstance(value, Mapping):
        _bad(name, "must be a JSON object of texts")
    return dict(value)


# -- checks (__post_init__) -------------------------------------------------------------------------
def _check_base_url(url: object) -> None:
    if not isinstance(url, str) or not url.isprintable() or any(c.isspace() for c in url):
        _bad("base_url", "must be an http:// or https:// URL without spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        _bad("base_url", "must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        _bad("base_url", "must not carry credentials: pass them at construction")
    if "?" in url or "#" in url:
        _bad("base_url", "must not have a query or fragment: paths are appended to it")
    try:
        parts.port  # noqa: B018  # raises ValueError for a port out of range or not a number
    except ValueError:
        _bad("base_url", "has an invalid port")


def _check_path(name: str, path: object, *, placeholder: str | None) -> None:
    """A path appended to the base URL; ``placeholder``: the one ``{name}`` it must (and alone may) hold."""
    if not isinstance(path, str) or not path.isprintable() or " " in path or "#" in path:
        _bad(name, "must be a path without spaces, control characters or fragment")
    try:
        fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(path) if f is not None]
    except ValueError as exc:
        _bad(name, f"is not a valid template ({exc})")
    wanted = f"{{{placeholder}}}" if placeholder else "no placeholder"
    for found, spec, conv in fields:
        if found != placeholder or spec or conv:
            _bad(name, f"may contain only {wanted} in braces, found {{{found}}}")
    if placeholder and not fields:
        _bad(name, f"must contain {wanted}")
    if not path.startswith("/"):
        # "http://host" + "@other/x" or ".other/x" would send the request (and the token) elsewhere.
        _bad(name, "must start with /")


def _check_dotted(name: str, path: object) -> None:
    if not isinstance(path, str) or not path or not path.isprintable() or any(not step for step in path.split(".")):
        _bad(name, "must be a dotted JSON path such as data.id or items.0.id")


def _check_state_map(state_map: object) -> None:
    if not isinstance(state_map, Mapping):
        _bad("state_map", "must be a JSON object of texts")
    allowed = {s.value for s in RemoteState}
    for word, state in state_map.items():
        if not isinstance(word, str) or not word:
            _bad("state_map", "keys must be non-empty texts")
        if state not in allowed:
            _bad("state_map", f"{word!r} maps to {state!r}, not one of {sorted(allowed)}")


def _check_number(name: str, value: object, low: float, high: float, *, whole: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and not isinstance(value, int)):
        _bad(name, "must be a whole number" if whole else "must be a number")
    if not math.isfinite(value) or not low <= value <= high:
        _bad(name, f"must be between {low:g} and {high:g}")


def _check_headers(headers: object, idempotency_header: str | None) -> None:
    if not isinstance(headers, Mapping):
        _bad("headers", "must be a JSON object of texts")
    ours = {(idempotency_header or "").lower()} | _RESERVED_HEADERS
    for name, value in headers.items():
        if not valid_header_name(name):
            _bad("headers", "has a name that is not an HTTP header name")
        if name.lower() in ours:
            _bad("headers", f"must not set {name}: that header is the auth, idempotency or transport's own")
        if not isinstance(value, str) or not value.isascii() or not value.isprintable():
            # Never echo the value: extra headers sometimes carry keys.
            _bad("headers", f"value of {name} must be printable ASCII text")
