"""The provider as Airflow sees it: provider info valid against Airflow's own schema, and the
real ``airflow providers`` CLI listing the package, its hooks, triggers and connection forms."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.resources
import importlib.util
import json
import re
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from airflow_idempotent_jobs import __version__
from airflow_idempotent_jobs.get_provider_info import get_provider_info
from tests.airflow.conftest import AirflowHome
from tests.airflow.versions import AIRFLOW_VERSION

pytestmark = pytest.mark.airflow


def airflow_schema(name: str) -> Any:
    return json.loads(importlib.resources.files("airflow").joinpath(name).read_text())


def test_provider_info_is_valid_against_airflows_schema() -> None:
    info = get_provider_info()
    jsonschema.validate(info, airflow_schema("provider_info.schema.json"))
    assert (
        info["package-name"] == "airflow-idempotent-jobs" == importlib.metadata.metadata(info["package-name"])["Name"]
    )
    assert info["versions"] == [__version__]
    behaviour_schema = airflow_schema("customized_form_field_behaviours.schema.json")
    for conn in info["connection-types"]:
        fields = conn["ui-field-behaviour"]
        jsonschema.validate({k.replace("-", "_"): v for k, v in fields.items()}, behaviour_schema)


def test_every_named_module_and_class_imports() -> None:
    info = get_provider_info()
    for section in ("operators", "hooks", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    for conn in info["connection-types"]:
        module, _, name = conn["hook-class-name"].rpartition(".")
        hook = getattr(importlib.import_module(module), name)
        assert (hook.conn_type, hook.hook_name) == (conn["connection-type"], conn["hook-name"])
        assert hook.get_ui_field_behaviour()["relabeling"] == conn["ui-field-behaviour"]["relabeling"]


def test_entry_point_is_registered() -> None:
    (entry,) = [
        e
        for e in importlib.metadata.entry_points(group="apache_airflow_provider")
        if e.value.startswith("airflow_idempotent_jobs")
    ]
    assert entry.load() is get_provider_info


def test_airflow_cli_lists_the_provider(airflow_home: AirflowHome) -> None:
    done = airflow_home.airflow("providers", "get", "airflow-idempotent-jobs", "--full", "-o", "json")
    assert done.returncode == 0, done.stderr[-2000:]
    (listed,) = json.loads(done.stdout)
    assert listed["package-name"] == "airflow-idempotent-jobs"
    assert listed["versions"] == [__version__]
    assert {c["connection-type"] for c in listed["connection-types"]} == {
        "idempotent_jobs_store",
        "idempotent_jobs_http",
        "idempotent_jobs_replicate",
    }
    assert {d["name"]: d["class-name"] for d in listed["task-decorators"]} == TASK_DECORATORS


def test_airflow_loads_the_plugin_with_eager_provider_discovery(airflow_home: AirflowHome) -> None:
    """The page's plugin comes from the provider info; Airflow loads it only without lazy discovery."""
    eager = airflow_home.airflow("plugins", "-o", "json", AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS="False")
    assert eager.returncode == 0, eager.stderr[-2000:]
    # Other providers' plugins (common-ai's, through their own entry points) may be listed too.
    # Airflow 3.2 logs to stdout around the JSON (alembic's "setup plugin" lines): those are left out.
    listed = "\n".join(line for line in eager.stdout.splitlines() if not re.match(r"\d{4}-\d\d-\d\dT", line))
    (plugin,) = [p for p in json.loads(listed) if p["name"] == "idempotent_jobs"]
    assert [(v["name"], v["url_route"]) for v in plugin["external_views"]] == [("Idempotent Jobs", "idempotent-jobs")]
    assert [a["url_prefix"] for a in plugin["fastapi_apps"]] == ["/idempotent-jobs"]
    lazy = airflow_home.airflow("plugins", "-o", "json", AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS="True")
    assert lazy.returncode == 0, lazy.stderr[-2000:]
    assert "idempotent_jobs" not in lazy.stdout, "lazily discovered, Airflow does not load it: the documented setting"


