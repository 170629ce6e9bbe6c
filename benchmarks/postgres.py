"""Allocation cost of the PostgreSQL store, against a bare ``INSERT ... COMMIT`` on the same server.

Run: ``.venv/bin/python benchmarks/postgres.py`` (server from the ``PG*`` variables, default
``postgres@127.0.0.1:5432``). Not a test: it prints figures and ratios with PASS/MISS.

An allocation is one call of ``allocate_episode`` (migration 0005), in autocommit: the rule runs
in the server and the namespace's advisory lock is held only there.

- Latency: allocations (p50, p95) over a history of 20 000 episodes, interleaved sample by sample
  with retries (the key found), the same allocation sent inside an explicit ``BEGIN ISOLATION
  LEVEL READ COMMITTED ... COMMIT`` (the form used when a connection's default isolation is
  stricter), and a bare ``INSERT ... COMMIT`` of a row of a similar shape, once on a connection of
  the store's pool (same driver, same pre-ping, same bounded connection) and once on a plain
  pooled psycopg connection, so that all see the same server, disk and load. Targets:
  allocation p50 at most 1.25x the bare insert on the same pool, a retry at most 1.0x.
  Allocation has a pool of its own without pre-ping (`stores.postgres._connection.create_allocation_engine`):
  the bare insert on the store's pool pays a ping the allocation does not. So a third baseline is
  printed for information: one autocommit INSERT on the allocation pool (one round trip, no ping),
  the floor of any write.
- Round trips: each call through a relay that delays each client-to-server chunk by 20 ms; the
  extra time over 20 ms is the number of round trips. A bare checkout of the store's pool is
  counted too: that is its pre-ping, paid by reads and updates (not by allocation).
- Throughput: 1 and 16 client processes of one namespace (target: 16 at least 2x one), and 4
  namespaces of 4 clients each (target: at least 3x one), in allocations per second of wall time,
  with the CPU each allocation cost: the client processes' own (``os.times``) and the server's
  (its processes in /proc, exited backends included; every database of the server counts).
  From one client's figures the CPU ceiling follows: no number of clients on this machine's
  cores can allocate faster than cores / (client + server CPU per allocation). For information,
  2 and 16 namespaces of one client each (no lock shared) show what the machine allows without
  the namespace's lock.

It creates its own database (``ij_bench_<pid>``) and drops it at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import queue
import random
import socket
import statistics
import sys
import threading
import time
from typing import Any
from urllib.parse import quote

import psycopg
import sqlalchemy as sa
from psycopg.types.json import Jsonb

from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore

#: Allocation p50 over the bare INSERT+COMMIT p50 on the same pool.
TARGET_ALLOCATE = 1.25
#: A retry's (key found) p50 over the same bare insert.
TARGET_RETRY = 1.0
#: Throughput of 16 clients of one namespace, and of 4 namespaces x 4 clients, over one client.
TARGET_ONE_NAMESPACE = 2.0
TARGET_FOUR_NAMESPACES = 3.0
HISTORY = 20_000
PER_WEEK = 7
SPAWN = multiprocessing.get_context("spawn")


def server_url(dbname: str) -> str:
    user = quote(os.environ.get("PGUSER", "postgres"), safe="")
    password = os.environ.get("PGPASSWORD")
    auth = user + (f":{quote(password, safe='')}" if password else "")
    return f"postgresql://{auth}@{os.environ.get('PGHOST', '127.0.0.1')}:{os.environ.get('PGPORT', '5432')}/{dbname}"


def build_history(url: str) -> None:
    """``HISTORY`` committed episodes, ``PER_WEEK`` to a week, written in bulk by SQL."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO idempotent_jobs.weeks "
            "SELECT 'default', format('%%s-W%%s', 1900 + w / 50, lpad((1 + w %% 50)::text, 2, '0')), 6 "
            "FROM generate_series(0, %s) w",
            (HISTORY // PER_WEEK,),
        )
        conn.execute(
            "INSERT INTO idempotent_jobs.episodes "
            "SELECT 'default', wk || '-' || (g %% 7), wk, g %% 7, 'history:' || g, NULL, 'succeeded', "
            "'2000-01-01T00:00:00.000000+00:00', NULL, 'none', '{\"state\": \"none\"}', '{}', 1 "
            "FROM (SELECT g, format('%%s-W%%s', 1900 + g / 7 / 50, lpad((1 + (g / 7) %% 50)::text, 2, '0')) wk "
            "      FROM generate_series(0, %s) g) n",
            (HISTORY - 1,),
        )
        conn.execute(
            "CREATE TABLE public.bare"
            " (id bigserial PRIMARY KEY, key text NOT NULL, created_at text NOT NULL, record jsonb)"
        )
        conn.execute("ANALYZE")


