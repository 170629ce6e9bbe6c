"""Airflow's BedrockBatchInferenceOperator against ours: billed batch inference jobs per fault, as a Markdown table.

``.venv/bin/python benchmarks/bedrock_side_by_side.py [--json OUT.json]`` makes a throwaway Airflow
home (SQLite, migrated: about 10 s), starts local doubles of Bedrock's runtime and control plane in
their own processes and runs ``tests/airflow/bedrock_scenarios.py`` in one ``dag.test()`` process:
the same weekly batch job through ``BedrockBatchInferenceOperator`` and our ``PaidGenerationOperator``
on ONE ``aws`` connection (real boto3, its default retries), with no fault, one attempt's answer
lost, every attempt of the first try lost, and a worker SIGKILLed while the answer was held; once
with job names Bedrock refuses while in use and once with reusable ones (AWS documents neither for
batch jobs). Billed jobs are counted by the double. Everything runs on 127.0.0.1; the home is
deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.airflow.bedrock_scenarios import SOURCES, launch, markdown  # noqa: E402
from tests.airflow.llm_side_by_side_scenarios import migrated_home  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/bedrock_side_by_side.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the runner's whole results here")
    parser.add_argument("--keep", action="store_true", help="keep the Airflow home (its log: work/scenarios.log)")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="bedrock-side-by-side-"))
    try:
        started = time.monotonic()
        where = migrated_home(home, SOURCES)
        migrated = time.monotonic()
        results = launch(where)
        done = time.monotonic()
        print(markdown(results["side_by_side"]["table"]))
        print(
            "\nBilled jobs as the control-plane double counted them; the run's state (tries of the paying task)."
            "\nboto3 fills one clientRequestToken per call and resends it on its own attempts, so Airflow's operator"
            "\nmakes one job within a try; its next try is a new call: a new token, the same job name."
            f"\nMigrating the metadata database {migrated - started:.0f} s, the runs {done - migrated:.0f} s."
        )
        if args.json is not None:
            args.json.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    finally:
        if args.keep:
            print(f"home kept: {home}", file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
