"""`CheckEpisodesOperator`: execute() against a real migrated store, in one real Airflow process.

The operator runs in a child interpreter with a throwaway ``AIRFLOW_HOME`` (importing Airflow
writes its config there), and every scenario runs in that one process to pay Airflow's import once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from airflow_idempotent_jobs.cli import main
from tests.legacy_fixtures import make_legacy

SCENARIOS = r"""
import json, sys
store, manifest = sys.argv[1], sys.argv[2]
from airflow_idempotent_jobs.operators.check_episodes import CheckEpisodesOperator
heavy = [m for m in ("airflow_idempotent_jobs.store_check", "airflow_idempotent_jobs.migration.manifest",
                     "airflow_idempotent_jobs.migration.legacy", "airflow_idempotent_jobs.stores.file._check")
         if m in sys.modules]
results = {"heavy_imports": heavy, "template_fields": list(CheckEpisodesOperator.template_fields)}

def run(name, **kwargs):
    op = CheckEpisodesOperator(task_id=name.replace(" ", "_"), store=store, **kwargs)
    try:
        results[name] = ["ok", op.execute({})]
    except Exception as exc:
        results[name] = ["fail", type(exc).__name__, str(exc)]

run("healthy week", week="2026-W28", manifest=manifest)
run("named ids", episode_ids="2026-W30-0, 2026-W31-0")
run("empty week", week="2026-W40")
run("bad id", episode_ids="2026-W99-0")
cover = sys.argv[3]
data = bytearray(open(cover, "rb").read()); data[100] ^= 1; open(cover, "wb").write(bytes(data))
run("tampered week", week="2026-W29")
run("tampered with manifest", week="2026-W29", manifest=manifest, max_reported=1)
run("whole store", manifest=manifest)
print(json.dumps(results))
"""


def test_check_operator_fails_the_task_with_the_findings(tmp_path: Path, capsys) -> None:
    legacy, store = make_legacy(tmp_path / "legacy", bad=False), tmp_path / "store"
    assert main(["--store", str(store), "migrate", "--from", str(legacy), "--apply"]) == 0
    capsys.readouterr()
    (manifest,) = (store / "migrations").glob("manifest-*.json")
    cover = store / "episodes" / "2026-W29" / "2026-W29-0" / "legacy" / "cover.jpg"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(tmp_path / "airflow-home"), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    done = subprocess.run(
        [sys.executable, "-c", SCENARIOS, str(store), str(manifest), str(cover)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.splitlines()[-1])
    assert results["heavy_imports"] == []
    assert set(results["template_fields"]) >= {"episode_ids", "week", "manifest", "store"}
    assert results["healthy week"] == ["ok", ["2026-W28-0"]]
    assert results["named ids"] == ["ok", ["2026-W30-0", "2026-W31-0"]]
    assert results["empty week"][:2] == ["fail", "AirflowFailException"]
    assert "week 2026-W40 has no episodes" in results["empty week"][2]
    assert results["bad id"][:2] == ["fail", "AirflowFailException"] and "2026-W99-0" in results["bad id"][2]
    kind, name, message = results["tampered week"]
    assert (kind, name) == ("fail", "AirflowFailException")
    assert message.startswith("check of 2026-W29-0 in ") and "found 1 problem:\n" in message
    assert f"{cover}: sha256 " in message
    message = results["tampered with manifest"][2]
    assert "found 2 problems:\n" in message and message.endswith("... and 1 more (see the log)")
    assert results["whole store"][:2] == ["fail", "AirflowFailException"]
    assert "check of every episode" in results["whole store"][2]
