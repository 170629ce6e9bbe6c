"""What a provider hands back, bounded before it is kept: results, error texts.

A provider's result lands in the episode record (read by every budget check of the week), in the
``return_value`` XCom and in the trigger's event (a row of Airflow's database). `bound_result` keeps
a result only if its canonical JSON is at most ``limit`` bytes (`DEFAULT_RESULT_LIMIT`, 64 KiB) AND
reads back through `safe_json` inside a record: otherwise the result is left out and an
`OmittedResult` says why, how large it was and its sha256, so it can still be identified.
`clean_text` does the same for error texts: the provider's redaction first, then a length bound.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from ..episode import OmittedResult
from ..errors import ProviderError
from ..safe_json import MAX_DEPTH, UnsafeJson, check_depth, loads
from .fingerprint import canonical_json

__all__ = [
    "DEFAULT_RESULT_LIMIT",
    "MAX_ERROR_CHARS",
    "Bounded",
    "bound_result",
    "clean_text",
    "MAX_REF_CHARS",
    "redacting",
    "redactor",
    "ref_problem",
    "reraise_redacted",
    "short_repr",
    "unusable_ref",
]

#: Largest result kept, in bytes of its canonical JSON.
DEFAULT_RESULT_LIMIT: Final = 64 * 1024
#: Longest error text kept or raised, in characters.
MAX_ERROR_CHARS: Final = 2000
#: Longest remote reference kept: a provider's job id is a short, opaque text.
MAX_REF_CHARS: Final = 512
#: The record nests the result two levels down (record, submission): keep the whole within MAX_DEPTH.
RESULT_MAX_DEPTH: Final = MAX_DEPTH - 2
#: A JSON ``\u0000`` escape (not an escaped backslash before "u0000"): PostgreSQL's jsonb refuses it.
_NUL_ESCAPE: Final = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


@dataclass(frozen=True)
class Bounded:
    """A result as it may be kept: ``value`` (None when left out) and, if left out, why."""

    value: Any
    omitted: OmittedResult | None = None


def bound_result(result: Any, limit: int = DEFAULT_RESULT_LIMIT) -> Bounded:
    """``result`` if it is small, strict JSON that a record can hold; else an `OmittedResult` for it.

    The value kept is the result read back from its canonical JSON (tuples become lists), exactly
    what a reader of the record will see. An `OmittedResult` passes through (the trigger already cut it).
    """
    if isinstance(result, OmittedResult):
        return Bounded(None, result)
    if result is None:
        return Bounded(None)
    try:
        data = canonical_json(result, max_depth=RESULT_MAX_DEPTH)
    except UnsafeJson as exc:
        size, digest = _loose_measure(result)
        return Bounded(None, OmittedResult(f"not storable as strict JSON: {exc}"[:300], size, digest, limit))
    digest = hashlib.sha256(data).hexdigest()
    if len(data) > limit:
        return Bounded(None, OmittedResult(f"{len(data)} bytes, over the limit of {limit}", len(data), digest, limit))
    if _NUL_ESCAPE.search(data):
        return Bounded(None, OmittedResult("holds a NUL character (\\u0000)", len(data), digest, limit))
    try:
        value = loads(data)  # what safe_json (every store reader) refuses: huge integers, say
        check_depth(value, RESULT_MAX_DEPTH)
    except UnsafeJson as exc:
        return Bounded(None, OmittedResult(f"not storable as strict JSON: {exc}"[:300], len(data), digest, limit))
    return Bounded(value)


def _loose_measure(result: Any) -> tuple[int | None, str | None]:
    """Size and sha256 of the closest JSON text (NaN written as such), or (None, None) if there is none."""
    try:
        text = json.dumps(result, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
        data = text.encode("utf-8", "surrogatepass")
    except (TypeError, ValueError, RecursionError):
        return None, None
    return len(data), hashlib.sha256(data).hexdigest()


def redactor(provider: object) -> Callable[[str], str]:
    """The provider's public ``redact(text) -> str``, or the identity when it has none."""
    redact = getattr(provider, "redact", None)
    return redact if callable(redact) else _same


def _same(text: str) -> str:
    return text


def clean_text(text: str, redact: Callable[[str], str] = _same, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` redacted, cut to ``limit`` characters, and safe for any store (no NUL, valid UTF-8)."""
    text = redact(str(text))
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text)} characters)"
    return text.replace("\x00", "\\0").encode("utf-8", "replace").decode("utf-8")


def reraise_redacted(exc: BaseException, text: str) -> NoReturn:
    """Raise ``exc``, or, when ``text`` (its redacted text) differs, a copy carrying ``text`` only.

    The copy is raised ``from None``: the original, with the secret in it, stays out of the chain
    that Airflow logs. A provider error keeps its class and HTTP status; anything else becomes a
    `ProviderError` (its own class may not be rebuilt from a text).
    """
    if text == (str(exc) or type(exc).__name__) or not isinstance(exc, Exception):
        raise exc
    copy: Exception
    try:
        copy = type(exc)(text, status=exc.status) if isinstance(exc, ProviderError) else ProviderError(text)
    except TypeError:  # a provider's own subclass with another signature
        copy = ProviderError(text, status=getattr(exc, "status", None))
    raise copy from None


@contextmanager
def redacting(provider: object) -> Iterator[None]:
    """Errors out of the ``with`` body (provider calls) with their text through the provider's ``redact``."""
    redact = redactor(provider)
    try:
        yield
    except Exception as exc:
        reraise_redacted(exc, clean_text(str(exc) or type(exc).__name__, redact))


def ref_problem(ref: object) -> str | None:
    """Why a provider's job reference cannot be kept, or None."""
    if not isinstance(ref, str) or not ref:
        return "not a non-empty text"
    if len(ref) > MAX_REF_CHARS:
        return f"longer than {MAX_REF_CHARS} characters"
    if not ref.isprintable():  # NUL (refused by jsonb), controls, lone surrogates (not UTF-8)
        return "holds unprintable characters"
    return None


def unusable_ref(where: str, ref: object, redact: Callable[[str], str]) -> str:
    """The error text for a job reference `ref_problem` refuses."""
    return clean_text(
        f"the provider's {where} answered a job reference that cannot be kept ({ref_problem(ref)}): {short_repr(ref)}",
        redact,
    )


def short_repr(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
