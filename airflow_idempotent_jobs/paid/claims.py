"""Who wrote a ``submitting`` intent, and whether that writer may still be waiting for the provider.

A claim is ``host:pid:nonce``. The nonce is drawn once per process (a forked child draws its
own), so a later process that happens to get the same pid is not mistaken for the writer. Liveness:

* this process: the in-process registry says whether one of its threads is inside ``submit``;
* same host, another pid: that pid is alive (signal 0);
* another host: the claim is younger than the lease.

A claim older than the lease is abandoned wherever it was written.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import socket
import threading

__all__ = ["DEFAULT_CLAIM_LEASE", "claim_alive", "enter", "leave", "my_claim"]

#: Default time after which a ``submitting`` claim written on another host counts as abandoned.
DEFAULT_CLAIM_LEASE = 900.0

_HOST = socket.gethostname()
_process_nonce: tuple[int, str] = (0, "")
#: (store location, episode id) -> thread, for the submissions this process is making right now. A
#: thread registers as it writes its claim, under the store's lock, and leaves when its `submit`
#: returns: no other thread of this process can read that claim and think its writer dead.
_active: dict[tuple[str, str], int] = {}
_active_lock = threading.Lock()


def my_claim() -> str:
    """This process's claim text."""
    global _process_nonce
    if _process_nonce[0] != os.getpid():  # a forked child is another process
        _process_nonce = (os.getpid(), secrets.token_hex(4))
    return f"{_HOST}:{_process_nonce[0]}:{_process_nonce[1]}"


def enter(location: str, episode_id: str) -> None:
    """The calling thread is about to submit ``episode_id`` of the store at ``location``."""
    with _active_lock:
        _active[(location, episode_id)] = threading.get_ident()


def leave(location: str, episode_id: str) -> None:
    """The calling thread is done with ``episode_id`` (a no-op if it never entered)."""
    with _active_lock:
        if _active.get((location, episode_id)) == threading.get_ident():
            del _active[(location, episode_id)]


def claim_alive(
    location: str, episode_id: str, claim: str, claimed_at: str | None, now: dt.datetime, lease: float
) -> bool:
    """Whether the claim's writer may still be submitting. ValueError/TypeError: unreadable claim."""
    if claim == my_claim():
        with _active_lock:
            return (location, episode_id) in _active
    age = (now - dt.datetime.fromisoformat(claimed_at or "")).total_seconds()
    host, pid, _nonce = claim.rsplit(":", 2)
    if age >= lease:
        return False
    # Our own pid under another nonce is an earlier process that had it: gone.
    return host != _HOST or (int(pid) != os.getpid() and _pid_alive(int(pid)))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
