"""The machinery shared by the real-Airflow scenario runners, on both sides of their process.

``dag.test()`` pays ~20 s of Airflow start-up per process, so each runner module
(``scenarios.py``, ``fail_closed_scenarios.py``, ``http_provider_scenarios.py``) holds only its
scenarios: they run once, in one process, and the tests assert on the JSON it writes.

- In the scenario process: `Scenarios` (registers a runner's scenarios and runs them), `run_dag`,
  `store_contents`, `dag_store`, `utc`, `provider_admin`, `provider` (the runner's provider server),
  `secrets_lookups` (what the spy secrets backend was asked).
- In pytest: `scenario_home` (a home on a copy of the migrated database, with its DAG files) whose
  `env` builds the runner's environment (connections, the provider server, the spy secrets backend)
  and whose `run` starts the runner once and checks its results; `airflow_env`, `copy_dags`,
  `fresh_pg_database`, `provider_server_process`, and `observed` / `ti` to read a run's results.

Module level imports only the standard library: the scenario process imports this before Airflow.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.server_process import server_process

__all__ = [
    "REPO",
    "Result",
    "ScenarioHome",
    "Scenarios",
    "airflow_env",
    "copy_dags",
    "dag_store",
    "fresh_pg_database",
    "home_on_migrated_db",
    "observed",
    "provider",
    "provider_admin",
    "provider_server_process",
    "run_dag",
    "run_scenario_process",
    "scenario_home",
    "secrets_lookups",
    "store_contents",
    "ti",
    "utc",
]

#: The spy secrets backend (tests/airflow/recording_secrets.py): it logs each lookup to IJ_SECRETS_LOG.
SPY_SECRETS_BACKEND = "tests.airflow.recording_secrets.RecordingSecretsBackend"

REPO = Path(__file__).resolve().parents[2]
Result = dict[str, Any]
ScenarioFn = Callable[[Any], Result]


# -- the scenario process -----------------------------------------------------------------------
class Scenarios:
    """A runner's scenarios by name, in the order defined: ``@scenario`` registers one, `main` runs them."""

    def __init__(self) -> None:
        self.by_name: dict[str, ScenarioFn] = {}

    def __call__(self, fn: ScenarioFn) -> ScenarioFn:
        self.by_name[fn.__name__] = fn
        return fn

    def main(self, argv: list[str], finish: Callable[[], Result] | None = None) -> None:
        """``OUT.json [NAME ...]``: run every scenario (or those named) on one DagBag, write the results.

        A scenario that raises records its traceback instead; ``finish`` adds what is read once
        all of them have run.
        """
        from tests.airflow.versions import DagBag, serialize_for_dag_test

        out, only = argv[0], argv[1:]
        bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
        serialize_for_dag_test(bag)
        results: Result = {"import_errors": {str(k): str(v) for k, v in bag.import_errors.items()}}
        for name, fn in self.by_name.items():
            if only and name not in only:
                continue
            started = time.monotonic()
            try:
                results[name] = fn(bag)
            except Exception:
                results[name] = {"error": traceback.format_exc()}
            print(f"scenario {name}: {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
        if finish is not None:
            results.update(finish())
        Path(out).write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")


def _observations() -> list[dict[str, Any]]:
    path = Path(os.environ["IJ_OBSERVATIONS"])
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_dag(
    bag: Any, dag_id: str, *, logical_date: Any, run_after: Any = None, conf: dict[str, Any] | None = None
) -> Result:
    """One ``dag.test()`` run: its task instances and the observations its tasks wrote."""
    dag = bag.get_dag(dag_id)
    assert dag is not None, f"DAG {dag_id} not in the bag: {bag.import_errors}"
    before = len(_observations())
    dag_run = dag.test(logical_date=logical_date, run_after=run_after or logical_date, run_conf=conf)
    tis = [
        {"task_id": ti.task_id, "map_index": ti.map_index, "state": str(ti.state), "try_number": ti.try_number}
        for ti in sorted(dag_run.get_task_instances(), key=lambda t: (t.task_id, t.map_index))
    ]
    return {
        "run_id": dag_run.run_id,
        "state": str(dag_run.state),
        "logical_date": None if dag_run.logical_date is None else dag_run.logical_date.isoformat(),
        "tis": tis,
        "observed": _observations()[before:],
    }


def killed_run(
    bag: Any, dag_id: str, *, logical_date: Any, admin: Callable[..., Any], held: Mapping[str, Any]
) -> Result:
    """Run ``dag_id`` in a forked child; SIGKILL it once the double (its ``admin`` API: ``held`` makes it
    hold the paid call's answer after accepting) made the job. Call it before this process runs any
    ``dag.test()``: a fork of a process that has run one inherits its runner's state without the
    threads behind it, and hangs."""
    from airflow import settings

    def accepted() -> int:
        return int(admin("GET", "/_admin/stats")["accepted"])

    admin("POST", "/_admin/config", dict(held))
    before = accepted()
    assert settings.engine is not None
    settings.engine.dispose()  # no pooled connection shared with the child
    pid = os.fork()
    if pid == 0:  # the child: the worker that dies
        try:
            run_dag(bag, dag_id, logical_date=logical_date)
        finally:
            os._exit(3)  # never reached when killed as planned
    deadline = time.monotonic() + 120
    while accepted() == before and time.monotonic() < deadline:
        time.sleep(0.05)
    made = accepted() - before
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)  # reaped: its pid is gone, as a dead worker's
    admin("POST", "/_admin/config", {"fault": None})
    return {
        "made_before_kill": made,
        "killed_by": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "store_after_kill": store_contents(dag_store(dag_id)),
    }


