"""What the command writes: never a control sequence taken from data, and a failed write is one error line.

Stored data (remote references, error texts, metadata, file names) may hold ESC, C1 controls
(U+009B is a CSI on some terminals), bidi overrides or newlines. Every character that is not
printable is written as its escape instead: ``\\x1b`` in text, ``\\u001b`` in JSON (which escapes
C0 controls itself but not DEL, C1, bidi or U+2028 with ``ensure_ascii=False``). `guarded_streams`
also routes every other write of the process through the same filter, so a command that forgets
still cannot move the cursor or retitle the terminal.

Output that cannot be written (a full disk, a closed pipe, an encoding that lacks a character) is
`OutputFailed` on stdout, reported as one line and exit 5; on stderr it is dropped (the exit code
still says what happened).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["GuardedStream", "OutputFailed", "guarded_streams", "json_line", "visible"]

_TEXT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


class OutputFailed(Exception):
    """Stdout could not take the command's output. Deliberately not an OSError or ValueError:
    no command's own ``except`` may mistake it for a problem with its input or its store."""

    def __init__(self, stream: str, reason: str) -> None:
        super().__init__(f"cannot write to {stream}: {reason}")
        self.stream = stream
        self.reason = reason


def visible(text: str) -> str:
    """``text`` with each non-printable character as its Python escape (``\\x1b``, ``\\u202e``, ``\\n``)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _TEXT_ESCAPES:
        return _TEXT_ESCAPES[ch]
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def json_line(data: Any) -> str:
    """``data`` as one line of JSON in which every non-printable character is a ``\\u`` escape."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False)
    # Outside strings json.dumps writes only printable ASCII, so whatever is not printable is in a
    # string, where a \u escape means the same character.
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _json_escape(ch) for ch in text)


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


class GuardedStream:
    """A text stream that writes non-printable characters (except line ends) as escapes.

    ``best_effort``: a failed write is dropped (stderr: there is nowhere left to report it);
    otherwise it raises `OutputFailed`.
    """

    def __init__(self, raw: TextIO | None, name: str, *, best_effort: bool) -> None:
        self.raw = raw
        self.name = name
        self.best_effort = best_effort
        self.muted = False

    def write(self, text: str) -> int:
        if self.muted:
            return len(text)
        safe = text if text.isprintable() else "\n".join(visible(part) for part in text.split("\n"))
        self._guard(lambda raw: raw.write(safe))
        return len(text)

    def flush(self) -> None:
        if not self.muted:
            self._guard(lambda raw: raw.flush())

    def _guard(self, action: Any) -> None:
        try:
            if self.raw is None:
                raise OutputFailed(self.name, "it is closed")
            action(self.raw)
        except OutputFailed:
            self._failed()
            if not self.best_effort:
                raise
        except UnicodeEncodeError as exc:
            self._failed()
            if not self.best_effort:
                char = visible(exc.object[exc.start : exc.start + 1])
                reason = f"its encoding {exc.encoding} has no {char!r} (use a UTF-8 locale or PYTHONIOENCODING=utf-8)"
                raise OutputFailed(self.name, reason) from None
        except (OSError, ValueError) as exc:  # ValueError: "I/O operation on closed file"
            self._failed()
            if not self.best_effort:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise OutputFailed(self.name, reason) from None

    def _failed(self) -> None:
        """Write nothing more, and point the descriptor at /dev/null: the interpreter flushes the
        stream once more at exit, and a second failure there would print a traceback-like warning
        and turn the exit code into 120."""
        self.muted = True
        try:
            fd = self.raw.fileno() if self.raw is not None else -1
        except (OSError, ValueError, AttributeError):
            return
        if fd < 0:
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        # isatty, encoding, fileno ...: what argparse and print may ask of a stream.
        return getattr(self.raw, name)


@contextlib.contextmanager
def guarded_streams() -> Iterator[tuple[GuardedStream, GuardedStream]]:
    """Route ``sys.stdout`` and ``sys.stderr`` through `GuardedStream` for the body of a ``with``."""
    out, err = sys.stdout, sys.stderr
    guarded_out = GuardedStream(out, "stdout", best_effort=False)
    guarded_err = GuardedStream(err, "stderr", best_effort=True)
    sys.stdout, sys.stderr = guarded_out, guarded_err
    try:
        yield guarded_out, guarded_err
    finally:
        sys.stdout, sys.stderr = out, err
