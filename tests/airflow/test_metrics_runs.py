"""Metrics through Airflow's Stats under real ``dag.test()`` runs, heard by a real StatsD listener.

The scenario process (``metrics_scenarios.py``) runs with ``[metrics] statsd_on`` pointing at a UDP
socket this test binds on 127.0.0.1, with InfluxDB-style tags on so the ``dag_id``/``task_id`` tags
travel in the datagrams. A second process uses a StatsD client that raises on the project's
metrics: the runs must succeed all the same.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.testing.server import server_connection
from tests.airflow.conftest import AirflowHome, scenario
from tests.airflow.scenario_process import (
    ScenarioHome,
    home_on_migrated_db,
    provider_server_process,
    run_scenario_process,
)
from tests.airflow.scenario_process import ti as task_instance

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(400)]

HERE = Path(__file__).resolve().parent
PREFIX = "airflow.idempotent_jobs."


@dataclass
class Listener:
    """A StatsD server as far as the test needs one: every datagram received, in order."""

    sock: socket.socket
    lines: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        port: int = self.sock.getsockname()[1]
        return port

    def serve(self) -> None:
        while True:
            try:
                data = self.sock.recv(65535)
            except OSError:
                return
            self.lines.extend(line for line in data.decode("utf-8", "replace").split("\n") if line)

    def lines_between(self, name: str, prefix: str) -> list[str]:
        """The datagram lines starting ``prefix`` sent between the markers ``<name>.start`` and ``.end``."""
        names = [line.split(":", 1)[0] for line in self.lines]
        start, end = names.index(f"ijm.marker.{name}.start"), names.index(f"ijm.marker.{name}.end")
        return [line for line in self.lines[start + 1 : end] if line.startswith(prefix)]

    def between(self, name: str) -> list[tuple[str, dict[str, str], float, str]]:
        """The project's metrics sent between the markers, parsed."""
        return [parsed(line) for line in self.lines_between(name, PREFIX)]


def parsed(line: str) -> tuple[str, dict[str, str], float, str]:
    """``airflow.idempotent_jobs.x,dag_id=d,task_id=t:2.25|c`` -> (``x``, tags, 2.25, ``c``)."""
    head, tail = line.split(":", 1)
    name, *tags = head.split(",")
    value, kind = tail.split("|")[:2]
    return name.removeprefix(PREFIX), dict(tag.split("=", 1) for tag in tags), float(value), kind


def totals(metrics: list[tuple[str, dict[str, str], float, str]]) -> dict[tuple[str, str], float]:
    """(name, task_id) -> sum of the counter's values."""
    out: dict[tuple[str, str], float] = {}
    for name, tags, value, kind in metrics:
        assert kind == "c", (name, kind)
        key = (name, tags.get("task_id", "?"))
        out[key] = out.get(key, 0.0) + value
    return out


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    running = Listener(sock)
    thread = threading.Thread(target=running.serve, daemon=True)
    thread.start()
    yield running
    sock.close()


def settled(listener: Listener, marker: str) -> None:
    """Wait (bounded) until the last marker arrived: UDP on 127.0.0.1 is delivered in order."""
    deadline = time.monotonic() + 10
    while f"ijm.marker.{marker}:1|c" not in listener.lines and time.monotonic() < deadline:
        time.sleep(0.05)


def metrics_env(airflow_home: AirflowHome, home: Path, port: int, provider_url: str, token: str) -> dict[str, str]:
    dags, work = home_on_migrated_db(airflow_home.home, home, [HERE / "dags_metrics"])
    connections = {
        "ijm_provider": server_connection(provider_url, token),
        "ijm_provider_plain": server_connection(provider_url, token, tokens_honoured=False, lookup_path=None),
    }
    return ScenarioHome(home, dags, work).env(
        provider=(provider_url, token),
        connections=connections,
        AIRFLOW__METRICS__STATSD_ON="True",
        AIRFLOW__METRICS__STATSD_HOST="127.0.0.1",
        AIRFLOW__METRICS__STATSD_PORT=str(port),
        AIRFLOW__METRICS__STATSD_PREFIX="airflow",
        AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED="True",
        IJM_STATSD_PORT=str(port),
        _IJM_WORK=str(work),
    )


@pytest.fixture(scope="module")
def provider() -> Iterator[tuple[str, str]]:
    token = "metrics-provider-token-" + os.urandom(4).hex()
    with provider_server_process("--token", token, "--price", "0.75") as url:
        yield url, token


