"""Allocation cost of the file store, printed as figures and ratios from ONE run on one disk.

Run: ``.venv/bin/python benchmarks/allocate.py`` (or ``make bench``). Not a test: it asserts
nothing, it prints p50/p95 latencies, the cost of one bare durable write on the same disk, and the
throughput of 8 concurrent processes against 1, each ratio with PASS/MISS against its target.

After each history is built the disk is synced and left to settle, and the stores are deleted
only at the end: a burst of 40 000 new inodes, or a big delete on a disk mounted with
``discard``, slows the journal commits (and so every fsync) for seconds afterwards. Bare durable
writes are timed right before each case, so both figures of a ratio see the same disk.

History is built by writing episode records directly (no fsync, then one ``sync``) and rebuilding
the derived index through the store, so that 20 000 episodes take seconds, not a minute; the
measured allocations then go through the public ``allocate`` like any caller's.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from airflow_idempotent_jobs import FileEpisodeStore, WeekId
from airflow_idempotent_jobs.allocation import new_episode
from airflow_idempotent_jobs.stores.durable import dump_json, write_durable

#: Episodes per ISO week in the realistic histories (a busy weekly pipeline).
PER_WEEK = 7
#: The longest wait for the disk to settle after building a history (see `settle`).
SETTLE_LIMIT = 30.0
FIRST_WEEK = WeekId(1990, 1)


def weeks_from(start: WeekId) -> Iterator[WeekId]:
    week = start
    while True:
        yield week
        week = week.next()


def build_history(root: Path, count: int, *, per_week: int) -> WeekId:
    """``count`` committed episodes, ``per_week`` to a week; returns the first week after them."""
    weeks = weeks_from(FIRST_WEEK)
    week = next(weeks)
    for n in range(count):
        if n and n % per_week == 0:
            week = next(weeks)
        episode = new_episode(week, n % per_week, f"history:{n}", None)
        directory = root / "episodes" / str(week) / episode.episode_id
        directory.mkdir(parents=True)
        (directory / "state.json").write_bytes(dump_json(episode.to_record()))
    store = FileEpisodeStore(root)
    store.rebuild_index()  # the store writes its own index, markers and week histories
    os.sync()  # the history's dirty pages must not be flushed during the measurement
    return next(weeks)


def time_allocations(store: FileEpisodeStore, weeks: list[WeekId], tag: str) -> list[float]:
    samples = []
    for i, week in enumerate(weeks):
        start = time.perf_counter()
        store.allocate(week, f"{tag}:{i}")
        samples.append(time.perf_counter() - start)
    return samples


def measured_weeks(first: WeekId, count: int, per_week: int) -> list[WeekId]:
    weeks = weeks_from(first)
    out: list[WeekId] = []
    week = next(weeks)
    for n in range(count):
        if n and n % per_week == 0:
            week = next(weeks)
        out.append(week)
    return out


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency_case(root: Path, after: WeekId, same_week: bool, samples: int) -> list[float]:
    store = FileEpisodeStore(root)
    # All in one week: keep allocating in that same week, so its size is what is measured.
    weeks = [FIRST_WEEK] * (samples + 5) if same_week else measured_weeks(after, samples + 5, PER_WEEK)
    time_allocations(store, weeks[:5], "warm")
    return time_allocations(store, weeks[5:], "bench")


def settle(directory: Path, reference: float) -> float:
    """Sync, then wait (at most `SETTLE_LIMIT` s) until bare writes cost what they did at the start.

    Building a history writes thousands of inodes; the disk stays busy for seconds after that,
    and this measures allocation, not the aftermath of the build. Returns the seconds waited.
    """
    started = time.perf_counter()
    os.sync()
    while time.perf_counter() - started < SETTLE_LIMIT:
        if statistics.median(bare_durable_writes(directory, 20)) <= 1.25 * reference:
            break
        time.sleep(0.5)
    return time.perf_counter() - started


def bare_durable_writes(directory: Path, samples: int) -> list[float]:
    """temp file + fsync + rename + directory fsync, with a payload the size of an episode record."""
    directory.mkdir(exist_ok=True)
    record = new_episode(FIRST_WEEK, 0, "bare:write", None).to_record()
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        write_durable(directory / "state.json", record)
        times.append(time.perf_counter() - start)
    return times


def fresh_durable_writes(directory: Path, samples: int) -> list[float]:
    """The same durable write, but to a new name each time (context only: no ratio is judged on it).

    Like an allocation's record, each write adds a name and keeps its inode, where the bare write
    above replaces one file and so frees the inode it displaces.
    """
    directory.mkdir(exist_ok=True)
    record = new_episode(FIRST_WEEK, 0, "bare:write", None).to_record()
    first = len(os.listdir(directory))
    times = []
    for n in range(first, first + samples):
        start = time.perf_counter()
        write_durable(directory / f"state-{n}.json", record)
        times.append(time.perf_counter() - start)
    return times


def restore_case(root: Path, week: WeekId) -> tuple[float, float]:
    """Seconds of the first allocation in a ``cp -a`` copy of ``root``, then of the next one.

    A copied index is not sealed to its new directories: the first locked call verifies it
    against the weeks and rebuilds it (context: what a restore costs once, not a target).
    """
    copy = root.with_name(root.name + "-copy")
    subprocess.run(["cp", "-a", str(root), str(copy)], check=True)
    os.sync()
    store = FileEpisodeStore(copy)
    times = []
    for key in ("restore:first", "restore:next"):
        start = time.perf_counter()
        store.allocate(week, key)
        times.append(time.perf_counter() - start)
    return times[0], times[1]


def _worker(root: str, start_file: str, worker: int, count: int, out: multiprocessing.Queue[float]) -> None:
    store = FileEpisodeStore(root, lock_timeout=120)
    store.namespace  # noqa: B018  (open the store before the start line)
    weeks = measured_weeks(WeekId(2030, 1), count, PER_WEEK)
    while not os.path.exists(start_file):
        time.sleep(0.001)
    for i, week in enumerate(weeks):
        store.allocate(week, f"worker{worker}:{i}")
    out.put(time.perf_counter())


def throughput(base: Path, processes: int, total: int) -> float:
    """Allocations per second of ``processes`` spawned processes sharing ``total`` allocations."""
    root = base / f"tp{processes}"
    FileEpisodeStore(root).allocate("2029-W01", "warm")
    start_file = base / f"start{processes}"
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[float] = ctx.Queue()
    per = total // processes
    procs = [ctx.Process(target=_worker, args=(str(root), str(start_file), w, per, queue)) for w in range(processes)]
    for proc in procs:
        proc.start()
    time.sleep(1.5)  # every worker has imported and opened its store
    start = time.perf_counter()
    start_file.touch()
    ends = [queue.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    return per * processes / (max(ends) - start)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dir", default=None, help="where to build the stores (default: the temp dir)")
    parser.add_argument("--samples", type=int, default=300, help="allocations timed per case")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ij-bench-", dir=args.dir))
    ms = 1000.0
    try:
        print(f"file store benchmark in {base} (python {sys.version.split()[0]}, load {os.getloadavg()[0]:.2f})")
        cases = [(10, PER_WEEK), (1_000, PER_WEEK), (20_000, PER_WEEK), (1_000, 1_000)]
        reference = statistics.median(bare_durable_writes(base / "bare", 100))
        bare_samples: list[float] = []
        fresh_samples: list[float] = []
        results = {}
        afters = {}
        for history, per_week in cases:
            root = base / f"h{history}-w{per_week}"
            started = time.perf_counter()
            after = afters[(history, per_week)] = build_history(root, history, per_week=per_week)
            built = time.perf_counter() - started
            waited = settle(base / "bare", reference)
            # Bare writes right before each case, so both figures of a ratio see the same disk.
            bare_samples += bare_durable_writes(base / "bare", args.samples // 2)
            measured = latency_case(root, after, per_week >= history, args.samples)
            fresh_samples += fresh_durable_writes(base / "fresh", args.samples // 2)
            p50, p95 = statistics.median(measured), pct(measured, 0.95)
            results[(history, per_week)] = p50
            spread = f"{per_week}/week" if per_week < history else "all in the measured week"
            print(
                f"allocate with {history:>6} existing ({spread:>24}): p50 {p50 * ms:.3f} ms  p95 {p95 * ms:.3f} ms"
                f"  [built in {built:.1f} s, settled in {waited:.1f} s]"
            )
        bare = statistics.median(bare_samples)
        print(
            f"bare durable write (temp+fsync+rename+dir fsync): p50 {bare * ms:.3f} ms"
            f"  p95 {pct(bare_samples, 0.95) * ms:.3f} ms"
        )
        fresh = statistics.median(fresh_samples)
        print(
            f"(context, not judged) the same write to a new name each time: p50 {fresh * ms:.3f} ms"
            f"  p95 {pct(fresh_samples, 0.95) * ms:.3f} ms"
        )
        one = throughput(base, 1, 400)
        eight = throughput(base, 8, 400)
        print(f"throughput: 1 process {one:.0f} alloc/s, 8 processes {eight:.0f} alloc/s")
        first, following = restore_case(base / f"h20000-w{PER_WEEK}", afters[(20_000, PER_WEEK)].next())
        print(
            f"(context, not judged) in a cp -a copy of the 20 000 store: first allocation {first:.2f} s"
            f" (the copied index verified and rebuilt), the next {following * ms:.3f} ms"
        )

        small, large = results[(10, PER_WEEK)], results[(20_000, PER_WEEK)]
        same_week = results[(1_000, 1_000)]
        print("ratios (targets in brackets):")
        print(f"  p50 at 20 000 / p50 at 10  = {large / small:.2f}  [<= 1.2]  {verdict(large / small <= 1.2)}")
        print(f"  p50 at 10 / bare write     = {small / bare:.2f}  [<= 1.5]  {verdict(small / bare <= 1.5)}")
        print(f"  p50 at 20 000 / bare write = {large / bare:.2f}  [<= 1.5]  {verdict(large / bare <= 1.5)}")
        print(f"  8 processes / 1 process    = {eight / one:.2f}  [>= 0.9]  {verdict(eight / one >= 0.9)}")
        print(f"  (no target) 1 000 in one week / p50 at 10 = {same_week / small:.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