def percentile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1]


def latency(url: str, count: int) -> dict[str, list[float]]:
    """Allocations and bare inserts, interleaved sample by sample in a shuffled order.

    Two bare inserts: one on a connection of the store's own pool (same driver, same pre-ping,
    the same bounded connections: what the store adds on top of its connections), one on a
    plain pooled psycopg connection (no bounds, no session options: what it adds on top of
    psycopg). Both see the same server, disk and load as the allocation next to them.
    """
    store = PostgresEpisodeStore(url)
    explicit = PostgresEpisodeStore(url, namespace="explicit")
    explicit.explicit_transaction = True
    plain = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1), pool_pre_ping=True)
    bare = "INSERT INTO public.bare (key, created_at, record) VALUES (%s, %s, %s)"
    record = Jsonb({"state": "none", "history": []})

    def insert(engine: sa.Engine, key: str) -> None:
        with engine.connect() as pooled:
            conn = pooled.connection.driver_connection
            assert isinstance(conn, psycopg.Connection)
            conn.execute(bare, (key, "2000-01-01T00:00:00.000000+00:00", record))
            conn.commit()

    def autocommit_insert(key: str) -> None:
        assert store._allocator is not None
        pooled = store._allocator.raw_connection()  # allocation's own pool: autocommit, no pre-ping
        try:
            conn = pooled.driver_connection
            assert isinstance(conn, psycopg.Connection) and conn.autocommit
            conn.execute(bare, (key, "2000-01-01T00:00:00.000000+00:00", record))
        finally:
            pooled.close()

    names = ("allocate", "retry", "explicit", "same pool", "plain", "autocommit")
    samples: dict[str, list[float]] = {name: [] for name in names}
    calls = {
        "allocate": lambda i, week: store.allocate(week, f"bench:{i}"),
        "retry": lambda i, week: store.allocate("2099-W01", "bench:-1"),
        "explicit": lambda i, week: explicit.allocate(week, f"explicit:{i}"),
        "same pool": lambda i, week: insert(store.engine, f"pool:{i}"),
        "plain": lambda i, week: insert(plain, f"plain:{i}"),
        "autocommit": lambda i, week: autocommit_insert(f"auto:{i}"),
    }
    weeks = [f"2100-W{1 + n // PER_WEEK % 50:02d}" for n in range(count)]
    try:
        for i in range(20):  # warm the pools, the prepared statements and the caches
            for call in calls.values():
                call(-1 - i, "2099-W01")
        order = list(calls)
        shuffle = random.Random(32).shuffle
        for i, week in enumerate(weeks):
            shuffle(order)  # what runs right after a commit pays for it: no fixed order
            for name in order:
                start = time.perf_counter()
                calls[name](i, week)
                samples[name].append(time.perf_counter() - start)
    finally:
        store.close()
        explicit.close()
        plain.dispose()
    return samples


class DelayProxy:
    """A TCP relay to the server that holds each client-to-server chunk for ``delay`` seconds.

    An allocation through it is slower by ``delay`` times the number of times the client sends
    and then waits for an answer: its round trips, counted on the wire rather than in the code.
    """

    def __init__(self, host: str, port: int, delay: float) -> None:
        self.target, self.delay = (host, port), delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, server, self.delay), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, 0.0), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, delay: float) -> None:
        """Forward ``src`` to ``dst``, each chunk ``delay`` after it arrived (back-to-back chunks: one delay)."""
        chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def send() -> None:
            try:
                while (item := chunks.get())[1]:
                    time.sleep(max(0.0, item[0] + delay - time.perf_counter()))
                    dst.sendall(item[1])
            except OSError:
                pass
            finally:
                for sock in (src, dst):
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        try:
            while chunk := src.recv(65536):
                chunks.put((time.perf_counter(), chunk))
        except OSError:
            pass
        chunks.put((time.perf_counter(), b""))

    def close(self) -> None:
        self.listener.close()


def round_trips(dbname: str, count: int = 30, delay: float = 0.02) -> tuple[dict[str, float], str]:
    """Round trips on the wire (through `DelayProxy`) of each call, and the session's bounds."""
    host, port = os.environ.get("PGHOST", "127.0.0.1"), int(os.environ.get("PGPORT", "5432"))

    timings: dict[str, dict[str, float]] = {}
    bounds = ""
    for wait in (0.0, delay):
        proxy = DelayProxy(host, port, wait)
        try:
            url = server_url(dbname).replace(f"@{host}:{port}/", f"@127.0.0.1:{proxy.port}/")
            timings[str(wait)], bounds = _timed_calls(url, f"trips{wait}", count)
        finally:
            proxy.close()
    trips = {name: (timings[str(delay)][name] - timings["0.0"][name]) / delay for name in timings["0.0"]}
    return trips, bounds


