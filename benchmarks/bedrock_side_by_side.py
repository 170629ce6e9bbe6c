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

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._side_by_side import side_by_side_main  # noqa: E402
from tests.airflow.bedrock_scenarios import SOURCES, launch, markdown  # noqa: E402

NOTE = (
    "Billed jobs as the control-plane double counted them; the run's state (tries of the paying task)."
    "\nboto3 fills one clientRequestToken per call and resends it on its own attempts, so Airflow's operator"
    "\nmakes one job within a try; its next try is a new call: a new token, the same job name."
)


def main(argv: list[str] | None = None) -> int:
    return side_by_side_main(
        argv,
        prog="benchmarks/bedrock_side_by_side.py",
        doc=__doc__,
        sources=SOURCES,
        launch=launch,
        table=lambda results: markdown(results["side_by_side"]["table"]),
        note=NOTE,
    )


if __name__ == "__main__":
    sys.exit(main())
