"""The smaller deployment for human-in-the-loop runs: LocalExecutor, with people who can log in.

The api-server, scheduler (running tasks itself: LocalExecutor), dag-processor and triggerer of
`Deployment`, plus the simple auth manager with two users whose passwords we write (an approver
with the ``op`` role, and a viewer who may look but not answer), and a recording secrets backend
(tests/airflow/recording_secrets.py) that logs every Connection lookup of every task.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from e2e.deployment import Deployment

APPROVER, VIEWER = "approver", "watcher"


@dataclass
class HitlDeployment(Deployment):
    executor: str = "LocalExecutor"
    workers: tuple[str, ...] = ()
    prediction_api: bool = False
    passwords: dict[str, str] = field(
        default_factory=lambda: {APPROVER: "a-" + os.urandom(6).hex(), VIEWER: "v-" + os.urandom(6).hex()}
    )
    #: Connection ids that resolve to the provider server too (a DAG may use one of its own).
    provider_aliases: tuple[str, ...] = ()
    #: Log every Connection lookup (the suite's recording secrets backend; not for the demo).
    record_lookups: bool = True

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def passwords_file(self) -> Path:
        return self.workdir / "passwords.json"

    @property
    def secrets_log(self) -> Path:
        return self.workdir / "secrets-lookups.jsonl"

    @property
    def file_store(self) -> Path:
        """The embedded file store of the control home (LocalExecutor: every task runs there)."""
        return self.home("control") / "idempotent_jobs"

    def env(self, name: str) -> dict[str, str]:
        env = super().env(name)
        self.passwords_file.parent.mkdir(parents=True, exist_ok=True)
        self.passwords_file.write_text(json.dumps(self.passwords))
        env.update(
            {
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{APPROVER}:op,{VIEWER}:viewer",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.passwords_file),
                "AIRFLOW__CORE__PARALLELISM": "16",
            }
        )
        if self.record_lookups:
            env["AIRFLOW__SECRETS__BACKEND"] = "tests.airflow.recording_secrets.RecordingSecretsBackend"
            env["IJ_SECRETS_LOG"] = str(self.secrets_log)
        for alias in self.provider_aliases:
            env[f"AIRFLOW_CONN_{alias.upper()}"] = env["AIRFLOW_CONN_MEDIA_PROVIDER"]
        return env

    def connection_lookups(self) -> list[str]:
        """Every Connection id a task (or any process) looked up, in order."""
        if not self.secrets_log.exists():
            return []
        lines = self.secrets_log.read_text().splitlines()
        return [entry["id"] for entry in map(json.loads, lines) if entry["kind"] == "connection"]

    def parked(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> bool:
        """The scheduler has processed the exit of the task process that parked to await input."""
        self._check_alive()  # a stopped deployment ends the wait at once
        key = f"TaskInstanceKey(dag_id='{dag_id}', task_id='{task_id}', run_id='{run_id}', try_number={try_number}"
        text = (self.workdir / "scheduler.log").read_text(errors="replace")
        return f"Received executor event with state success for task instance {key}" in text