def _timed_calls(url: str, tag: str, count: int) -> tuple[dict[str, float], str]:
    """Mean seconds of each call on ``url``, and the bounds its sessions carry."""

    def insert(engine: sa.Engine, key: str) -> None:
        with engine.connect() as pooled:
            conn = pooled.connection.driver_connection
            assert isinstance(conn, psycopg.Connection)
            conn.execute("INSERT INTO public.bare (key, created_at) VALUES (%s, 'x')", (key,))
            conn.commit()

    def checkout(engine: sa.Engine) -> None:
        with engine.connect():
            pass

    def mean(call: Any) -> float:
        call(-1)  # warm: a connection in the pool, statements prepared
        start = time.perf_counter()
        for i in range(count):
            call(i)
        return (time.perf_counter() - start) / count

    store = PostgresEpisodeStore(url)
    explicit = PostgresEpisodeStore(url, namespace="explicit")
    explicit.explicit_transaction = True
    plain = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1), pool_pre_ping=True)
    try:
        store.allocate("2099-W04", f"{tag}:again")
        explicit.allocate("2099-W04", f"{tag}:warm")
        timings = {
            "allocate": mean(lambda i: store.allocate("2099-W04", f"{tag}:{i}")),
            "retry": mean(lambda i: store.allocate("2099-W04", f"{tag}:again")),
            "explicit": mean(lambda i: explicit.allocate("2099-W04", f"{tag}:{i}")),
            "pool checkout": mean(lambda i: checkout(store.engine)),
            "bare": mean(lambda i: insert(plain, f"{tag}:{i}")),
        }
        with store.engine.connect() as conn:
            shown = [
                f"{name}={conn.exec_driver_sql(f'SHOW {name}').scalar_one()}"
                for name in ("lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout")
            ]
        return timings, f"server {' '.join(shown)}; client {store.timeouts.answer:g}s per answer"
    finally:
        store.close()
        explicit.close()
        plain.dispose()


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def _client(url: str, namespace: str, tag: str, count: int, ready: Any, go: Any, results: Any) -> None:
    with PostgresEpisodeStore(url, namespace=namespace) as store:
        store.allocate("2099-W02", f"{tag}:warm")
        ready.wait(timeout=120)
        go.wait(timeout=120)
        start, cpu = time.perf_counter(), _cpu()
        for i in range(count):
            store.allocate(f"2101-W{1 + i % 50:02d}", f"{tag}:{i}")
        results.put((start, time.perf_counter(), _cpu() - cpu))


def server_cpu(url: str) -> float | None:
    """CPU seconds used so far by the server's processes (exited backends too), or None if /proc cannot tell.

    Exited backends are counted in the postmaster's children's time (``cutime``/``cstime``); the
    server must be on this machine and readable. Other databases' work on the same server counts too.
    """
    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT current_setting('data_directory')").fetchone()
        assert row is not None
        with open(os.path.join(str(row[0]), "postmaster.pid"), encoding="ascii") as pidfile:
            postmaster = int(pidfile.readline())
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid, ppid = int(entry), int(fields[1])
            if pid == postmaster or ppid == postmaster:
                total += int(fields[11]) + int(fields[12])
            if pid == postmaster:
                total += int(fields[13]) + int(fields[14])  # children that exited: the backends of past runs
        return total / tick
    except (OSError, ValueError, AssertionError, psycopg.Error):
        return None


@dataclasses.dataclass(frozen=True)
class Rate:
    """One throughput run: allocations per second, and CPU seconds per allocation (clients, server)."""

    per_second: float
    client_cpu: float
    server_cpu: float | None


def throughput(url: str, namespaces: int, clients: int, total: int) -> Rate:
    """Allocations per second of ``namespaces`` x ``clients`` processes, ``total`` allocations in all."""
    everyone = namespaces * clients
    # Both barriers include this process: between them every client is warm and waiting, and the
    # server's CPU is read.
    ready, go, results = SPAWN.Barrier(everyone + 1), SPAWN.Barrier(everyone + 1), SPAWN.Queue()
    per = total // everyone
    procs = [
        SPAWN.Process(
            target=_client,
            args=(url, f"tp{namespaces}-{n % namespaces}", f"c{everyone}-{n}", per, ready, go, results),
        )
        for n in range(everyone)
    ]
    for proc in procs:
        proc.start()
    ready.wait(timeout=120)
    server_before = server_cpu(url)
    go.wait(timeout=120)
    spans = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    time.sleep(0.3)  # the postmaster reaps the clients' backends: their CPU moves to its children's time
    server_after = server_cpu(url)
    wall = max(end for _, end, _ in spans) - min(start for start, _, _ in spans)
    done = per * everyone
    server = None if server_before is None or server_after is None else (server_after - server_before) / done
    return Rate(float(done / wall), sum(cpu for _, _, cpu in spans) / done, server)


