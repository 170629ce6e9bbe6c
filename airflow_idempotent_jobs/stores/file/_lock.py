"""The file store's lock: the one owner of its policy (how to wait, for how long, who may re-enter).

An exclusive ``flock`` on ``<root>/.lock``, taken without blocking and retried every
`PROBE_INTERVAL` until the timeout. A refused attempt is one system call (about a microsecond), so
seven waiters on a small machine leave the CPU to the holder, which a polling ``filelock`` (about
45 us of Python per refused attempt) did not. The file is opened for each acquisition, never
through a link and only if it is a regular file, and closed on release (closing drops the
``flock``); a descriptor kept across a ``fork`` would let parent and child share one lock.

Within a process the lock belongs to a thread: it is re-entrant for that thread, and the other
threads of the process wait for it like other processes do.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from typing import Final

from ..durable import open_regular

__all__ = ["PROBE_INTERVAL", "LockTimeout", "StoreLock"]

#: Seconds between two attempts while another process holds the lock.
PROBE_INTERVAL: Final = 0.0005


class LockTimeout(TimeoutError):
    """The lock stayed held by another process (or thread) for the whole timeout."""


class StoreLock:
    """``flock`` on one file, re-entrant per thread; a negative timeout waits for ever."""

    def __init__(self, path: str, timeout: float) -> None:
        #: The lock file; created on first use, never deleted.
        self.path = path
        #: Seconds to wait for it; negative: wait for ever.
        self.timeout = timeout
        #: Excludes the other threads of this process, and counts this thread's re-entries.
        self._threads = threading.RLock()
        #: How deep the owning thread is; the file is locked while this is above 0.
        self._depth = 0
        #: The descriptor holding the ``flock`` while locked.
        self._fd: int | None = None

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout if self.timeout >= 0 else None
        if not self._threads.acquire(timeout=-1 if deadline is None else max(0.0, self.timeout)):
            raise LockTimeout(self.path)
        try:
            if self._depth == 0:
                self._fd = self._lock_file(deadline)
            self._depth += 1
        except BaseException:
            self._threads.release()
            raise

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # drops the flock
        self._threads.release()

    def _lock_file(self, deadline: float | None) -> int:
        while True:
            fd = open_regular(self.path, os.O_RDWR | os.O_CREAT)
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if deadline is not None and time.monotonic() >= deadline:
                            raise LockTimeout(self.path) from None
                    time.sleep(PROBE_INTERVAL)
                # A lock file deleted (or replaced) while we waited locks nothing that others
                # open now: lock the file that is there instead.
                if _same_file(fd, self.path):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)


def _same_file(fd: int, path: str) -> bool:
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
