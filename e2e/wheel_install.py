"""``make check-dist``: the built wheel, alone in a fresh venv, works as a user's deployment would use it.

Reads dist/ (``make dist``) and:

1. checks the wheel's file list: every file of the package in git (``.sql`` migrations, the page's
   static files, ``py.typed``) and nothing else (no tests, examples or demo), the console script
   and the ``apache_airflow_provider`` entry point in its metadata;
2. makes a new venv (no access to this checkout's, nothing from the checkout on ``sys.path``) and
   installs ``<wheel>[postgres]`` with the pinned constraints;
3. from a directory outside the checkout, with a throwaway AIRFLOW_HOME (SQLite): the package is
   imported from the venv's site-packages; ``airflow providers get`` shows the provider with this
   version; ``airflow plugins`` lists the plugin; the CLI allocates; ``airflow db migrate``; the
   example DAG ``weekly_media_pipeline`` runs under ``dag.test()`` against the wheel's own provider
   server, once on the embedded file store and once on PostgreSQL (``[idempotent_jobs] store``):
   each run succeeds, holds one episode with one submission, and the server billed one job.

Exit 0 only if every check held. Run: ``.venv/bin/python -m e2e.wheel_install [--keep]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import psycopg

from e2e.deployment import pg_url
from e2e.results import Results

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "airflow_idempotent_jobs"
DAG_ID = "weekly_media_pipeline"
TOKEN = "wheel-check-provider-token"
#: pyproject's Documentation URL, where .readthedocs.yaml publishes mkdocs.yml's site.
DOCUMENTATION_URL = "https://airflow-idempotent-jobs.readthedocs.io/"
#: Names a wheel may hold that git never tracks (compiled bytecode): not counted as extra.
NOT_SHIPPED = (".pyc",)


def say(text: str) -> None:
    print(f"[check-dist {time.strftime('%H:%M:%S')}] {text}", flush=True)


def the_wheel() -> Path:
    wheels = sorted((REPO / "dist").glob("airflow_idempotent_jobs-*.whl"))
    if len(wheels) != 1:
        sys.exit(f"check-dist: expected one wheel in {REPO / 'dist'}, found {len(wheels)}: run make dist")
    return wheels[0]


def check_file_list(wheel: Path, out: Results) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", PACKAGE], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info"))
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
        metadata = archive.read(f"{dist_info}/METADATA").decode()
    shipped = {n for n in names if not n.startswith(dist_info + "/")}
    missing = sorted(set(tracked) - shipped)
    extra = sorted(n for n in shipped - set(tracked) if not n.endswith(NOT_SHIPPED))
    data = sorted(n for n in shipped if not n.endswith(".py"))
    out.expect(
        "the wheel holds every file of the package in git (sql, static, py.typed) and nothing else",
        not missing and not extra and any(n.endswith(".sql") for n in data) and any("/static/" in n for n in data),
        {"missing": missing, "extra": extra, "data files": len(data)},
    )
    out.expect(
        "its metadata declares the CLI, the provider entry point and the extras",
        "idempotent-jobs = airflow_idempotent_jobs.command:main" in entry_points
        and "[apache_airflow_provider]" in entry_points
        and "Provides-Extra: postgres" in metadata,
        entry_points,
    )


class FreshVenv:
    """A venv of its own holding the wheel; commands run outside the checkout without its paths."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.venv = work / "venv"
        self.bin = self.venv / "bin"
        self.home = work / "airflow-home"
        self.cwd = work / "cwd"

    def create(self, wheel: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
        (self.home / "dags").mkdir(parents=True)
        self.cwd.mkdir()
        started = time.monotonic()
        constraints = str(REPO / "constraints.txt")
        pip = [str(self.bin / "python"), "-m", "pip", "install", "--quiet", "-c", constraints]
        self.run_ok([*pip, f"{wheel}[postgres]"], timeout=900)
        say(f"installed {wheel.name}[postgres] with constraints.txt in {time.monotonic() - started:.0f}s")

    def env(self, **extra: str) -> dict[str, str]:
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PGHOST", "PGPORT", "PGUSER", "PGPASSWORD")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env.update(
            PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}",
            AIRFLOW_HOME=str(self.home),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__DAGS_FOLDER=str(self.home / "dags"),
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{self.home / 'airflow.db'}",
        )
        env.update(extra)
        return env

    def run(
        self, args: list[str], env: dict[str, str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, cwd=self.cwd, env=env or self.env(), capture_output=True, text=True, timeout=timeout, check=False
        )

    def run_ok(self, args: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> str:
        done = self.run(args, env, timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:4])} exited {done.returncode}: {(done.stderr or done.stdout)[-2000:]}")
        return done.stdout


