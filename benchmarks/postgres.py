"""Allocation cost of the PostgreSQL store, against a bare ``INSERT ... COMMIT`` on the same server.

Run: ``.venv/bin/python benchmarks/postgres.py`` (server from the ``PG*`` variables, default
``postgres@127.0.0.1:5432``). Not a test: it prints figures and a ratio with PASS/MISS.

- Latency: allocations (p50, p95) over a history of 20 000 episodes, interleaved sample by sample
  with one bare ``INSERT ... COMMIT`` of a row of a similar shape on a connection from the same
  pool (same driver, same pre-ping), so that both see the same server, disk and load. Target:
  allocation at most 2x the bare insert.
- Throughput: 1, 4 and 16 client processes allocating in one namespace (they all queue on its
  advisory lock, by design), in allocations per second of wall time.

It creates its own database (``ij_bench_<pid>``) and drops it at the end.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from typing import Any
from urllib.parse import quote

import psycopg
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
            "CREATE TABLE bare (id bigserial PRIMARY KEY, key text NOT NULL, created_at text NOT NULL, record jsonb)"
        )
        conn.execute("ANALYZE")


def percentile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1]


def latency(url: str, count: int) -> tuple[list[float], list[float]]:
    """Allocations and bare inserts, interleaved; both check a connection out of the same pool."""
    store = PostgresEpisodeStore(url)
    bare = "INSERT INTO bare (key, created_at, record) VALUES (%s, %s, %s)"
    record = Jsonb({"state": "none", "history": []})

    def insert(key: str) -> None:
        with store.engine.connect() as pooled:
            conn = pooled.connection.driver_connection
            assert isinstance(conn, psycopg.Connection)
            conn.execute(bare, (key, "2000-01-01T00:00:00.000000+00:00", record))
            conn.commit()

    allocations, inserts = [], []
    weeks = [f"2100-W{1 + n // PER_WEEK % 50:02d}" for n in range(count)]
    try:
        for i in range(20):  # warm the pool, the prepared statements and the caches
            store.allocate("2099-W01", f"warm:{i}")
            insert(f"warm:{i}")
        for i, week in enumerate(weeks):
            start = time.perf_counter()
            store.allocate(week, f"bench:{i}")
            allocations.append(time.perf_counter() - start)
            start = time.perf_counter()
            insert(f"bench:{i}")
            inserts.append(time.perf_counter() - start)
    finally:
        store.close()
    return allocations, inserts


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
        allocations, inserts = latency(url, args.samples)
        ms = 1000.0
        a50, a95 = statistics.median(allocations) * ms, percentile(allocations, 95) * ms
        b50, b95 = statistics.median(inserts) * ms, percentile(inserts, 95) * ms
        ratio50, ratio95 = a50 / b50, a95 / b95
        print(f"PostgreSQL store, {HISTORY} episodes of history, {args.samples} samples each")
        print(f"  allocate            p50 {a50:7.3f} ms   p95 {a95:7.3f} ms")
        print(f"  bare INSERT+COMMIT  p50 {b50:7.3f} ms   p95 {b95:7.3f} ms")
        for name, ratio in (("p50", ratio50), ("p95", ratio95)):
            verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
            print(f"  ratio {name} {ratio:5.2f}x (target <= {TARGET_RATIO:g}x)  {verdict}")
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
