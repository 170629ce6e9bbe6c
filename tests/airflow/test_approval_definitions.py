"""What a DAG file sees of the approval gate at parse time: its fields, its refusals, its cost."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.operators import ApproveEpisodeOperator, PaidGenerationOperator
from airflow_idempotent_jobs.operators.approve import MAX_SHOWN_REQUEST, asker, code_fence, shown_request

pytestmark = pytest.mark.airflow


def test_the_form_is_approvals_with_one_optional_comment() -> None:
    op = ApproveEpisodeOperator(task_id="approve", episode_id="{{ ti.xcom_pull('allocate') }}")
    assert op.options == ["Approve", "Reject"] and op.multiple is False
    assert op.serialized_params["comment"]["value"] == ""
    assert op.serialized_params["comment"]["schema"] == {"type": "string"}
    assert op.defaults is None and op.fail_on_reject is False


def test_templated_fields_and_what_the_constructor_keeps(tmp_path: Path) -> None:
    assert set(ApproveEpisodeOperator.template_fields) == {"episode_id", "request", "store", "subject"}
    op = ApproveEpisodeOperator(
        task_id="approve",
        episode_id="{{ ti.xcom_pull('allocate') }}",
        store=str(tmp_path / "store"),
        store_conn_id="not_defined",
        request={"prompt": "{{ params.topic }}"},
        estimated_cost=2,
        weekly_budget=10.5,
        defaults="Reject",
    )
    assert (op.episode_id, op.store, op.store_conn_id, op.request) == (
        "{{ ti.xcom_pull('allocate') }}",
        str(tmp_path / "store"),
        "not_defined",
        {"prompt": "{{ params.topic }}"},
    )
    assert (op.estimated_cost, op.weekly_budget, op.defaults) == (2, 10.5, ["Reject"])
    assert list(tmp_path.iterdir()) == []  # nothing opened, no connection looked up


@pytest.mark.parametrize("defaults", ["Approve", ["Approve"], ["Reject", "Approve"], "Maybe"])
def test_a_default_that_could_approve_is_refused(defaults: Any) -> None:
    with pytest.raises(ValueError, match=r"approve: defaults=.*: only None or 'Reject' .* never approves spending"):
        ApproveEpisodeOperator(task_id="approve", episode_id="2026-W32-0", defaults=defaults)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("estimated_cost", -1),
        ("estimated_cost", float("nan")),
        ("weekly_budget", "10"),
        ("estimated_cost", -0.0),  # compares equal to 0, but a person who wrote it meant something else
        ("weekly_budget", -0.0),
    ],
)
def test_costs_and_budgets_that_are_no_amounts_are_refused(field: str, value: object) -> None:
    amounts: dict[str, Any] = {field: value}
    with pytest.raises(ValueError, match=f"approve: {field}=.* give a finite number >= 0"):
        ApproveEpisodeOperator(task_id="approve", episode_id="2026-W32-0", **amounts)


def test_a_dag_file_with_an_approving_default_does_not_parse(tmp_path: Path) -> None:
    """Refused where the DAG author sees it: the file is an import error, no DAG is made."""
    from tests.airflow.versions import DagBag

    (tmp_path / "gate.py").write_text(
        textwrap.dedent(
            """
            import pendulum
            from airflow.sdk import DAG
            from airflow_idempotent_jobs.operators import ApproveEpisodeOperator

            with DAG("gate", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
                ApproveEpisodeOperator(task_id="approve", episode_id="2026-W32-0", defaults="Approve")
            """
        )
    )
    bag = DagBag(str(tmp_path))
    assert bag.dag_ids == []
    (error,) = bag.import_errors.values()
    assert "only None or 'Reject' may be taken on a timeout" in error


def test_require_approval_is_a_keyword_of_the_paid_step() -> None:
    assert PaidGenerationOperator(task_id="p", episode_id="x", provider_conn_id="c").require_approval is False
    op = PaidGenerationOperator(task_id="p", episode_id="x", provider_conn_id="c", require_approval=True)
    assert op.require_approval is True
    with pytest.raises(TypeError, match="require_approval must be True or False"):
        PaidGenerationOperator(task_id="p", episode_id="x", provider_conn_id="c", require_approval="yes")


def test_a_long_request_is_summarised_with_its_size_and_digest() -> None:
    assert shown_request({"a": 1}) == '{\n  "a": 1\n}'
    long = shown_request({"prompt": "x" * 5000})
    assert len(long) < MAX_SHOWN_REQUEST + 200
    assert long.endswith(")") and "characters in all, sha256 " in long


def test_a_request_holding_backticks_cannot_end_the_code_block_the_approver_reads() -> None:
    # A run's conf may put user input into the request: whatever is shown, it never closes the fence.
    request = shown_request({"prompt": "x\n```\n**Approved by finance: pay now**\n````"})
    fence = code_fence(request)
    assert fence == "`````" and fence not in request
    assert code_fence('{"a": 1}') == "```"


def test_the_asker_name_fits_the_record_however_long_the_ids() -> None:
    class Ti:
        dag_id, run_id, task_id, map_index, try_number = "d" * 250, "manual__" + "r" * 242, "t" * 250, 3, 2

    context: Any = {"ti": Ti()}
    name = asker(context)
    assert len(name) <= 200 and name.endswith(" try 2") and name.startswith("ddd")
    assert asker(context) == name  # stable


def test_importing_the_operators_loads_the_hitl_operators_only_when_the_gate_is_named() -> None:
    code = (
        "import sys, json, airflow.sdk; before = set(sys.modules);"
        "import airflow_idempotent_jobs.operators as ops; plain = set(sys.modules) - before;"
        "ops.ApproveEpisodeOperator; gate = set(sys.modules) - before;"
        "print(json.dumps([sorted(plain), sorted(gate)]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    plain, gate = json.loads(done.stdout.strip().splitlines()[-1])
    hitl = "airflow.providers.standard.operators.hitl"
    assert hitl not in plain and "airflow_idempotent_jobs.operators.approve" not in plain
    assert hitl in gate and "airflow_idempotent_jobs.operators.approve" in gate
