"""The file store's lock: the one owner of its policy (how to wait, for how long, who may re-enter).

An exclusive ``flock`` on ``<root>/.lock``. The first attempt does not block. When another process
holds the lock, the wait is a blocking ``flock`` in a short-lived helper thread (on a duplicate of
the descriptor, so the lock is the descriptor's), and the caller waits for it with the timeout: the
kernel hands the lock over the moment it is released, where polling every half millisecond left
it idle for a quarter of a millisecond on average and woke every waiter thousands of times a
second. A waiter that times out leaves its helper blocked; when the helper finally gets the lock it
finds itself abandoned and drops it at once (closing the last descriptor releases a ``flock``). With
no timeout (a negative one) the caller blocks in ``flock`` itself.

The file is opened for each acquisition, never through a link and only if it is a regular file,
and closed on release (closing drops the ``flock``); a descriptor kept across a ``fork`` would let
parent and child share one lock.

Within a process the lock belongs to a thread: it is re-entrant for that thread, and the other
threads of the process wait for it like other processes do.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time

from .durable import open_regular

__all__ = ["LockTimeout", "StoreLock"]


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
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if deadline is None:
                        fcntl.flock(fd, fcntl.LOCK_EX)
                    elif time.monotonic() >= deadline or not _BlockingWait(fd).until(deadline):
                        raise LockTimeout(self.path) from None
                # A lock file deleted (or replaced) while we waited locks nothing that others
                # open now: lock the file that is there instead.
                if _same_file(fd, self.path):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)


#: The helpers' descriptors still open. A child forked meanwhile closes its copies at once: a copy
#: alive in a child would keep the lock of an abandoned wait held for as long as the child lives.
_HELD_BY_HELPERS: set[int] = set()


def _close_helpers_descriptors_in_child() -> None:
    for fd in list(_HELD_BY_HELPERS):
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD_BY_HELPERS.clear()


os.register_at_fork(after_in_child=_close_helpers_descriptors_in_child)


class _BlockingWait:
    """A blocking ``flock`` of ``fd``'s open file in a helper thread, waited for with a deadline."""

    def __init__(self, fd: int) -> None:
        self._dup = os.dup(fd)  # the helper's own descriptor of the same open file
        _HELD_BY_HELPERS.add(self._dup)
        self._state = threading.Lock()
        self._done = threading.Event()
        self._abandoned = False
        self._error: BaseException | None = None

    def until(self, deadline: float) -> bool:
        """True once the lock is held (by ``fd``'s open file); False if the deadline passed first."""
        try:
            threading.Thread(target=self._wait, name="idempotent-jobs-flock", daemon=True).start()
        except BaseException:
            self._close()
            raise
        got = self._done.wait(max(0.0, deadline - time.monotonic()))
        with self._state:
            if not self._done.is_set():
                self._abandoned = True  # the helper drops the lock when it finally gets it
                return False
        if self._error is not None:
            raise self._error
        return got or self._done.is_set()

    def _wait(self) -> None:
        try:
            fcntl.flock(self._dup, fcntl.LOCK_EX)
        except BaseException as exc:  # reported to the waiter, never lost in a thread
            self._error = exc
        with self._state:
            if self._abandoned:
                self._close()  # the last descriptor of that open file: the lock goes with it
                return
            self._done.set()
        self._close()  # the caller's descriptor keeps the lock

    def _close(self) -> None:
        _HELD_BY_HELPERS.discard(self._dup)
        os.close(self._dup)


def _same_file(fd: int, path: str) -> bool:
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
