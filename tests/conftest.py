"""Shared fixtures: ``backend`` runs a test once per store backend (the conformance suite).

Under pytest-xdist (``make test`` runs ``--dist loadgroup``) a test whose fixtures are built once per
module or once for many modules (a whole set of ``dag.test()`` runs) is kept on one worker with the
other tests that share them: spread over two workers, each would build them again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import EpisodeStore
from tests.backends import Backend, FileBackend, PostgresBackend
from tests.pg import empty_database, pg_database, pg_server  # noqa: F401  (fixtures)

#: Session fixtures that are costly and shared by tests in several modules: their tests form one group.
SHARED_RUNS = ("scenario_results",)


def xdist_group(item: pytest.Item) -> str | None:
    """The group a test must run in (with every test that shares its costly fixtures), or None."""
    defs = getattr(item, "_fixtureinfo", None)
    if defs is None:
        return None
    names = set(defs.name2fixturedefs)
    for name in SHARED_RUNS:
        if name in names:
            return name
    module = getattr(item, "module", None)
    if module is None:
        return None
    for name in names:
        for fixture in defs.name2fixturedefs[name]:
            wide = fixture.scope in ("module", "session")
            if wide and getattr(fixture.func, "__module__", None) == module.__name__:
                return str(module.__name__)
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


class _GroupSuffix:
    """pytest-xdist 3.8 marks a test's group by renaming it ``<nodeid>@<group>`` through ``item._nodeid``,
    which pytest 9 no longer reads (a node's id is ``item._id``): without this every group is split."""

    @pytest.hookimpl(trylast=True)  # after xdist's own hook
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if not getattr(config.option, "loadgroup", False):
            return
        from _pytest.nodeid import NodeId

        for item in items:
            groups = sorted({str(mark.args[0]) for mark in item.iter_markers("xdist_group") if mark.args})
            if groups and "@" not in item.nodeid:
                item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_GroupSuffix(), "ij-xdist-group-suffix")


#: Backend names the conformance suite runs against; the PostgreSQL store adds "postgres".
BACKENDS = ["file", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "file":
        yield FileBackend(tmp_path / "store")
    elif request.param == "postgres":
        yield PostgresBackend(request.getfixturevalue("pg_database"))
    else:  # pragma: no cover - added by other backends
        raise AssertionError(request.param)


@pytest.fixture
def store(backend: Backend) -> Iterator[EpisodeStore]:
    with backend.open() as opened:
        yield opened