def cpu_line(rate: Rate) -> str:
    """CPU per allocation: the clients' own (os.times), the server's (/proc) when readable."""
    server = "" if rate.server_cpu is None else f", server {rate.server_cpu * 1000:.3f}"
    return f"\n      CPU per allocation, ms: clients {rate.client_cpu * 1000:.3f}{server}"


def verdict(ratio: float, target: float, *, at_least: bool = False) -> str:
    ok = ratio >= target if at_least else ratio <= target
    return f"(target {'>=' if at_least else '<='} {target:g}x)  {'PASS' if ok else 'MISS'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000, help="allocations (and bare inserts) timed")
    parser.add_argument("--ops", type=int, default=1600, help="allocations per throughput run")
    args = parser.parse_args()
    dbname = f"ij_bench_{os.getpid()}"
    admin = server_url(os.environ.get("PGDATABASE", "postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    url = server_url(dbname)
    try:
        store = PostgresEpisodeStore(url)
        store.ensure_schema()
        store.close()
        build_history(url)
        samples = latency(url, args.samples)
        ms = 1000.0
        p50 = {name: statistics.median(values) * ms for name, values in samples.items()}
        p95 = {name: percentile(values, 95) * ms for name, values in samples.items()}
        print(f"PostgreSQL store, {HISTORY} episodes of history, {args.samples} samples each")
        labels = {
            "allocate": "allocate (autocommit call)",
            "retry": "retry (key found)",
            "explicit": "allocate in BEGIN RC..COMMIT",
            "same pool": "bare INSERT+COMMIT, store's pool",
            "plain": "bare INSERT+COMMIT, plain conn",
            "autocommit": "bare INSERT, autocommit, alloc pool",
        }
        for name, label in labels.items():
            print(f"  {label:34s} p50 {p50[name]:7.3f} ms   p95 {p95[name]:7.3f} ms")
        base = p50["same pool"]
        for name, target in (("allocate", TARGET_ALLOCATE), ("retry", TARGET_RETRY)):
            ratio = p50[name] / base
            print(f"  ratio p50 {name:8s} vs bare, same pool  {ratio:5.2f}x {verdict(ratio, target)}")
        for name in ("allocate", "explicit"):
            print(f"  ratio p50 {name:8s} vs bare, plain conn  {p50[name] / p50['plain']:5.2f}x")
        for name in ("allocate", "retry"):  # the floor: one autocommit statement, one round trip, no ping
            print(f"  ratio p50 {name:8s} vs autocommit INSERT  {p50[name] / p50['autocommit']:5.2f}x (information)")
        trips, bounds = round_trips(dbname)
        print(
            "  round trips on the wire: "
            + ", ".join(f"{name} {value:.1f}" for name, value in trips.items())
            + " (the pool checkout is the store's pool's pre-ping: reads and updates, not allocation)"
        )
        print(f"  bounds: {bounds}")
        one = throughput(url, 1, 1, args.ops)
        print(f"  throughput  1 namespace  x 1 client : {one.per_second:7.0f} allocations/s{cpu_line(one)}")
        for namespaces, clients, target in ((1, 16, TARGET_ONE_NAMESPACE), (4, 4, TARGET_FOUR_NAMESPACES)):
            rate = throughput(url, namespaces, clients, args.ops)
            ratio = rate.per_second / one.per_second
            print(
                f"  throughput {namespaces:2d} namespace(s) x {clients:2d} clients:"
                f" {rate.per_second:7.0f} allocations/s  ({ratio:4.2f}x of 1 client)"
                f" {verdict(ratio, target, at_least=True)}{cpu_line(rate)}"
            )
        # Information: clients that never share a lock. If these scale no better than one namespace's
        # 16 clients, the namespace's lock is not what limits them: the machine's CPU is.
        for namespaces in (2, 16):
            rate = throughput(url, namespaces, 1, args.ops)
            print(
                f"  throughput {namespaces:2d} namespace(s) x  1 client : {rate.per_second:7.0f} allocations/s"
                f"  ({rate.per_second / one.per_second:4.2f}x of 1 client, no lock shared: information){cpu_line(rate)}"
            )
        cores = os.cpu_count() or 1
        if one.server_cpu is not None:
            per = one.client_cpu + one.server_cpu
            print(
                f"  CPU ceiling: {cores} cores / {per * ms:.3f} ms of CPU per allocation (one client's clients +"
                f" server) = {cores / per:5.0f} allocations/s, {cores / per / one.per_second:4.2f}x of 1 client"
                " whatever the lock does"
            )
        return 0
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
