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

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._side_by_side import side_by_side_main  # noqa: E402
from tests.airflow.llm_side_by_side_scenarios import DAGS, markdown, run_side_by_side  # noqa: E402

NOTE = (
    "Billed batches as the APIs' doubles counted them; the run's state (tries of the paying task)."
    "\nOurs on Anthropic adopts a lost batch once every batch created since its intent has ended (the"
    "\ndouble ends one 0.05 s after creation; Anthropic's API within 24 h): until then a try fails as"
    "\n'unknown' and sends nothing."
)


def main(argv: list[str] | None = None) -> int:
    return side_by_side_main(
        argv,
        prog="benchmarks/llm_side_by_side.py",
        doc=__doc__,
        sources=[DAGS],
        launch=run_side_by_side,
        table=lambda results: markdown(results["table"]),
        note=NOTE,
    )


if __name__ == "__main__":
    sys.exit(main())