#: Runs inside the fresh venv: one dag.test() of the example DAG, what the store then holds.
DAG_TEST = """
import json, sys
import pendulum
from airflow.dag_processing.dagbag import DagBag
from airflow_idempotent_jobs import open_store

bag = DagBag(sys.argv[1])
dag = bag.get_dag(sys.argv[2])
assert dag is not None, bag.import_errors
moment = pendulum.parse("2026-08-03T04:00:00+00:00")
run = dag.test(logical_date=moment, run_after=moment)
with open_store(sys.argv[3]) as store:
    episodes = [e.to_dict() for e in store.list()]
print(json.dumps({"state": str(run.state), "run_id": run.run_id, "episodes": episodes}))
"""


def provider_jobs(url: str) -> int:
    """Jobs the provider server accepted (billed) so far."""
    import httpx

    answer = httpx.get(url + "/_admin/stats", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    answer.raise_for_status()
    return int(answer.json()["accepted"])


class PgDatabase:
    """A database of its own on the test server for the PostgreSQL store run; None when none answers."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.url = pg_url(name)

    @staticmethod
    def _admin(statement: str) -> None:
        with psycopg.connect(pg_url(os.environ.get("PGDATABASE", "postgres")), autocommit=True) as conn:
            conn.execute(statement.encode())

    @classmethod
    def create(cls) -> PgDatabase | None:
        database = cls(f"ij_e2e_wheel_{os.getpid()}")
        try:
            cls._admin(f'DROP DATABASE IF EXISTS "{database.name}" WITH (FORCE)')
            cls._admin(f'CREATE DATABASE "{database.name}"')
        except psycopg.OperationalError as exc:
            if os.environ.get("CI", "").lower() == "true":
                raise
            say(f"no PostgreSQL server ({' '.join(str(exc).split())[:200]}): the PostgreSQL store run is skipped")
            return None
        return database

    def drop(self) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def check_installed(venv: FreshVenv, wheel: Path, out: Results, pg_url: str | None) -> None:
    from airflow_idempotent_jobs._version import __version__

    python = str(venv.bin / "python")
    probe = f"import json, sys, {PACKAGE}; print(json.dumps([{PACKAGE}.__file__, sys.path]))"
    where, path = json.loads(venv.run_ok([python, "-c", probe]))
    out.expect(
        "the package is imported from the venv's site-packages, the checkout is not on sys.path",
        where.startswith(str(venv.venv)) and not any((venv.cwd / p).resolve() == REPO for p in path),
        {"imported from": where, "sys.path": path},
    )
    airflow = str(venv.bin / "airflow")
    provider = json.loads(venv.run_ok([airflow, "providers", "get", "airflow-idempotent-jobs", "-o", "json"]))
    out.expect(
        f"airflow providers get: airflow-idempotent-jobs {__version__}",
        provider == [{"Provider": "airflow-idempotent-jobs", "Version": __version__}],
        provider,
    )
    # The Providers page's link: Airflow reads it from the wheel's "Documentation" project URL.
    probe = (
        "import json; from airflow.providers_manager import ProvidersManager; "
        "print(json.dumps(ProvidersManager().providers['airflow-idempotent-jobs'].data.get('documentation-url')))"
    )
    documentation = json.loads(venv.run_ok([python, "-c", probe]))
    out.expect(
        f"the provider's documentation-url is {DOCUMENTATION_URL}", documentation == DOCUMENTATION_URL, documentation
    )
    # Airflow loads a provider's plugins only without lazy provider discovery (docs/how-to/operations-page.md).
    eager = venv.env(AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS="False")
    plugins = json.loads(venv.run_ok([airflow, "plugins", "-o", "json"], eager))
    out.expect("airflow plugins lists the plugin", [p.get("name") for p in plugins] == ["idempotent_jobs"], plugins)
    store = venv.work / "cli-store"
    allocated = venv.run(
        [str(venv.bin / "idempotent-jobs"), "--store", str(store), "allocate", "--week", "2026-W32", "--key", "k"]
    )
    out.expect(
        "the CLI allocates 2026-W32-0",
        (allocated.returncode, allocated.stdout) == (0, "2026-W32-0\n"),
        (allocated.returncode, allocated.stdout, allocated.stderr[-500:]),
    )
    venv.run_ok([airflow, "db", "migrate"], timeout=600)
    shutil.copy(REPO / "example_dags" / f"{DAG_ID}.py", venv.home / "dags")
    server = subprocess.Popen(
        [python, "-m", f"{PACKAGE}.testing.server", "--port", "0", "--token", TOKEN],
        stdout=subprocess.PIPE,
        text=True,
        cwd=venv.cwd,
        env=venv.env(),
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        connection = venv.run_ok(
            [
                python,
                "-c",
                f"import json; from {PACKAGE}.testing.server import server_connection as c; "
                f"print(json.dumps(c({url!r}, {TOKEN!r})))",
            ]
        ).strip()
        stores: list[tuple[str, str, dict[str, str]]] = [("file", str(venv.home / "idempotent_jobs"), {})]
        if pg_url is not None:
            stores.append(("postgres", pg_url, {"AIRFLOW__IDEMPOTENT_JOBS__STORE": pg_url}))
        for name, store_url, extra in stores:
            before = provider_jobs(url)
            env = venv.env(AIRFLOW_CONN_MEDIA_PROVIDER=connection, **extra)
            done = venv.run([python, "-c", DAG_TEST, str(venv.home / "dags"), DAG_ID, store_url], env, timeout=600)
            result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
            episodes = result.get("episodes", [])
            billed = provider_jobs(url) - before
            out.expect(
                f"{DAG_ID} under dag.test() on the {name} store: success, one episode, one submission, one job billed",
                result.get("state") == "success"
                and len(episodes) == 1
                and (episodes[0].get("submission") or {}).get("state") == "succeeded"
                and billed == 1,
                {
                    "exit": done.returncode,
                    "state": result.get("state"),
                    "episodes": len(episodes),
                    "billed": billed,
                    "stderr": done.stderr[-1500:] if done.returncode else "",
                },
            )
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the venv and the Airflow home")
    # Outside the checkout: nothing there may be found by accident (a relative path, a .pth).
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "airflow-idempotent-jobs-wheel")
    args = parser.parse_args()
    wheel = the_wheel()
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    args.workdir.mkdir(parents=True)
    out = Results(say, shown=3000)
    started = time.monotonic()
    check_file_list(wheel, out)
    venv = FreshVenv(args.workdir)
    pg = PgDatabase.create()
    try:
        venv.create(wheel)
        check_installed(venv, wheel, out, pg.url if pg else None)
    except Exception as exc:  # the step that broke is the failure; what ran before stays reported
        out.expect("every step ran to the end", False, f"{type(exc).__name__}: {exc}")
    finally:
        if pg is not None:
            pg.drop()
    say(f"result: {'PASS' if out.ok else 'FAIL'} in {time.monotonic() - started:.0f}s")
    if out.ok and not args.keep:
        shutil.rmtree(args.workdir, ignore_errors=True)
    else:
        say(f"kept {args.workdir}")
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(main())
