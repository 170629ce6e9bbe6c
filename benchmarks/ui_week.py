"""The page stays fast: a week's JSON against listing that week through the library.

Run: ``.venv/bin/python benchmarks/ui_week.py [--samples N] [--no-postgres]``. Not a test: it
prints figures and, per store and case, the ratio with PASS/FAIL against the page's target:

- the whole week view (`operations.week_view`, as ``report --json`` prints it) serialised with
  ``json.dumps`` takes under 10x the time of ``store.list(week)``, on a store of 20 000 episodes
  whose measured week holds 500;
- the page's JSON for a week of 5 000 episodes (totals of the whole week, one page of 100 rows:
  `week_rows.RowQuery`), by default and sorted by cost with a search, takes at most 3x
  ``store.list(week)``, on a store of 20 000 episodes.

The two are timed alternately, sample by sample, in one run on one disk (or server), so both see
the same cache and load; the ratio is of the two p50s. The measured week is realistic: paid jobs
with their ledger history, costs and results, approvals, a few unknown and stale submissions.
History is written as records directly (file store: then its index rebuilt by the store;
PostgreSQL: rows inserted in one transaction into a database of its own, ``ij_bench_ui_<pid>``,
dropped at the end), so building takes seconds; the timed reads go through the public API.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from airflow_idempotent_jobs import EpisodeStore, FileEpisodeStore, WeekId, open_store
from airflow_idempotent_jobs.allocation import new_episode
from airflow_idempotent_jobs.episode import Approval, Decision, Episode, EpisodeStatus, Submission, SubmissionState
from airflow_idempotent_jobs.operations import week_view
from airflow_idempotent_jobs.stores.durable import dump_json
from airflow_idempotent_jobs.week_rows import RowQuery

TOTAL = 20_000
MEASURED = WeekId(2026, 32)


@dataclasses.dataclass(frozen=True)
class Case:
    """One measurement: a week of ``week_size`` episodes, the view timed against listing it, its target."""

    name: str
    week_size: int
    target: float
    #: What the view is given: None, the whole week; else the page's query (one page of rows).
    queries: tuple[tuple[str, RowQuery | None], ...]


CASES = (
    Case("whole week (report --json)", 500, 10.0, (("json.dumps(week_view(...))", None),)),
    Case(
        "the page, a week of 5 000",
        5_000,
        3.0,
        (
            ("page 1 of 100 rows", RowQuery()),
            ("sorted by cost, searched", RowQuery(search="job-", sort="cost", descending=True, page=3)),
        ),
    ),
)
#: The other episodes fill earlier weeks, this many to a week.
PER_OLD_WEEK = 500
NOW = dt.datetime(2026, 8, 7, 12, tzinfo=dt.timezone.utc)
_S = SubmissionState


def _paid(ep: Episode, n: int) -> Episode:
    """Episode ``n`` of the measured week in a realistic state (mostly paid and done)."""
    at = (NOW - dt.timedelta(hours=3)).isoformat()
    moves = [("none", "submitting"), ("submitting", "accepted"), ("accepted", "succeeded")]
    history = tuple({"from": a, "to": b, "at": at, "note": "bench"} for a, b in moves)
    sub = Submission(
        state=_S.SUCCEEDED,
        token=f"aij-{ep.episode_id}-{n:032x}",
        remote_ref=f"job-{n:012x}",
        remote_state="succeeded",
        cost=1.25,
        result={"url": f"https://media.invalid/{n}.mp4", "seconds": 30},
        attempts=1,
        estimated_cost=1.5,
        claimed_by="worker-1:4242:abcd1234",
        claimed_at=at,
        updated_at=at,
        history=history,
        request_fingerprint="sha256:" + "ab" * 32,
    )
    status = EpisodeStatus.SUCCEEDED
    if n % 50 == 1:
        sub = dataclasses.replace(sub, state=_S.UNKNOWN, cost=None, remote_ref=None, history=history[:1])
        status = EpisodeStatus.RUNNING
    elif n % 50 == 2:
        sub = dataclasses.replace(sub, state=_S.SUBMITTING, cost=None, remote_ref=None, history=history[:1])
        status = EpisodeStatus.RUNNING
    approval = Approval()
    if n % 5 == 0:
        event = {"event": "approved", "by": "alice", "at": at, "comment": None, "via": "airflow"}
        asked = {"event": "asked", "by": "weekly.approve", "at": at, "comment": None, "via": "airflow"}
        approval = Approval(Decision.APPROVED, "alice", at, None, "airflow", (asked, event))
    return dataclasses.replace(ep, status=status, submission=sub, approval=approval, updated_at=at)


def episodes(week_size: int) -> list[Episode]:
    """TOTAL episodes: ``week_size`` in MEASURED, the rest in the weeks before it."""
    out = []
    run = "scheduled__2026-08-03T10:00:00+00:00"
    for n in range(week_size):
        ep = new_episode(MEASURED, n, f"airflow:weekly_media:generate:{run}:{n}", None)
        out.append(_paid(ep, n))
    week = WeekId(2020, 1)
    for n in range(TOTAL - week_size):
        if n and n % PER_OLD_WEEK == 0:
            week = week.next()
        out.append(new_episode(week, n % PER_OLD_WEEK, f"history:{n}", None))
    return out


def build_file(root: Path, eps: list[Episode]) -> FileEpisodeStore:
    for ep in eps:
        directory = root / "episodes" / ep.week_id / ep.episode_id
        directory.mkdir(parents=True)
        (directory / "state.json").write_bytes(dump_json(ep.to_record()))
    store = FileEpisodeStore(root)
    store.rebuild_index()
    os.sync()
    return store


def build_postgres(url: str, eps: list[Episode]) -> EpisodeStore:
    import psycopg

    from airflow_idempotent_jobs.stores.postgres._rows import row_values

    store = open_store(url)
    store.allocate("1999-W01", "bench:schema")  # creates the schema and the store's identity
    namespace = store.namespace
    rows = [row_values(namespace, ep) for ep in eps]
    weeks: dict[str, int] = {}
    for ep in eps:
        weeks[ep.week_id] = max(weeks.get(ep.week_id, -1), ep.sequence)
    columns = ", ".join(rows[0])
    values = ", ".join(
        f"%({k})s::idempotent_jobs.submission_state" if k == "submission_state" else f"%({k})s" for k in rows[0]
    )
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO idempotent_jobs.weeks (namespace, week_id, highest_sequence) VALUES (%s, %s, %s)",
            [(namespace, week, high) for week, high in weeks.items()],
        )
        cur.executemany(f"INSERT INTO idempotent_jobs.episodes ({columns}) VALUES ({values})", rows)
        cur.execute("ANALYZE")
    return store


def measure(store: EpisodeStore, case: Case, query: RowQuery | None, samples: int) -> tuple[list[float], list[float]]:
    """(list times, view times), taken alternately after a warm-up of each."""

    def timed(action: Callable[[], object]) -> float:
        start = time.perf_counter()
        action()
        return time.perf_counter() - start

    def listing() -> object:
        return store.list(MEASURED)

    def view() -> object:
        return json.dumps(week_view(store, MEASURED, budget=1000.0, now=NOW, rows=query), allow_nan=False)

    assert len(store.list(MEASURED)) == case.week_size
    listing(), view()
    lists, views = [], []
    for _ in range(samples):
        lists.append(timed(listing))
        views.append(timed(view))
    return lists, views


def report(store_name: str, case: Case, build_seconds: float, store: EpisodeStore, samples: int) -> bool:
    print(
        f"{store_name}, {case.name}: store of {TOTAL} episodes built in {build_seconds:.1f} s; "
        f"week {MEASURED} of {case.week_size}, {samples} samples each"
    )
    ok = True
    for label, query in case.queries:
        lists, views = measure(store, case, query, samples)
        p50_list, p50_view = statistics.median(lists), statistics.median(views)
        ratio = p50_view / p50_list
        passed = ratio <= case.target
        ok &= passed
        print(f"  store.list(week)               p50 {p50_list * 1000:8.1f} ms  (min {min(lists) * 1000:.1f})")
        print(f"  {label:<30} p50 {p50_view * 1000:8.1f} ms  (min {min(views) * 1000:.1f})")
        print(f"  {'PASS' if passed else 'FAIL'}: ratio {ratio:.2f}x (target <= {case.target:g}x)")
    return ok


def _pg_admin_url(dbname: str) -> str:
    user = os.environ.get("PGUSER", "postgres")
    password = os.environ.get("PGPASSWORD")
    auth = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "")
    return f"postgresql://{auth}@{os.environ.get('PGHOST', '127.0.0.1')}:{os.environ.get('PGPORT', '5432')}/{dbname}"


def run_postgres(case: Case, eps: list[Episode], samples: int) -> bool:
    import psycopg

    dbname = f"ij_bench_ui_{os.getpid()}"
    admin = _pg_admin_url(os.environ.get("PGDATABASE", "postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    try:
        started = time.perf_counter()
        store = build_postgres(_pg_admin_url(dbname), eps)
        built = time.perf_counter() - started
        try:
            return report("postgres", case, built, store, samples)
        finally:
            store.close()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--no-postgres", action="store_true", help="the file store only")
    args = parser.parse_args()
    ok = True
    for case in CASES:
        eps = episodes(case.week_size)
        root = Path(tempfile.mkdtemp(prefix="ij-bench-ui-"))
        try:
            started = time.perf_counter()
            store = build_file(root / "store", eps)
            ok &= report("file", case, time.perf_counter() - started, store, args.samples)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if not args.no_postgres:
            ok &= run_postgres(case, eps, args.samples)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