@pytest.fixture(scope="module")
def results(
    airflow_home: AirflowHome,
    listener: Listener,
    provider: tuple[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    env = metrics_env(airflow_home, tmp_path_factory.mktemp("metrics-home"), listener.port, *provider)
    found = run_scenario_process("tests.airflow.metrics_scenarios", env, Path(env["_IJM_WORK"]), timeout=300)
    settled(listener, "refused.end")
    return found


def test_a_retried_allocation_counts_new_then_reused_and_one_paid_success_its_cost(
    results: dict[str, Any], listener: Listener
) -> None:
    run = scenario(results, "worker")["first"]["run"]
    assert task_instance(run, "allocate")["try_number"] == 2 and task_instance(run, "generate")["state"] == "success"
    metrics = listener.between("worker")
    assert totals(metrics) == {
        ("allocation.new", "allocate"): 1,
        ("allocation.reused", "allocate"): 1,
        ("submission.succeeded", "generate"): 1,
        ("cost", "generate"): 2.25,  # price 0.75 x 3 units, as the provider billed it
    }
    assert {tags["dag_id"] for _, tags, _, _ in metrics} == {"ijm_paid_worker"}
    assert [name for name, *_ in metrics][:2] == ["allocation.new", "allocation.reused"]


def test_the_same_run_again_counts_a_reused_allocation_and_no_second_payment(
    results: dict[str, Any], listener: Listener
) -> None:
    again = scenario(results, "worker")["again"]
    assert task_instance(again["run"], "generate")["state"] == "success"
    assert [e["submission"]["state"] for e in again["store"]] == ["succeeded"]
    assert totals(listener.between("worker_again")) == {("allocation.reused", "allocate"): 1}


def test_a_deferred_paid_step_counts_its_outcome_and_cost_when_it_resumes(
    results: dict[str, Any], listener: Listener
) -> None:
    run = scenario(results, "deferred")["run"]
    assert task_instance(run, "generate")["state"] == "success"
    assert totals(listener.between("deferred")) == {
        ("allocation.new", "allocate"): 1,
        ("allocation.reused", "allocate"): 1,
        ("submission.succeeded", "generate"): 1,
        ("cost", "generate"): 3.0,
    }


def test_a_lost_answer_only_reconcile_can_settle_counts_unknown_and_stuck(
    results: dict[str, Any], listener: Listener
) -> None:
    found = scenario(results, "stuck")
    generate = task_instance(found["run"], "generate")
    assert (generate["state"], generate["try_number"]) == ("failed", 1)
    assert [e["submission"]["state"] for e in found["store"]] == ["unknown"]
    assert totals(listener.between("stuck")) == {
        ("allocation.new", "allocate"): 1,
        ("allocation.reused", "allocate"): 1,
        ("submission.unknown", "generate"): 1,
        ("stuck", "generate"): 1,
    }


def test_a_budget_refusal_counts_refused_and_no_cost(results: dict[str, Any], listener: Listener) -> None:
    found = scenario(results, "refused")
    assert task_instance(found["run"], "generate")["state"] == "failed"
    assert [e["submission"]["state"] for e in found["store"]] == ["none"]
    assert totals(listener.between("refused")) == {
        ("allocation.new", "allocate"): 1,
        ("allocation.reused", "allocate"): 1,
        ("submission.refused", "generate"): 1,
    }


def test_a_metrics_client_that_raises_fails_no_task(
    airflow_home: AirflowHome,
    listener: Listener,
    provider: tuple[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    env = metrics_env(airflow_home, tmp_path_factory.mktemp("metrics-exploding"), listener.port, *provider)
    env["AIRFLOW__METRICS__STATSD_CUSTOM_CLIENT_PATH"] = "tests.airflow.exploding_statsd.ExplodingStatsClient"
    env["IJM_MARKER_PREFIX"] = "exploding."
    env["IJM_ONLY"] = "worker"
    found = run_scenario_process("tests.airflow.metrics_scenarios", env, Path(env["_IJM_WORK"]), timeout=300)
    settled(listener, "exploding.worker.end")
    run = scenario(found, "worker")["first"]["run"]
    assert {t["task_id"]: t["state"] for t in run["tis"]} == {"allocate": "success", "generate": "success"}
    assert task_instance(run, "allocate")["try_number"] == 2  # the crash we asked for, not the metrics
    assert listener.lines_between("exploding.worker", PREFIX) == []  # the client raised instead of sending
    tried = [line.split(",")[0] for line in listener.lines_between("exploding.worker", "airflow.exploded.")]
    assert tried == [
        "airflow.exploded.idempotent_jobs.allocation.new",
        "airflow.exploded.idempotent_jobs.allocation.reused",
        "airflow.exploded.idempotent_jobs.submission.succeeded",
        "airflow.exploded.idempotent_jobs.cost",
    ]
