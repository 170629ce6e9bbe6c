"""Module paths of the previous release still import, with a DeprecationWarning, and give the new module."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

import pytest

from airflow_idempotent_jobs import _moved


@pytest.mark.parametrize(("old", "new"), sorted(_moved.MOVED.items()))
def test_every_old_path_warns_and_gives_the_module_that_holds_its_names(old: str, new: str) -> None:
    # An old package that moved too (``ui`` of ``ui.app``) is imported first and warns first.
    warnings = 1 + sum(1 for parent in _parents(old) if parent in _moved.MOVED)
    # A parent that did not move is imported first: importing Airflow (``operators``) routes warnings
    # to Airflow's log, which would take them from the recorder.
    real_parents = [parent for parent in _parents(old) if parent not in _moved.MOVED]
    code = (
        f"import importlib, warnings\nfor parent in {real_parents!r}: importlib.import_module(parent)\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        "assert old is new, (old, new)\n"
        f"assert [w.category for w in seen] == [DeprecationWarning] * {warnings}, [str(w.message) for w in seen]\n"
        f"assert {new!r} in str(seen[-1].message)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_no_old_path_is_still_a_real_module(old: str) -> None:
    """The finder is asked only when no file answers: a module left at the old path would shadow it."""
    sys.modules.pop(old, None)
    sys.meta_path.remove(_moved._FINDER)
    try:
        moved_parents = [parent for parent in _parents(old) if parent in _moved.MOVED]
        if moved_parents:  # its package moved too: nothing real may answer for that package either
            with pytest.raises(ModuleNotFoundError):
                importlib.util.find_spec(old)
        else:
            assert importlib.util.find_spec(old) is None
    finally:
        _moved.install()


def test_an_alias_is_the_new_module_itself_and_the_new_module_keeps_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(_moved.MOVED, "airflow_idempotent_jobs.old_identity", "airflow_idempotent_jobs.identity")
    monkeypatch.delitem(sys.modules, "airflow_idempotent_jobs.old_identity", raising=False)
    with pytest.warns(DeprecationWarning, match="old_identity moved to airflow_idempotent_jobs.identity"):
        from airflow_idempotent_jobs import old_identity
    identity = importlib.import_module("airflow_idempotent_jobs.identity")
    assert old_identity is identity
    assert identity.__name__ == "airflow_idempotent_jobs.identity"
    assert identity.__spec__ is not None and identity.__spec__.name == "airflow_idempotent_jobs.identity"
    monkeypatch.delitem(sys.modules, "airflow_idempotent_jobs.old_identity")


def test_a_path_that_never_existed_is_still_an_import_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("airflow_idempotent_jobs.no_such_module")


def _parents(name: str) -> list[str]:
    """``a.b.c`` -> ``["a", "a.b"]``."""
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]
