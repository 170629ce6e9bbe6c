"""A secrets backend that records every lookup and answers none (``AIRFLOW__SECRETS__BACKEND``).

Airflow consults it first for every connection and variable, so its log shows exactly what a
task looked up, and when.
"""

from __future__ import annotations

import json
import os
import time

from tests.airflow.versions import BaseSecretsBackend


class RecordingSecretsBackend(BaseSecretsBackend):
    def _record(self, kind: str, name: str) -> None:
        path = os.environ.get("IJ_SECRETS_LOG")
        if path:
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"kind": kind, "id": name, "at": time.time()}) + "\n")

    def get_conn_value(self, conn_id: str, team_name: str | None = None) -> str | None:
        self._record("connection", conn_id)
        return None

    def get_variable(self, key: str, team_name: str | None = None) -> str | None:
        self._record("variable", key)
        return None

    def get_config(self, key: str) -> str | None:
        self._record("config", key)
        return None