#: ``@task.<name>`` and the factory Airflow imports for it.
TASK_DECORATORS = {
    "paid_generation": "airflow_idempotent_jobs.decorators.paid_generation_task",
    "episode": "airflow_idempotent_jobs.decorators.episode_task",
}


def test_task_decorators_are_declared_the_way_airflow_reads_them() -> None:
    """The providers manager reads ``name`` and ``class-name`` (the schema's items are not checked)."""
    declared = get_provider_info()["task-decorators"]
    assert {d["name"]: d["class-name"] for d in declared} == TASK_DECORATORS
    for entry in declared:
        assert set(entry) == {"name", "class-name"}
        module, _, name = entry["class-name"].rpartition(".")
        assert callable(getattr(importlib.import_module(module), name))


def test_airflow_resolves_task_paid_generation_and_task_episode(airflow_home: AirflowHome) -> None:
    """``from airflow.sdk import task`` then ``task.paid_generation``: what a DAG file does, in a fresh process."""
    code = (
        "import json\n"
        "from airflow.sdk import task\n"
        "print(json.dumps({n: f'{getattr(task, n).__module__}.{getattr(task, n).__name__}' for n in "
        f"{sorted(TASK_DECORATORS)!r}}}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=airflow_home.env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == TASK_DECORATORS


def test_airflow_cli_imports_hooks_and_knows_their_forms(airflow_home: AirflowHome) -> None:
    hooks = airflow_home.airflow("providers", "hooks", "-o", "json")
    assert hooks.returncode == 0, hooks.stderr[-2000:]
    ours = {
        h["connection_type"]: h["class"]
        for h in json.loads(hooks.stdout)
        if h["package_name"] == "airflow-idempotent-jobs"
    }
    assert ours == {
        "idempotent_jobs_store": "airflow_idempotent_jobs.hooks.store.EpisodeStoreHook",
        "idempotent_jobs_http": "airflow_idempotent_jobs.hooks.http_provider.HttpPaidProviderHook",
        "idempotent_jobs_replicate": "airflow_idempotent_jobs.vendors.replicate.hook.ReplicateHook",
    }
    behaviours = airflow_home.airflow("providers", "behaviours", "-o", "json")
    assert behaviours.returncode == 0, behaviours.stderr[-2000:]
    listed = {b["field_behaviours"] for b in json.loads(behaviours.stdout)}
    if AIRFLOW_VERSION < (3, 2) and importlib.util.find_spec("flask_appbuilder") is None:
        # Airflow 3.1 reads a hook's form only with Flask-AppBuilder installed ("UI widgets will be
        # missing"); its connection form then shows the standard fields.
        assert "idempotent_jobs_http" not in listed
        return
    assert {"idempotent_jobs_store", "idempotent_jobs_http", "idempotent_jobs_replicate"} <= listed


def test_provider_contributes_its_config_section() -> None:
    section = get_provider_info()["config"]["idempotent_jobs"]
    assert set(section["options"]) == {"store", "store_conn_id", "timezone", "weekly_budget", "currency"}
    assert section["options"]["store"]["sensitive"] is True  # a URL may carry a password
    assert all(option["default"] == "" for option in section["options"].values())


def test_airflow_reads_the_providers_config_section(airflow_home: AirflowHome) -> None:
    described = airflow_home.airflow("config", "list", "--section", "idempotent_jobs", "--include-descriptions")
    assert described.returncode == 0, described.stderr[-2000:]
    assert "[idempotent_jobs]" in described.stdout and "several hosts" in described.stdout
    zone = airflow_home.airflow(
        "config", "get-value", "idempotent_jobs", "timezone", AIRFLOW__IDEMPOTENT_JOBS__TIMEZONE="Europe/Berlin"
    )
    assert zone.stdout.strip() == "Europe/Berlin", zone.stderr[-2000:]
    # Sensitive: Airflow also takes it from a command (or a secrets backend), not only in clear text.
    store = airflow_home.airflow(
        "config", "get-value", "idempotent_jobs", "store", AIRFLOW__IDEMPOTENT_JOBS__STORE_CMD="echo /srv/jobs"
    )
    assert store.stdout.strip() == "/srv/jobs", store.stderr[-2000:]
