"""What the effects ledger costs, printed as figures and ratios from ONE run (these machines are noisy).

Run: ``.venv/bin/python benchmarks/effects.py [--postgres URL]`` (or ``make bench-effects``). Not a
test: it asserts nothing. For each store it times, p50 of alternating samples:

- a new effect (`EffectLedger.run`: the intent, an empty body, the outcome) against one bare
  ``store.update`` of the same episode, target <= 3x (two durable writes and a decision);
- a retry of a ``done`` effect (a decision under the lock, nothing written) against the same bare
  update, target <= 1.5x;
- a new effect on an episode that already holds 100 and 999 effects against one on an empty episode
  (each write rewrites the whole record: why `effect.MAX_EFFECTS` bounds it), context, not judged.
The PostgreSQL store needs schema version 6 (effects); ``--postgres`` takes a database of its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from airflow_idempotent_jobs import EpisodeStore, open_store
from airflow_idempotent_jobs.effects import EffectLedger

SAMPLES = 41


def p50(fn: Callable[[int], object], samples: int = SAMPLES) -> float:
    times = []
    for i in range(samples):
        start = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def alternating(a: Callable[[int], object], b: Callable[[int], object]) -> tuple[float, float]:
    """p50 of ``a`` and ``b``, sampled in turns so both see the same machine."""
    ta: list[float] = []
    tb: list[float] = []
    for i in range(SAMPLES):
        for fn, sink in ((a, ta), (b, tb)):
            start = time.perf_counter()
            fn(i)
            sink.append(time.perf_counter() - start)
    return statistics.median(ta), statistics.median(tb)


def new_effect(ledger: EffectLedger, episodes: list[str], name: str, i: int) -> object:
    """Sample ``i``: a new effect (``name`` formatted with ``i``) on ``episodes[i]``, with an empty body."""
    return ledger.run(episodes[i], name.format(i=i), lambda token: None)


def verdict(ratio: float, target: float | None) -> str:
    return "" if target is None else ("  PASS" if ratio <= target else "  MISS") + f" (target <= {target}x)"


def measure(label: str, store: EpisodeStore) -> None:
    ledger = EffectLedger(store)
    bare = store.allocate("2026-W32", f"{label}:bare").episode_id
    fresh = [store.allocate("2026-W35", f"{label}:fresh{i}").episode_id for i in range(SAMPLES)]
    new, update = alternating(
        lambda i: ledger.run(fresh[i], "publish", lambda token: {"ref": token}),
        lambda i: store.update(bare, lambda ep: dataclasses.replace(ep, updated_at=f"t{i}")),
    )
    print(
        f"{label}: new effect p50 {new * 1e3:.3f} ms, bare update {update * 1e3:.3f} ms: "
        f"{new / update:.2f}x{verdict(new / update, 3.0)}"
    )
    done = store.allocate("2026-W32", f"{label}:done").episode_id
    ledger.run(done, "publish", lambda token: {"ref": token})
    retry, update = alternating(
        lambda i: ledger.run(done, "publish", lambda token: {"ref": "never"}),
        lambda i: store.update(bare, lambda ep: dataclasses.replace(ep, updated_at=f"u{i}")),
    )
    print(
        f"{label}: retry of a done effect p50 {retry * 1e3:.3f} ms, bare update {update * 1e3:.3f} ms: "
        f"{retry / update:.2f}x{verdict(retry / update, 1.5)}"
    )
    for held in (100, 999):
        full = store.allocate("2026-W34", f"{label}:full{held}").episode_id
        for i in range(held - 15):
            ledger.run(full, f"fill[{i}]", lambda token: {"ref": token})
        grown = p50(functools.partial(new_effect, ledger, [full] * SAMPLES, "more[{i}]"), 15)
        base = p50(functools.partial(new_effect, ledger, fresh, f"more{held}"), 15)
        print(
            f"{label}: new effect on an episode holding ~{held} effects p50 {grown * 1e3:.3f} ms "
            f"vs one held {base * 1e3:.3f} ms: {grown / base:.1f}x (context, not judged)"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--postgres", help="a postgresql:// URL to measure the PostgreSQL store too")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-effects-") as tmp, open_store(str(Path(tmp) / "store")) as store:
        measure("file store", store)
    if args.postgres:
        with open_store(args.postgres) as store:
            measure("PostgreSQL", store)


if __name__ == "__main__":
    main()
