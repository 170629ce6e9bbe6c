"""The package root: its public names, and that importing it stays cheap."""

from __future__ import annotations

import json
import subprocess
import sys

import airflow_idempotent_jobs as package


def test_every_public_name_resolves() -> None:
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    assert set(package.__all__) == {*package._EXPORTS, "__version__"}


def test_importing_the_package_loads_nothing_heavy() -> None:
    # Airflow imports the package in every process (get_provider_info): it must load no store,
    # no filelock, no Airflow and no SQLAlchemy until a name is used. Only the finder of moved
    # module paths loads, and it imports nothing outside the standard library's import machinery.
    code = (
        "import json, sys; import airflow_idempotent_jobs; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('airflow', 'sqlalchemy', 'filelock', 'httpx') or m.startswith('airflow_idempotent_jobs.'))))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert loaded == ["airflow_idempotent_jobs._moved", "airflow_idempotent_jobs._version"]


def test_the_root_exports_the_errors_users_meet_and_every_store() -> None:
    from airflow_idempotent_jobs import errors, stores

    assert package.InvalidConfiguration is errors.InvalidConfiguration
    assert package.PostgresEpisodeStore is stores.PostgresEpisodeStore
    for name in ("StoreMissing", "StoreOutdated", "StoreTooNew", "FileEpisodeStore", "open_store"):
        assert name in package.__all__, name


def test_the_postgres_store_costs_its_import_only_when_asked_for() -> None:
    code = (
        "import json, sys; import airflow_idempotent_jobs as p; p.InvalidConfiguration; p.FileEpisodeStore; "
        "before = 'sqlalchemy' in sys.modules; p.PostgresEpisodeStore; "
        "print(json.dumps([before, 'sqlalchemy' in sys.modules]))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(run.stdout) == [False, True]
