"""Airflow's own LLM batch operators against ours: billed batches per lost answer, as a Markdown table.

``.venv/bin/python benchmarks/llm_side_by_side.py [--json OUT.json]`` makes a throwaway Airflow
home (SQLite, migrated: about 10 s), starts local doubles of the OpenAI and Anthropic batch APIs in
their own processes and runs the scenarios of ``tests/airflow/llm_side_by_side_scenarios.py`` in
one ``dag.test()`` process: the same weekly DAG through ``OpenAITriggerBatchOperator``,
``LLMBatchOperator`` (OpenAI and Anthropic), ``AnthropicBatchOperator`` and our
``PaidGenerationOperator``, with no fault, one lost "create batch" answer, and three
(``retries=3``, no delay). Billed batches are counted by the doubles. Everything runs on
127.0.0.1; the home is deleted afterwards unless ``--keep``.
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

from tests.airflow.llm_side_by_side_scenarios import markdown, migrated_home, run_side_by_side  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/llm_side_by_side.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the runner's whole results here")
    parser.add_argument("--keep", action="store_true", help="keep the Airflow home (its log: work/scenarios.log)")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="llm-side-by-side-"))
    try:
        started = time.monotonic()
        where = migrated_home(home)
        migrated = time.monotonic()
        results = run_side_by_side(where)
        done = time.monotonic()
        print(markdown(results["table"]))
        print(
            "\nBilled batches as the APIs' doubles counted them; the run's state (tries of the paying task)."
            "\nOurs on Anthropic adopts a lost batch once every batch created since its intent has ended (the"
            "\ndouble ends one 0.05 s after creation; Anthropic's API within 24 h): until then a try fails as"
            "\n'unknown' and sends nothing."
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
