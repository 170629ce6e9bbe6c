"""Allocation cost of the PostgreSQL store, against a bare ``INSERT ... COMMIT`` on the same server.

Run: ``.venv/bin/python benchmarks/postgres.py`` (server from the ``PG*`` variables, default
``postgres@127.0.0.1:5432``). Not a test: it prints figures and a ratio with PASS/MISS.

- Latency: allocations (p50, p95) over a history of 20 000 episodes, interleaved sample by sample
  with a bare ``INSERT ... COMMIT`` of a row of a similar shape, once on a connection of the
  store's pool (same driver, same pre-ping, same bounded connection) and once on a plain pooled
  psycopg connection (none of the store's bounds or session options), so that all see the same
  server, disk and load. Target: allocation at most 2x the bare insert.
- Round trips: allocations and bare inserts through a relay that delays each client-to-server
  chunk by 20 ms; the extra time over 20 ms is the number of round trips. The store's bounds
  are set once per connection (startup packet), so they add none.
- Throughput: 1, 4 and 16 client processes allocating in one namespace (they all queue on its
  advisory lock, by design), in allocations per second of wall time.

It creates its own database (``ij_bench_<pid>``) and drops it at the end.
"""

from __future__ import annotations

import argparse
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

TARGET_RATIO = 2.0
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
    plain = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1), pool_pre_ping=True)
    bare = "INSERT INTO public.bare (key, created_at, record) VALUES (%s, %s, %s)"
    record = Jsonb({"state": "none", "history": []})

    def insert(engine: sa.Engine, key: str) -> None:
        with engine.connect() as pooled:
            conn = pooled.connection.driver_connection
            assert isinstance(conn, psycopg.Connection)
            conn.execute(bare, (key, "2000-01-01T00:00:00.000000+00:00", record))
            conn.commit()

    samples: dict[str, list[float]] = {"allocate": [], "same pool": [], "plain": []}
    calls = {
        "allocate": lambda i, week: store.allocate(week, f"bench:{i}"),
        "same pool": lambda i, week: insert(store.engine, f"pool:{i}"),
        "plain": lambda i, week: insert(plain, f"plain:{i}"),
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


def round_trips(dbname: str, count: int = 30, delay: float = 0.02) -> tuple[float, float, str]:
    """Round trips of one allocation and of one bare insert (through `DelayProxy`), and the session's bounds."""
    host, port = os.environ.get("PGHOST", "127.0.0.1"), int(os.environ.get("PGPORT", "5432"))

    def mean_allocate(store: PostgresEpisodeStore, tag: str) -> float:
        store.allocate("2099-W04", f"{tag}:warm")
        start = time.perf_counter()
        for i in range(count):
            store.allocate("2099-W04", f"{tag}:{i}")
        return (time.perf_counter() - start) / count

    def mean_insert(engine: sa.Engine, tag: str) -> float:
        def insert(key: str) -> None:
            with engine.connect() as pooled:
                conn = pooled.connection.driver_connection
                assert isinstance(conn, psycopg.Connection)
                conn.execute("INSERT INTO public.bare (key, created_at) VALUES (%s, 'x')", (key,))
                conn.commit()

        insert(f"{tag}:warm")
        start = time.perf_counter()
        for i in range(count):
            insert(f"{tag}:{i}")
        return (time.perf_counter() - start) / count

    timings: dict[str, float] = {}
    bounds = ""
    for wait in (0.0, delay):
        proxy = DelayProxy(host, port, wait)
        url = server_url(dbname).replace(f"@{host}:{port}/", f"@127.0.0.1:{proxy.port}/")
        store = PostgresEpisodeStore(url)
        plain = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1), pool_pre_ping=True)
        try:
            timings[f"allocate {wait}"] = mean_allocate(store, f"trips{wait}")
            timings[f"insert {wait}"] = mean_insert(plain, f"trips{wait}")
            if wait:
                with store.engine.connect() as conn:
                    shown = [
                        f"{name}={conn.exec_driver_sql(f'SHOW {name}').scalar_one()}"
                        for name in ("lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout")
                    ]
                bounds = f"server {' '.join(shown)}; client {store.timeouts.answer:g}s per answer"
        finally:
            store.close()
            plain.dispose()
            proxy.close()
    allocate = (timings[f"allocate {delay}"] - timings["allocate 0.0"]) / delay
    insert = (timings[f"insert {delay}"] - timings["insert 0.0"]) / delay
    return allocate, insert, bounds


def _client(url: str, tag: str, count: int, barrier: Any, results: Any) -> None:
    with PostgresEpisodeStore(url) as store:
        store.allocate("2099-W02", f"{tag}:warm")
        barrier.wait(timeout=120)
        start = time.perf_counter()
        for i in range(count):
            store.allocate(f"2101-W{1 + i % 50:02d}", f"{tag}:{i}")
        results.put((start, time.perf_counter()))


def throughput(url: str, clients: int, total: int) -> float:
    barrier, results = SPAWN.Barrier(clients), SPAWN.Queue()
    per = total // clients
    procs = [
        SPAWN.Process(target=_client, args=(url, f"c{clients}-{n}", per, barrier, results)) for n in range(clients)
    ]
    for proc in procs:
        proc.start()
    spans = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    wall = max(end for _, end in spans) - min(start for start, _ in spans)
    return float(per * clients / wall)


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
        print(f"  allocate                            p50 {p50['allocate']:7.3f} ms   p95 {p95['allocate']:7.3f} ms")
        for name, label in (("same pool", "the store's pool"), ("plain", "a plain connection")):
            print(f"  bare INSERT+COMMIT, {label:18s} p50 {p50[name]:7.3f} ms   p95 {p95[name]:7.3f} ms")
        for name in ("same pool", "plain"):
            for q, figures in (("p50", p50), ("p95", p95)):
                ratio = figures["allocate"] / figures[name]
                verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
                print(f"  ratio {q} vs {name:9s} {ratio:5.2f}x (target <= {TARGET_RATIO:g}x)  {verdict}")
        trips, bare_trips, bounds = round_trips(dbname)
        print(f"  round trips on the wire: allocate {trips:.1f}, bare INSERT+COMMIT {bare_trips:.1f}")
        print(f"  bounds: {bounds}")
        base = None
        for clients in (1, 4, 16):
            rate = throughput(url, clients, args.ops)
            base = base or rate
            print(f"  throughput {clients:2d} client(s): {rate:7.0f} allocations/s  ({rate / base:4.2f}x of 1 client)")
        return 0
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
