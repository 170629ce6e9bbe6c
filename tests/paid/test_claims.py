"""Whose claim may a retry take over: the liveness rule of `paid.claims`, through the real ledger and store.

Each test writes a ``submitting`` claim into a real file store, as some writer left it, and runs the
ledger against the real provider server. A pid is checked only for a writer of this host, boot and
PID namespace; every other claim (another namespace or boot, an identity that could not be read, a
claim of a release before namespaces were recorded) is alive until its lease ends.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from collections.abc import Callable

import pytest

from airflow_idempotent_jobs import EpisodeStore, StoreCorrupted, SubmissionState
from airflow_idempotent_jobs.paid import (
    NotReconcilable,
    SubmissionInProgress,
    SubmissionLedger,
    idempotency_token,
)
from airflow_idempotent_jobs.paid.claims import DEFAULT_CLAIM_LEASE, my_claim
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.paid.support import claim_here, left_submitting, pid_just_freed, provider_for

REQUEST = {"prompt": "weekly video", "units": 2}
OTHER_BOOT = "00000000-1111-4222-8333-444444444444"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def test_a_dead_writer_of_this_namespace_is_taken_over_at_once(
    file_store: EpisodeStore, server: ProviderServer
) -> None:
    """Host, boot and PID namespace all ours, its pid gone: the retry resumes now, not after the lease."""
    eid = left_submitting(file_store, claim_here(pid_just_freed()), _now())
    episode = SubmissionLedger(file_store).submit(eid, provider_for(server), REQUEST)
    assert episode.submission.state is SubmissionState.ACCEPTED
    assert server.accepted(idempotency_token(file_store.identity, eid)) == 1


def test_a_live_writer_of_this_namespace_blocks(file_store: EpisodeStore, server: ProviderServer) -> None:
    eid = left_submitting(file_store, claim_here(os.getppid()), _now())
    with pytest.raises(SubmissionInProgress):
        SubmissionLedger(file_store).submit(eid, provider_for(server), REQUEST)
    assert server.submissions() == 0


#: Claims of writers whose pid means nothing here, each with a pid that is dead in this namespace.
ONLY_THE_LEASE: dict[str, Callable[[int], str]] = {
    "another PID namespace": lambda pid: claim_here(pid, pidns="4026532999"),
    "another boot, or another machine with this host name": lambda pid: claim_here(pid, boot=OTHER_BOOT),
    "a writer that could not read its namespace": lambda pid: claim_here(pid, pidns="?"),
    "a writer that could not read its boot id": lambda pid: claim_here(pid, boot="?"),
    "another host": lambda pid: claim_here(pid).replace(socket.gethostname(), "other-host.invalid", 1),
    "a release before namespaces were recorded (host:pid:nonce)": lambda pid: f"{socket.gethostname()}:{pid}:0badc0de",
}


@pytest.mark.parametrize("writer", list(ONLY_THE_LEASE))
def test_a_pid_from_elsewhere_proves_nothing_until_the_lease_ends(
    file_store: EpisodeStore, server: ProviderServer, writer: str
) -> None:
    now = _now()
    eid = left_submitting(file_store, ONLY_THE_LEASE[writer](pid_just_freed()), now)
    before = file_store.get(eid)
    provider = provider_for(server)
    within = SubmissionLedger(file_store, clock=lambda: now + dt.timedelta(seconds=DEFAULT_CLAIM_LEASE - 1))
    with pytest.raises(SubmissionInProgress):
        within.submit(eid, provider, REQUEST)
    with pytest.raises(NotReconcilable, match="still running"):
        within.check_reconcilable(eid)
    assert server.submissions() == 0 and file_store.get(eid) == before
    after = SubmissionLedger(file_store, clock=lambda: now + dt.timedelta(seconds=DEFAULT_CLAIM_LEASE))
    assert after.submit(eid, provider, REQUEST).submission.state is SubmissionState.ACCEPTED
    assert server.accepted() == 1


#: Claims no release writes: unreadable, so the ledger fails closed (StoreCorrupted), nothing sent.
UNREADABLE = {
    "no separators": "nocolons",
    "a terminal escape in the host": claim_here(4242).replace(socket.gethostname(), "evil\x1b]0;owned\x07", 1),
    "an empty host": claim_here(4242).replace(socket.gethostname(), "", 1),
    "over 512 characters": claim_here(4242).replace(socket.gethostname(), "h" * 500, 1),
    "pid 0 (signal 0 would probe our own process group)": claim_here(0),
    "a negative pid": claim_here(-1),
    "a pid with a sign": claim_here(4242).replace(":4242:", ":+4242:"),
    "a pid with an underscore": claim_here(4242).replace(":4242:", ":42_42:"),
    "a pid past any pid_max": claim_here(2**40),
    "a nonce out of shape": claim_here(4242, nonce="NOT-HEX!"),
    "a namespace out of shape": claim_here(4242, pidns="12a"),
    "a boot id out of shape": claim_here(4242, boot="not-a-uuid"),
    "a control character in the boot id": claim_here(4242, boot=OTHER_BOOT[:-1] + "\n"),
}


@pytest.mark.parametrize("shape", list(UNREADABLE))
def test_an_unreadable_claim_fails_closed(file_store: EpisodeStore, server: ProviderServer, shape: str) -> None:
    eid = left_submitting(file_store, UNREADABLE[shape], _now())
    before = file_store.get(eid)
    ledger = SubmissionLedger(file_store)
    with pytest.raises(StoreCorrupted, match=rf"episode {eid}\): unreadable submission claim") as raised:
        ledger.submit(eid, provider_for(server), REQUEST)
    assert "\n" not in str(raised.value)
    with pytest.raises(StoreCorrupted):
        ledger.check_reconcilable(eid)
    assert server.submissions() == 0 and file_store.get(eid) == before


def test_our_claim_names_host_pid_nonce_namespace_and_boot() -> None:
    claim = my_claim()
    host, pid, nonce, pidns, boot = claim.rsplit(":", 4)
    assert (host, int(pid)) == (socket.gethostname(), os.getpid())
    assert len(nonce) == 8 and claim == claim_here(os.getpid(), nonce)
    assert pidns.startswith("pidns=") and boot.startswith("boot=") and len(claim) <= 512
    # A release before namespaces were recorded splits it as host:pid:nonce: another host to it, so
    # it waits for the lease rather than checking a pid (rolling upgrades fail closed both ways).
    assert claim.rsplit(":", 2)[0] != socket.gethostname()
