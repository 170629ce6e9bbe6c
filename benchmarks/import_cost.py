"""What this provider adds to a DAG file's parse time: the operators and the TaskFlow decorators.

Airflow parses DAG files constantly, and every DAG file that uses this provider imports
``airflow_idempotent_jobs.operators`` or applies ``@task.paid_generation`` / ``@task.episode``.
Each repetition is a fresh interpreter that imports ``airflow.sdk`` (what any DAG file pays
anyway), then times what a DAG file of each kind adds:

* classic: ``import airflow_idempotent_jobs.operators``;
* TaskFlow: ``from airflow.sdk import task`` is Airflow's own TaskFlow machinery, which every
  TaskFlow DAG file pays with or without this provider (timed and shown apart); on top of it, the
  operators plus ``task.paid_generation(...)`` and ``task.episode(...)`` as a DAG file applies them
  (name resolution through the provider info, and the decorators' modules loading).

Our modules are imported from compiled bytecode, as from an installed wheel (pip compiles it): the
children keep their caches in a temporary ``PYTHONPYCACHEPREFIX`` and one untimed run fills it.
``--no-bytecode-cache`` measures as the environment says instead (with ``PYTHONDONTWRITEBYTECODE=1``
an editable checkout compiles our modules on every import, which a deployment does not pay).

Reports medians over many repetitions against a 10 ms target, the same for the TaskFlow total on
top of ``airflow.sdk`` alone (for information), and which heavy modules either path pulls in
(none should: stores, hooks and the paid layer load at run time).

    .venv/bin/python benchmarks/import_cost.py [--repeat 41] [--no-bytecode-cache]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any, Final

TARGET_MS: Final = 10.0

#: Runs in the child: import the SDK, run ``setup`` (timed apart), then time ``measured`` and list
#: the modules it added.
CHILD: Final = """
import json, sys, time
t0 = time.perf_counter()
import airflow.sdk
t1 = time.perf_counter()
{setup}
t2 = time.perf_counter()
before = set(sys.modules)
{measured}
t3 = time.perf_counter()
added = sorted(set(sys.modules) - before)
print(json.dumps({{"sdk_ms": (t1 - t0) * 1000, "setup_ms": (t2 - t1) * 1000, "ms": (t3 - t2) * 1000, "added": added}}))
"""

#: What each kind of DAG file does: (setup, measured).
CASES: Final[dict[str, tuple[str, str]]] = {
    "import airflow_idempotent_jobs": ("", "import airflow_idempotent_jobs"),
    "classic: import ...operators": ("", "import airflow_idempotent_jobs.operators"),
    "TaskFlow: operators + @task.paid_generation/@task.episode": (
        "from airflow.sdk import task",
        "import airflow_idempotent_jobs.operators\n"
        "task.paid_generation(provider_conn_id='media_provider', episode_id='2026-W01-0')\n"
        "task.episode(episode_id='2026-W01-0')",
    ),
}
CLASSIC: Final = "classic: import ...operators"
TASKFLOW: Final = "TaskFlow: operators + @task.paid_generation/@task.episode"

#: Runs in the child: what registering this provider costs inside an Airflow process. Airflow's
#: providers manager already imported our package while ``airflow.sdk`` was imported; drop it
#: (and filelock, which only we bring) and time the import again, the stdlib being warm as in Airflow.
REGISTRATION_CHILD: Final = """
import json, sys, time
import airflow.sdk
for name in [m for m in sys.modules if m.split(".")[0] in ("airflow_idempotent_jobs", "filelock")]:
    del sys.modules[name]
t0 = time.perf_counter()
from airflow_idempotent_jobs.get_provider_info import get_provider_info
get_provider_info()
print(json.dumps({"ms": (time.perf_counter() - t0) * 1000}))
"""

#: Modules that must not be imported by DAG parsing through our operators or decorators.
HEAVY: Final = ("httpx", "sqlalchemy", "psycopg", "airflow_idempotent_jobs.paid", "airflow_idempotent_jobs.hooks")


def measure(code: str, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, env=env
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=41, help="fresh interpreters per measurement (default 41)")
    parser.add_argument(
        "--no-bytecode-cache", action="store_true", help="import as the environment says (maybe compiling every time)"
    )
    args = parser.parse_args()
    if args.no_bytecode_cache:
        return run(args.repeat, dict(os.environ), "bytecode as the environment says")
    with tempfile.TemporaryDirectory(prefix="ij-pycache-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for code in (REGISTRATION_CHILD, *(CHILD.format(setup=s, measured=m) for s, m in CASES.values())):
            measure(code, env)  # untimed: compiles every module once, as installing a wheel does
        return run(args.repeat, env, "compiled bytecode cached, as installed")


def run(repeat: int, env: dict[str, str], mode: str) -> int:
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    sdk: list[float] = []
    airflow_task: list[float] = []
    taskflow_total: list[float] = []
    registration: list[float] = []
    added: dict[str, list[str]] = {}
    for _ in range(repeat):
        registration.append(measure(REGISTRATION_CHILD, env)["ms"])
        for name, (setup, measured) in CASES.items():  # interleaved, so drift in machine load hits all alike
            result = measure(CHILD.format(setup=setup, measured=measured), env)
            samples[name].append(result["ms"])
            sdk.append(result["sdk_ms"])
            added[name] = result["added"]
            if setup:
                airflow_task.append(result["setup_ms"])
                taskflow_total.append(result["setup_ms"] + result["ms"])
    print(f"{repeat} fresh interpreters each ({mode}); median (min..max) in ms")
    print(f"  import airflow.sdk (baseline every DAG file pays)          {_summary(sdk)}")
    for name in CASES:
        print(f"  + {name:<57} {_summary(samples[name])}")
    print(f"  Airflow's own `from airflow.sdk import task` (any TaskFlow DAG) {_summary(airflow_task)}")
    print(f"  TaskFlow total on top of airflow.sdk alone (both lines above)  {_summary(taskflow_total)}")
    print(f"  provider registration (get_provider_info + our package)        {_summary(registration)}")
    print("    (Airflow's providers manager runs get_provider_info() while airflow.sdk is imported, so this")
    print("     part is already inside the baseline above, for every Airflow process)")
    heavy: set[str] = set()
    for name in (CLASSIC, TASKFLOW):
        ours = [m for m in added[name] if m.startswith("airflow_idempotent_jobs")]
        print(f"  modules {name.split(':')[0]} adds: {len(added[name])} ({len(ours)} of ours)")
        heavy |= {m for m in added[name] if any(m == h or m.startswith(h + ".") for h in HEAVY)}
    print(f"  heavy modules pulled in: {', '.join(sorted(heavy)) if heavy else 'none'}")
    classic, taskflow = statistics.median(samples[CLASSIC]), statistics.median(samples[TASKFLOW])
    verdict = "PASS" if max(classic, taskflow) <= TARGET_MS and not heavy else "MISS"
    print(
        f"{verdict}: the operators add {classic:.1f} ms on top of airflow.sdk; the operators and both decorators "
        f"add {taskflow:.1f} ms on top of airflow.sdk and Airflow's @task (target <= {TARGET_MS:.0f} ms)"
    )
    return 0


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f}  ({min(values):.1f}..{max(values):.1f})"


if __name__ == "__main__":
    sys.exit(main())
