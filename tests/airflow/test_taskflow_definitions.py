"""What a DAG file sees of ``@task.paid_generation`` and ``@task.episode`` at parse time: the operator's
parameters, refused arguments, dependencies from XComArgs, serialization, and cheap imports."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG, task
from airflow.sdk.bases.decorator import DecoratedOperator

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator

pytestmark = pytest.mark.airflow

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def request_of(topic: Any) -> dict[str, Any]:
    return {"prompt": topic}


def test_the_paid_decorator_takes_every_parameter_of_the_operator_but_request(tmp_path: Path) -> None:
    """Each keyword of ``PaidGenerationOperator.__init__`` (whatever it gains later) reaches the task."""
    parameters = inspect.signature(PaidGenerationOperator.__init__).parameters
    names = [n for n, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY and n != "request"]
    # A flag the operator checks on construction (require_approval) gets the opposite of its default.
    values: dict[str, Any] = {
        name: (not parameters[name].default) if isinstance(parameters[name].default, bool) else f"value-of-{name}"
        for name in names
    }
    with DAG("defs_paid", schedule=None, start_date=START) as dag:
        task.paid_generation(**values)(request_of)("topic")
    op = dag.get_task("request_of")
    assert isinstance(op, PaidGenerationOperator)
    assert {name: getattr(op, name) for name in names} == values
    assert list(tmp_path.iterdir()) == []  # nothing created, no connection looked up


def test_the_paid_decorator_refuses_request_and_multiple_outputs() -> None:
    with DAG("defs_refused", schedule=None, start_date=START):
        with pytest.raises(TypeError, match=r"takes no request=: the request is what request_of\(\) returns"):
            task.paid_generation(episode_id="2026-W32-0", provider_conn_id="p", request={"x": 1})(request_of)("t")
        with pytest.raises(TypeError, match="multiple_outputs=True is not supported"):
            task.paid_generation(episode_id="2026-W32-0", provider_conn_id="p", multiple_outputs=True)


def test_templated_fields_and_dependencies_from_xcom_args() -> None:
    with DAG("defs_fields", schedule=None, start_date=START) as dag:
        episode_id = AllocateEpisodeOperator(task_id="allocate").output

        @task
        def topic() -> str:
            return "t"

        @task.paid_generation(episode_id=episode_id, provider_conn_id="p")
        def generate(topic: Any) -> dict[str, Any]:  # "-> dict" would infer multiple_outputs for @task
            return {"prompt": topic}

        @task.episode(episode_id=episode_id)
        def publish(summary: Any, episode: Any = None) -> None:
            pass

        publish(generate(topic()))
    paid, step = dag.get_task("generate"), dag.get_task("publish")
    assert list(paid.template_fields) == ["op_args", "op_kwargs", "episode_id", "store", "require_approval"]
    assert list(step.template_fields) == ["op_args", "op_kwargs", "episode_id", "store", "effect_inputs"]
    assert paid.upstream_task_ids == {"allocate", "topic"}
    assert step.upstream_task_ids == {"allocate", "generate"}
    assert isinstance(paid, PaidGenerationOperator) and isinstance(step, DecoratedOperator)
    assert paid.multiple_outputs is False
    assert step.op_kwargs == {}, "the episode placeholder is not a template argument"
    from airflow.serialization.serialized_objects import DagSerialization

    again = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    assert again.get_task("generate").task_type == "_PaidGenerationDecoratedOperator"
    assert again.get_task("publish").task_type == "_EpisodeDecoratedOperator"


def test_the_episode_decorator_needs_an_episode_parameter_and_supplies_it_itself() -> None:
    def no_episode(summary: Any) -> None:
        pass

    def takes_episode(episode: Any = None) -> None:
        pass

    def wildcard(**kwargs: Any) -> None:
        pass

    with DAG("defs_episode", schedule=None, start_date=START):
        with pytest.raises(TypeError, match=r"no_episode\(\) must take a parameter named 'episode'"):
            task.episode(episode_id="2026-W32-0")(no_episode)("x")
        with pytest.raises(TypeError, match="passes the loaded episode itself"):
            task.episode(episode_id="2026-W32-0")(takes_episode)(episode="mine")
        task.episode(episode_id="2026-W32-0", task_id="wild")(wildcard)()  # **kwargs receives it


def test_importing_the_decorators_imports_nothing_else() -> None:
    code = (
        "import sys, json; before = set(sys.modules);"
        "import airflow_idempotent_jobs.decorators;"
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    added = json.loads(done.stdout.strip().splitlines()[-1])
    ours_or_heavy = [
        m for m in added if m.split(".")[0] in ("airflow", "airflow_idempotent_jobs", "sqlalchemy", "httpx")
    ]
    # The package root installs the finder for moved module paths (``_moved``) and holds the release (``_version``).
    assert ours_or_heavy == [
        "airflow_idempotent_jobs",
        "airflow_idempotent_jobs._moved",
        "airflow_idempotent_jobs._version",
        "airflow_idempotent_jobs.decorators",
    ], added


def test_using_the_decorators_loads_no_store_hook_or_paid_layer() -> None:
    """``task.paid_generation`` and ``task.episode`` in a DAG file: the paid layer and hooks wait for run time."""
    code = (
        "import sys, json\n"
        "from airflow.sdk import task\n"
        "before = set(sys.modules)\n"
        "task.paid_generation, task.episode\n"
        "import airflow_idempotent_jobs.decorators.paid_generation, airflow_idempotent_jobs.decorators.episode\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    added = json.loads(done.stdout.strip().splitlines()[-1])
    heavy = [m for m in added if m.startswith(("airflow_idempotent_jobs.paid", "airflow_idempotent_jobs.hooks"))]
    assert heavy == [] and not {"httpx", "sqlalchemy", "psycopg"} & set(added), added
