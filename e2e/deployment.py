"""A real Airflow deployment on 127.0.0.1: start it, wait for health, always stop it.

By default the CeleryExecutor topology below (``make e2e-distributed``); ``executor="LocalExecutor"``
with no workers gives the smaller one of ``make e2e-approval`` (the control home runs every task).

Topology (nothing but PostgreSQL and the Redis broker is shared)::

    PostgreSQL 127.0.0.1:5432   database ij_e2e_af_<id>     Airflow's metadata
                                database ij_e2e_store_<id>  the episode store (schema idempotent_jobs)
    Redis 127.0.0.1:6379/<n>    Celery broker
    control home                api-server, scheduler, dag-processor, triggerer
    worker homes w1, w2         one Celery worker each: own AIRFLOW_HOME, DAGs copy, logs, log-server port
    provider server             the local paid-job API (one OS process)

Every process is started in its own session and stopped by its process group id, never by name.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parent.parent
DAG_FILES = sorted((Path(__file__).resolve().parent / "dags").glob("*.py"))
DAG_IDS = ("ij_distributed", "ij_no_store", "ij_custom_provider")
#: The store namespace of the custom-hook DAG, so the main run's checks see only their own episodes.
CUSTOM_NAMESPACE = "e2e-custom"
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
PG_HOST, PG_PORT, PG_USER = (
    os.environ.get("PGHOST", "127.0.0.1"),
    os.environ.get("PGPORT", "5432"),
    os.environ.get("PGUSER", "postgres"),
)
REDIS_URL = os.environ.get("IJ_E2E_REDIS", "redis://127.0.0.1:6379/11")
WORKERS = ("w1", "w2")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pg_url(dbname: str, driver: str = "postgresql") -> str:
    password = os.environ.get("PGPASSWORD")
    auth = PG_USER + (f":{password}" if password else "")
    return f"{driver}://{auth}@{PG_HOST}:{PG_PORT}/{dbname}"


def wait_for(what: str, probe: Callable[[], bool], timeout: float, every: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


@dataclass
class Process:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class Deployment:
    """Everything one distributed run needs; `stop` undoes `start` whatever state it is in."""

    workdir: Path
    tag: str = field(default_factory=lambda: f"{os.getpid()}")
    executor: str = "CeleryExecutor"
    #: Celery worker homes; none with LocalExecutor.
    workers: tuple[str, ...] = WORKERS
    dag_files: tuple[Path, ...] = tuple(DAG_FILES)
    dag_ids: tuple[str, ...] = DAG_IDS
    #: Whether to start the prediction-style API (only the custom-hook DAG pays through it).
    prediction_api: bool = True
    #: Airflow's metadata in a SQLite file of the work dir instead of a PostgreSQL database (the
    #: demo: no PostgreSQL needed, and no PostgreSQL store either).
    sqlite: bool = False
    processes: list[Process] = field(default_factory=list)
    databases: list[str] = field(default_factory=list)
    provider_url: str = ""
    provider_token: str = field(default_factory=lambda: "e2e-" + os.urandom(6).hex())
    #: The prediction-style API that the custom-hook DAG pays through (example_adapters).
    prediction_url: str = ""
    prediction_token: str = field(default_factory=lambda: "e2e-p-" + os.urandom(6).hex())

    def __post_init__(self) -> None:
        self.airflow_db = f"ij_e2e_af_{self.tag}"
        self.store_db = f"ij_e2e_store_{self.tag}"
        self.api_port = free_port()
        self.secrets = {
            "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
            "AIRFLOW__API_AUTH__JWT_SECRET": os.urandom(16).hex(),
            "AIRFLOW__API__SECRET_KEY": os.urandom(16).hex(),
        }

    # -- environment ---------------------------------------------------------------------------
    @property
    def store_url(self) -> str:
        return pg_url(self.store_db)

    def home(self, name: str) -> Path:
        return self.workdir / name

    def env(self, name: str) -> dict[str, str]:
        """The environment of one Airflow process living in home ``name``."""
        from airflow_idempotent_jobs.testing.server import ServerConfig, server_connection

        home = self.home(name)
        metadata = (
            f"sqlite:///{self.workdir / 'airflow.db'}"
            if self.sqlite
            else pg_url(self.airflow_db, "postgresql+psycopg2")
        )
        provider = server_connection(self.provider_url, self.provider_token, ServerConfig(honour_tokens=False))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "IJ_"))}
        env.update(self.secrets)
        env.update(
            {
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
                "AIRFLOW__CORE__EXECUTOR": self.executor,
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata,
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.api_port}/execution/",
                "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{self.api_port}",
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
                # The store is reached through a Connection (a plain postgres one), never the metadata DB.
                "AIRFLOW_CONN_IJ_STORE": json.dumps(
                    {"conn_type": "postgres", "host": PG_HOST, "port": int(PG_PORT), "login": PG_USER}
                    | ({"password": os.environ["PGPASSWORD"]} if os.environ.get("PGPASSWORD") else {})
                    | {"schema": self.store_db}
                ),
                "AIRFLOW_CONN_MEDIA_PROVIDER": json.dumps(provider),
                # The custom-hook DAG: its own namespace of the store, a plain http connection, and
                # the adapter importable by every process as an installed package would be (the
                # triggerer imports the hook by its class path; the DAGs folder is not on its path).
                "AIRFLOW_CONN_IJ_STORE_CUSTOM": json.dumps(
                    {"conn_type": "postgres", "host": PG_HOST, "port": int(PG_PORT), "login": PG_USER}
                    | ({"password": os.environ["PGPASSWORD"]} if os.environ.get("PGPASSWORD") else {})
                    | {"schema": self.store_db, "extra": json.dumps({"namespace": CUSTOM_NAMESPACE})}
                ),
                "AIRFLOW_CONN_PREDICTION_API": json.dumps(
                    {"conn_type": "http", "host": self.prediction_url, "password": self.prediction_token}
                ),
                "PYTHONPATH": str(REPO),
                "IJ_WORKER": name,
                "PYTHONUNBUFFERED": "1",
            }
        )
        if self.celery:
            env["AIRFLOW__CELERY__BROKER_URL"] = REDIS_URL
            env["AIRFLOW__CELERY__RESULT_BACKEND"] = "db+" + metadata
            env["AIRFLOW__CELERY__WORKER_CONCURRENCY"] = "4"
        return env

    @property
    def celery(self) -> bool:
        return self.executor == "CeleryExecutor"

    # -- start ---------------------------------------------------------------------------------
    def start(self, say: Callable[[str], None]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._create_databases()
        if self.celery:
            self._flush_broker()
        for name in ("control", *self.workers):
            (self.home(name) / "dags").mkdir(parents=True, exist_ok=True)
            for dag_file in self.dag_files:
                shutil.copy(dag_file, self.home(name) / "dags" / dag_file.name)
        self._start_provider()
        if self.prediction_api:
            self._start_prediction_api()
        say(f"provider server at {self.provider_url}, prediction-style API at {self.prediction_url or '-'}")
        started = time.monotonic()
        self.airflow("db", "migrate", timeout=300)
        where = "SQLite" if self.sqlite else self.airflow_db
        say(f"metadata database {where} migrated in {time.monotonic() - started:.0f}s")
        control = self.env("control")
        self.spawn("api-server", [AIRFLOW, "api-server", "-H", "127.0.0.1", "-p", str(self.api_port)], control)
        self.spawn("scheduler", [AIRFLOW, "scheduler"], control)
        self.spawn("dag-processor", [AIRFLOW, "dag-processor"], control)
        self.spawn("triggerer", [AIRFLOW, "triggerer"], control)
        for name in self.workers:
            env = self.env(name)
            env["AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT"] = str(free_port())
            command = [AIRFLOW, "celery", "worker", "--celery-hostname", f"{name}@%h", "--without-mingle"]
            self.spawn(f"worker-{name}", [*command, "--without-gossip"], env)
        wait_for("a healthy API server, scheduler, DAG processor and triggerer", self._healthy, timeout=180)
        wait_for("the DAGs to be parsed and serialized", self._dag_serialized, timeout=120)
        if self.workers:
            wait_for("the Celery workers", self._workers_ready, timeout=120)
        say(f"deployment healthy in {time.monotonic() - started:.0f}s (api-server on port {self.api_port})")

    def _admin(self, *statements: str) -> None:
        with psycopg.connect(pg_url(os.environ.get("PGDATABASE", "postgres")), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement.encode())

    def _create_databases(self) -> None:
        if self.sqlite:
            return
        for name in (self.airflow_db, self.store_db):
            self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
            self.databases.append(name)

    def _flush_broker(self) -> None:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
        client.flushdb()  # only this run's database number
        client.close()

    def _start_provider(self) -> None:
        self.provider_url = self.provider_process("provider")

    def provider_process(self, name: str) -> str:
        """A provider server that ignores tokens (capability (a) off), in an OS process named ``name``: its URL."""
        log = self.workdir / f"{name}.log"
        command = [sys.executable, "-m", "airflow_idempotent_jobs.testing.server", "--port", "0"]
        command += ["--token", self.provider_token, "--ignore-tokens", "--polls-to-finish", "2"]
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log.open("wb"), cwd=REPO, start_new_session=True
        )
        self.processes.append(Process(name, proc, log))
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the {name} server did not start: {log.read_text()[-2000:]}")
        return url

    def _start_prediction_api(self) -> None:
        """The example adapter's API in its own process; its first paid call loses its answer."""
        log = self.workdir / "prediction-api.log"
        command = [sys.executable, "-m", "example_adapters.prediction_api", "--port", "0"]
        command += ["--token", self.prediction_token, "--polls-to-finish", "2"]
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log.open("wb"), cwd=REPO, start_new_session=True
        )
        self.processes.append(Process("prediction-api", proc, log))
        assert proc.stdout is not None
        self.prediction_url = proc.stdout.readline().decode().strip()
        if not self.prediction_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the prediction-style API did not start: {log.read_text()[-2000:]}")
        self.prediction_admin("POST", "/_admin/config", {"fault": "drop_after_accept", "fault_times": 1})

    def prediction_admin(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.prediction_url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.prediction_token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def spawn(self, name: str, command: list[str], env: dict[str, str]) -> None:
        log = self.workdir / f"{name}.log"
        proc = subprocess.Popen(
            command, env=env, cwd=self.workdir, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
        )
        self.processes.append(Process(name, proc, log))

    def airflow(self, *args: str, timeout: float = 120) -> str:
        """One Airflow CLI command in the control home; its output, or an error with its tail."""
        done = subprocess.run(
            [AIRFLOW, *args], env=self.env("control"), cwd=self.workdir, capture_output=True, timeout=timeout
        )
        out = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        if done.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed ({done.returncode}):\n{out[-3000:]}")
        return out

    # -- health --------------------------------------------------------------------------------
    def _check_alive(self) -> None:
        for process in self.processes:
            if process.proc.poll() is not None:
                tail = process.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{process.name} exited with {process.proc.returncode}:\n{tail}")

    def _healthy(self) -> bool:
        self._check_alive()
        try:
            url = f"http://127.0.0.1:{self.api_port}/api/v2/monitor/health"
            with urllib.request.urlopen(url, timeout=5) as answer:
                health: dict[str, Any] = json.loads(answer.read())
        except OSError:
            return False
        parts = ("metadatabase", "scheduler", "dag_processor", "triggerer")
        return all((health.get(part) or {}).get("status") == "healthy" for part in parts)

    def metadata(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        if self.sqlite:
            import sqlite3

            with contextlib.closing(sqlite3.connect(f"file:{self.workdir / 'airflow.db'}?mode=ro", uri=True)) as db:
                return list(db.execute(query.replace("%s", "?"), params))
        # Read only: the runners look at Airflow's metadata, never change it.
        with psycopg.connect(pg_url(self.airflow_db), options="-c default_transaction_read_only=on") as conn:
            return list(conn.execute(query.encode(), params or None))

    def _dag_serialized(self) -> bool:
        self._check_alive()
        return set(self.dag_ids) <= {dag_id for (dag_id,) in self.metadata("SELECT dag_id FROM serialized_dag")}

    def _workers_ready(self) -> bool:
        self._check_alive()
        logs = [self.workdir / f"worker-{name}.log" for name in self.workers]
        return all(" ready." in log.read_text(errors="replace") for log in logs)

    # -- stop ----------------------------------------------------------------------------------
    def stop(self, keep_databases: bool = False) -> list[str]:
        """Stop every process (TERM; TERM again after 15 s, as Airflow's LocalExecutor asks when it waits
        for its workers; KILL after 30 s) and drop the databases; returns problems."""
        problems = []
        for process in reversed(self.processes):
            if process.proc.poll() is None:
                try:
                    os.killpg(process.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for process in reversed(self.processes):
            try:
                process.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:  # "Signal again if you don't want to wait" (LocalExecutor, waiting for its workers)
                    os.killpg(process.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                process.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                problems.append(f"{process.name} ignored SIGTERM twice; killed")
                try:
                    os.killpg(process.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.proc.wait(timeout=10)
            # Children left in the group (task runners) go too.
            try:
                os.killpg(process.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not keep_databases:
            for name in self.databases:
                try:
                    self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                except psycopg.Error as exc:
                    problems.append(f"could not drop {name}: {exc}")
        try:
            if self.celery:
                self._flush_broker()
        except Exception as exc:  # the broker being gone must not hide the run's result
            problems.append(f"could not flush the broker: {exc}")
        return problems
