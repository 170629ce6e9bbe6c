"""What importing the operators adds to a DAG file's parse time.

Airflow parses DAG files constantly, and every DAG file that uses this provider imports
``airflow_idempotent_jobs.operators``. Each repetition is a fresh interpreter that imports
``airflow.sdk`` (what any DAG file pays anyway) and then the operators, timing the second import
alone. Reports the median over many repetitions against a 30 ms target, and which heavy
modules the operators import would pull in (none should: they are imported at run time).

    .venv/bin/python benchmarks/import_cost.py [--repeat 41]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from typing import Any, Final

TARGET_MS: Final = 30.0

#: Runs in the child: import the SDK, then the measured module; report times and new modules.
CHILD: Final = """
import json, sys, time
t0 = time.perf_counter()
import airflow.sdk
t1 = time.perf_counter()
before = set(sys.modules)
import {module}
t2 = time.perf_counter()
added = sorted(set(sys.modules) - before)
print(json.dumps({{"sdk_ms": (t1 - t0) * 1000, "module_ms": (t2 - t1) * 1000, "added": added}}))
"""

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

#: Modules that must not be imported by DAG parsing through our operators.
HEAVY: Final = ("httpx", "sqlalchemy", "psycopg", "airflow_idempotent_jobs.paid", "airflow_idempotent_jobs.hooks")


def measure(module: str | None) -> dict[str, Any]:
    code = REGISTRATION_CHILD if module is None else CHILD.format(module=module)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=41, help="fresh interpreters per measurement (default 41)")
    args = parser.parse_args()
    modules = ("airflow_idempotent_jobs", "airflow_idempotent_jobs.operators")
    samples: dict[str, list[float]] = {m: [] for m in modules}
    sdk: list[float] = []
    registration: list[float] = []
    added: dict[str, list[str]] = {}
    for _ in range(args.repeat):
        registration.append(measure(None)["ms"])
        for module in modules:  # interleaved, so drift in machine load hits both alike
            result = measure(module)
            samples[module].append(result["module_ms"])
            sdk.append(result["sdk_ms"])
            added[module] = result["added"]
    print(f"{args.repeat} fresh interpreters each; median (min..max) in ms")
    print(f"  import airflow.sdk (baseline every DAG file pays)    {_summary(sdk)}")
    for module in modules:
        print(f"  + import {module:<42} {_summary(samples[module])}")
    print(f"  provider registration (get_provider_info + our package) {_summary(registration)}")
    print("    (Airflow's providers manager runs get_provider_info() while airflow.sdk is imported, so this")
    print("     part is already inside the baseline above, for every Airflow process)")
    operators = added["airflow_idempotent_jobs.operators"]
    heavy = sorted({m for m in operators if any(m == h or m.startswith(h + ".") for h in HEAVY)})
    ours = [m for m in operators if m.startswith("airflow_idempotent_jobs")]
    print(f"  modules the operators import adds: {len(operators)} ({len(ours)} of ours)")
    print(f"  heavy modules pulled in by it: {', '.join(heavy) if heavy else 'none'}")
    median = statistics.median(samples["airflow_idempotent_jobs.operators"])
    verdict = "PASS" if median <= TARGET_MS and not heavy else "MISS"
    print(f"{verdict}: operators add {median:.1f} ms on top of airflow.sdk (target <= {TARGET_MS:.0f} ms)")
    return 0


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f}  ({min(values):.1f}..{max(values):.1f})"


if __name__ == "__main__":
    sys.exit(main())
