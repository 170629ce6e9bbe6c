"""JSON from places we do not control (store files and rows, configuration, legacy trees), parsed strictly.

Python's `json` accepts what our records must never hold and fails in ways that are not
`ValueError`: ``NaN``/``Infinity`` and ``1e999`` (an infinite float that compares false with every
budget), integers of thousands of digits (a `ValueError` only past 4 300 digits, slow before), and
nesting deep enough to raise `RecursionError` in the parser or, later, in code that walks the value.
`loads` refuses all of them with one `UnsafeJson` (a `ValueError`) whose text says what was wrong.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

from .errors import UnsafeJson

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "UnsafeJson", "loads"]  # UnsafeJson: defined in errors

#: Deepest nesting accepted; records are a few levels deep, provider results rarely more than ten.
MAX_DEPTH: Final = 64
#: Longest integer accepted (a sign and 40 digits is far beyond any count, sequence or id we keep).
MAX_INT_DIGITS: Final = 41


def _int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise UnsafeJson(f"an integer of {len(text.lstrip('-'))} digits")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise UnsafeJson(f"a number out of range ({text[:40]})")
    return value


def _constant(text: str) -> Any:
    raise UnsafeJson(f"{text} is not a JSON number")


def _int_or_nan(text: str) -> int | float:
    return float("nan") if len(text) > MAX_INT_DIGITS else int(text)


_DECODER: Final = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)
#: For answers whose numbers are judged one by one downstream (a provider's cost): odd numbers are
#: kept as non-finite floats instead of making the whole answer unreadable.
_LENIENT_NUMBERS: Final = json.JSONDecoder(parse_int=_int_or_nan, parse_float=float, parse_constant=float)


def loads(raw: bytes | str, *, strict_numbers: bool = True) -> Any:
    """Parse ``raw`` (UTF-8 bytes or text); `UnsafeJson` names the first thing refused.

    ``strict_numbers=False``: ``NaN``, ``Infinity``, ``1e999`` and integers of more than
    `MAX_INT_DIGITS` characters become non-finite floats (NaN for the integers) rather than errors;
    the caller must judge every number it keeps. Depth and encoding stay strict.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        value = (_DECODER if strict_numbers else _LENIENT_NUMBERS).decode(text)
    except UnsafeJson:
        raise
    except UnicodeDecodeError as exc:
        raise UnsafeJson(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise UnsafeJson(f"invalid JSON ({exc})") from None
    except RecursionError:
        raise UnsafeJson(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer past the interpreter's own digit limit
        raise UnsafeJson(str(exc)) from None
    # Only text with many brackets can be deep: the common small record skips the walk.
    if text.count("[") + text.count("{") > MAX_DEPTH:
        check_depth(value)
    return value


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """`UnsafeJson` if ``value`` nests lists and objects deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise UnsafeJson(f"nested deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children)
