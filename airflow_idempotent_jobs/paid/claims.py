"""Who wrote a ``submitting`` intent, and whether that writer may still be waiting for the provider.

A claim is ``host:pid:nonce:pidns=N:boot=B``: the host name; the writer's pid, as its own PID
namespace numbers it; a nonce drawn once per process (a forked child draws its own, so a later
process that gets the same pid is not taken for the writer); the inode of that PID namespace
(``/proc/self/ns/pid``, unique among the namespaces alive in one boot); the kernel's boot id
(``/proc/sys/kernel/random/boot_id``). ``?`` stands for a value that could not be read (and for
any unprintable character of the host name). Liveness,
the first rule that applies:

* this process: the in-process registry says whether one of its threads is inside ``submit``;
* a claim older than the lease: abandoned, wherever it was written;
* same host, same boot id, same PID namespace (each known on both sides): that pid is alive
  (signal 0) and is not ours;
* any other claim is alive until the lease ends: another host; another boot of this host, or another
  machine with its name; another PID namespace, where a pid dead here may be a live process (a
  container on this node sharing the store); an identity either side could not read; and
  ``host:pid:nonce``, a claim of a release before namespaces were recorded, whose namespace is
  unknown.

A release before this one splits a claim as ``host:pid:nonce``, gets a host that is not its own and
so waits for the lease too. A claim that no release writes (no ``host:pid:nonce`` shape, over
`MAX_CLAIM` characters, a field out of shape) is `ValueError`: the ledger's ``StoreCorrupted``.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
import socket
import threading
from typing import Final, NamedTuple

import psutil

__all__ = ["DEFAULT_CLAIM_LEASE", "MAX_CLAIM", "claim_alive", "enter", "leave", "my_claim"]

#: Default time after which a ``submitting`` claim whose writer cannot be checked counts as abandoned.
DEFAULT_CLAIM_LEASE = 900.0
#: Longest claim any release writes (a host name is at most 255 characters), with room to spare.
MAX_CLAIM: Final = 512

_UNKNOWN: Final = "?"
_BOOT: Final = re.compile(r"boot=([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\?)")
#: The shape of each field after the host, in order.
_SHAPES: Final = {
    "pid": re.compile(r"[1-9][0-9]{0,9}"),
    "nonce": re.compile(r"[0-9a-f]{8}"),
    "namespace": re.compile(r"pidns=([0-9]{1,20}|\?)"),
    "boot id": _BOOT,
}
_PID_LIMIT: Final = 2**31 - 1  # pids are C ints; signal 0 to a larger one is an error, not an answer


class _Writer(NamedTuple):
    """A claim's fields; ``pidns`` and ``boot`` are None in a claim written before they were recorded."""

    host: str
    pid: str
    pidns: str | None
    boot: str | None


_mine: tuple[int, str, _Writer] | None = None  # (pid, claim, its fields) of this process
#: (store location, episode id) -> thread, for the submissions this process is making right now. A
#: thread registers as it writes its claim, under the store's lock, and leaves when its `submit`
#: returns: no other thread of this process can read that claim and think its writer dead.
_active: dict[tuple[str, str], int] = {}
_active_lock = threading.Lock()


def my_claim() -> str:
    """This process's claim text."""
    return _me()[1]


def _me() -> tuple[int, str, _Writer]:
    global _mine
    pid = os.getpid()
    if _mine is None or _mine[0] != pid:  # a forked child is another process
        host = "".join(c if c.isprintable() else "?" for c in socket.gethostname()[:255]) or _UNKNOWN
        writer = _Writer(host, str(pid), _read_pid_namespace(), _read_boot_id())
        _mine = (pid, f"{host}:{pid}:{secrets.token_hex(4)}:pidns={writer.pidns}:boot={writer.boot}", writer)
    return _mine


def _forget_me() -> None:
    global _mine
    _mine = None  # a child forked into a new PID namespace may get its parent's pid number


os.register_at_fork(after_in_child=_forget_me)


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
    pid, text, me = _me()
    if claim == text:
        with _active_lock:
            return (location, episode_id) in _active
    age = (now - dt.datetime.fromisoformat(claimed_at or "")).total_seconds()
    writer = _parse(claim)
    if age >= lease:
        return False
    if not (writer.host == me.host and _same(writer.boot, me.boot) and _same(writer.pidns, me.pidns)):
        return True  # its pid is not a number we can check: the lease decides
    # Our own pid under another nonce is an earlier process that had it: gone.
    return int(writer.pid) != pid and _pid_alive(int(writer.pid))


def _same(theirs: str | None, ours: str | None) -> bool:
    return theirs is not None and theirs != _UNKNOWN and theirs == ours


def _parse(claim: str) -> _Writer:
    if len(claim) > MAX_CLAIM:
        raise ValueError(f"a claim of {len(claim)} characters (at most {MAX_CLAIM})")
    fields = claim.rsplit(":", 4)
    if len(fields) == 5 and fields[3].startswith("pidns="):
        host, pid, _nonce, pidns, boot = fields
        if not (host and host.isprintable()):
            raise ValueError(f"host {host!r:.60} out of shape in claim {claim!r:.120}")
        for (what, shape), field in zip(_SHAPES.items(), fields[1:], strict=True):
            if not shape.fullmatch(field) or (what == "pid" and int(field) > _PID_LIMIT):
                raise ValueError(f"{what} {field!r:.60} out of shape in claim {claim!r:.120}")
        return _Writer(host, pid, pidns.removeprefix("pidns="), boot.removeprefix("boot="))
    fields = claim.rsplit(":", 2)
    if len(fields) != 3:
        raise ValueError(f"not host:pid:nonce[:pidns=N:boot=B]: {claim!r:.120}")
    return _Writer(fields[0], fields[1], None, None)  # written before namespaces were recorded


def _read_pid_namespace() -> str:
    """The inode of this process's PID namespace, or ``?`` (no /proc, or one of another namespace)."""
    try:
        found = re.fullmatch(r"pid:\[([0-9]{1,20})\]", os.readlink("/proc/self/ns/pid"))
    except OSError:
        return _UNKNOWN
    return found.group(1) if found else _UNKNOWN


def _read_boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            text = f.read(64).strip()
    except (OSError, ValueError):
        return _UNKNOWN
    return text if _BOOT.fullmatch(f"boot={text}") else _UNKNOWN


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists here (another user's, or a zombie not yet reaped, counts)."""
    return bool(psutil.pid_exists(pid))