def store_contents(path: str | Path) -> list[dict[str, Any]]:
    from airflow_idempotent_jobs import open_store

    if "://" not in str(path) and not Path(path).exists():
        return []
    with open_store(path) as store:
        return [episode.to_dict() for episode in store.list()]


def dag_store(dag_id: str) -> Path:
    return Path(os.environ["IJ_STORES"]) / dag_id


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> Any:
    import pendulum

    return pendulum.datetime(year, month, day, hour, minute, tz="UTC")


def provider_admin(url: str, token: str, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
    """A provider server's admin API (counters, behaviour switches)."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    response = httpx.request(method, url + path, json=body, headers=headers, timeout=10)
    response.raise_for_status()
    return response.json()


def provider(method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
    """The runner's provider server's admin API (counters, behaviour switches): IJ_PROVIDER_URL/TOKEN."""
    return provider_admin(os.environ["IJ_PROVIDER_URL"], os.environ["IJ_PROVIDER_TOKEN"], method, path, body)


def secrets_lookups() -> list[dict[str, Any]]:
    """Every lookup the spy secrets backend logged so far (``ScenarioHome.env(spy_secrets=True)``)."""
    path = Path(os.environ["IJ_SECRETS_LOG"])
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- pytest: starting a runner ------------------------------------------------------------------
def copy_dags(dags: Path, sources: Iterable[Path]) -> None:
    """DAG files into the DAGs folder; a folder's files are copied whole."""
    for source in sources:
        if source.is_dir():
            shutil.copytree(source, dags, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, dags / source.name)


def home_on_migrated_db(migrated_home: Path, home: Path, dag_sources: Iterable[Path]) -> tuple[Path, Path]:
    """``home`` with a copy of the session's migrated metadata database (migrating again costs a
    start-up), a DAGs folder holding ``dag_sources`` only, and an empty ``work`` folder: (dags, work)."""
    shutil.copy(migrated_home / "airflow.db", home / "airflow.db")
    dags, work = home / "dags", home / "work"
    dags.mkdir()
    copy_dags(dags, dag_sources)
    work.mkdir()
    return dags, work


def airflow_env(home: Path, dags: Path) -> dict[str, str]:
    """This process's environment without any Airflow setting, plus a home on SQLite and its DAGs folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__"))}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home / 'airflow.db'}",
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    return env


@dataclass(frozen=True)
class ScenarioHome:
    """One runner's Airflow home: a copy of the migrated database, its DAG files, a work folder."""

    home: Path
    dags: Path
    work: Path

    def env(
        self,
        *,
        provider: tuple[str, str] | None = None,
        spy_secrets: bool = False,
        connections: Mapping[str, object] | None = None,
        **extra: str,
    ) -> dict[str, str]:
        """The runner's environment: Airflow on this home, IJ_STORES and IJ_OBSERVATIONS under the work
        folder; a provider server's (url, token) as IJ_PROVIDER_URL/TOKEN; the spy secrets backend;
        ``connections`` by conn id (a dict becomes its JSON form); then ``extra`` as given."""
        env = {
            **airflow_env(self.home, self.dags),
            "IJ_STORES": str(self.work / "stores"),
            "IJ_OBSERVATIONS": str(self.work / "observations.jsonl"),
        }
        if provider is not None:
            env.update(IJ_PROVIDER_URL=provider[0], IJ_PROVIDER_TOKEN=provider[1])
        if spy_secrets:
            env.update(IJ_SECRETS_LOG=str(self.work / "secrets.jsonl"), AIRFLOW__SECRETS__BACKEND=SPY_SECRETS_BACKEND)
        for conn_id, value in (connections or {}).items():
            env[f"AIRFLOW_CONN_{conn_id.upper()}"] = value if isinstance(value, str) else json.dumps(value)
        env.update(extra)
        return env

    def run(self, module: str, env: Mapping[str, str], *, timeout: float) -> Result:
        """The runner ``module``, once, in its own process (see `run_scenario_process`)."""
        return run_scenario_process(module, env, self.work, timeout=timeout)


def scenario_home(migrated_home: Path, tmp_path_factory: Any, name: str, dag_sources: Iterable[Path]) -> ScenarioHome:
    """A new home named ``name`` on a copy of ``migrated_home``'s database, holding ``dag_sources``."""
    home = tmp_path_factory.mktemp(name)
    dags, work = home_on_migrated_db(migrated_home, home, dag_sources)
    return ScenarioHome(home, dags, work)


def run_scenario_process(module: str, env: Mapping[str, str], work: Path, *, timeout: float) -> Result:
    """``python -m module work/results.json``, run once (its output in ``work/scenarios.log``, with each
    scenario's time); ``timeout`` is for Airflow 3.3, longer before (`versions.DAG_TEST_SLOWDOWN`).

    Its results, after checking that it finished and that every DAG file imported; ``_log`` names
    the log (task logs included), which tests search for secrets.
    """
    from tests.airflow.versions import DAG_TEST_SLOWDOWN

    out, log = work / "results.json", work / "scenarios.log"
    timeout *= DAG_TEST_SLOWDOWN
    with log.open("w") as sink:
        done = subprocess.run(
            [sys.executable, "-m", module, str(out)],
            env=dict(env),
            cwd=REPO,
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
    tail = log.read_text(errors="replace")[-4000:]
    assert done.returncode == 0 and out.exists(), f"{module} failed ({done.returncode}):\n{tail}"
    results: Result = json.loads(out.read_text())
    assert results["import_errors"] == {}, results["import_errors"]
    results["_log"] = str(log)
    return results


@contextlib.contextmanager
def fresh_pg_database(request: Any) -> Iterator[str | None]:
    """A database of its own on the test PostgreSQL server, dropped afterwards; None where no server
    answers (outside CI). ``request`` is a session-scoped fixture's ``pytest.FixtureRequest``."""
    import pytest

    from tests.pg import pg_url

    try:
        server = request.getfixturevalue("pg_server")
    except pytest.skip.Exception:
        yield None
        return
    name = server.create()
    try:
        yield pg_url(name)
    finally:
        server.drop(name)


@contextlib.contextmanager
def provider_server_process(*args: str) -> Iterator[str]:
    """The project's provider server in its own OS process (``--port 0`` plus ``args``): its URL."""
    with server_process("airflow_idempotent_jobs.testing.server", *args) as running:
        yield running.url


# -- pytest: reading a run ----------------------------------------------------------------------
def observed(run: Result, kind: str, task_id: str | None = None) -> list[dict[str, Any]]:
    """What the run's tasks recorded of ``kind`` (see ``support.observe``), optionally of one task."""
    return [o for o in run["observed"] if o["kind"] == kind and (task_id is None or o["task_id"] == task_id)]


def ti(run: Result, task_id: str, map_index: int = -1) -> dict[str, Any]:
    """The one task instance Airflow recorded for ``task_id`` (and ``map_index``) in the run."""
    found: list[dict[str, Any]] = [t for t in run["tis"] if t["task_id"] == task_id and t["map_index"] == map_index]
    assert len(found) == 1, run["tis"]
    return found[0]
