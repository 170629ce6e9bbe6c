"""One error module: every public error is defined in `errors`, its docstring's tree tells the truth,
and the old homes of the moved classes still give the same class."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import warnings

import pytest

from airflow_idempotent_jobs import _moved, errors

# Imports every module of the package (in a child: Airflow's modules configure logging on import)
# and lists its public exception classes that live elsewhere than `errors`. A class is public when
# neither its module path nor its name has a leading underscore. A subclass of a third-party error
# (psycopg's, say) stays beside the code that needs the driver: `errors` imports nothing.
_SCAN = """
import importlib, inspect, json, pkgutil, warnings
import airflow_idempotent_jobs as package
warnings.simplefilter("ignore")
ours = package.__name__
def public(path):
    return not any(part.startswith("_") for part in path.split("."))
found = []
for info in pkgutil.walk_packages(package.__path__, ours + "."):
    if info.name.endswith(".__main__"):
        continue
    module = importlib.import_module(info.name)
    for name, value in vars(module).items():
        if not (inspect.isclass(value) and issubclass(value, BaseException)):
            continue
        if not value.__module__.startswith(ours) or value.__module__ == ours + ".errors":
            continue
        foreign = [c for c in value.__mro__ if c.__module__.split(".")[0] not in (ours.split(".")[0], "builtins")]
        if public(value.__module__) and public(value.__qualname__) and not foreign:
            found.append(value.__module__ + "." + value.__qualname__)
print(json.dumps(sorted(set(found))))
"""


def test_every_public_error_class_is_defined_in_errors() -> None:
    run = subprocess.run([sys.executable, "-c", _SCAN], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == []


def test_errors_imports_nothing_of_the_package() -> None:
    code = (
        "import json, sys; import airflow_idempotent_jobs.errors; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('airflow_idempotent_jobs'))))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert loaded == [
        "airflow_idempotent_jobs",
        "airflow_idempotent_jobs._moved",
        "airflow_idempotent_jobs._version",
        "airflow_idempotent_jobs.errors",
    ]


#: A line of the docstring's tree: the class, its other bases in brackets, dots, exit code, "retry".
_TREE_LINE = re.compile(r"(?P<name>[A-Z]\w+)(?: \([^)]*\))? \.+ (?P<exit>\d)(?P<retry> retry)?")


def test_the_docstring_tree_names_every_class_with_its_exit_code_and_retry() -> None:
    doc = errors.__doc__ or ""
    drawn = {m["name"]: (int(m["exit"]), bool(m["retry"])) for m in _TREE_LINE.finditer(doc)}
    rooted = {n for n in errors.__all__ if issubclass(getattr(errors, n), errors.IdempotentJobsError)}
    assert set(drawn) == rooted
    for name, (exit_code, retryable) in drawn.items():
        cls = getattr(errors, name)
        assert (cls.exit_code, cls.retryable) == (exit_code, retryable), name
    others = set(errors.__all__) - rooted
    assert others == {"UnsafeJson", "LegacyApprovalError"}
    assert all(re.search(rf"── {name}\b", doc) for name in others)


@pytest.mark.parametrize(("old", "new"), sorted(_moved.MOVED_NAMES.items()))
def test_a_moved_name_warns_and_is_the_same_object(old: str, new: str) -> None:
    module_name, name = old.rsplit(".", 1)
    module = importlib.import_module(module_name)
    assert name not in vars(module), "held by the old module: its __getattr__ would never warn"
    with pytest.warns(DeprecationWarning, match=re.escape(f"{old} moved to {new}.{name}")):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)


def test_a_name_that_never_existed_is_still_an_attribute_error() -> None:
    from airflow_idempotent_jobs.paid import provider

    with pytest.raises(AttributeError, match="no_such_name"):
        provider.no_such_name  # noqa: B018


@pytest.mark.parametrize(
    "old",
    [
        "paid.ledger.SubmissionInProgress",
        "paid.ledger.NotReconcilable",
        "paid.poll.PollTimeout",
        "paid.fingerprint.InvalidRequest",
        "paid.budget.BudgetUnknowable",
        "migration.apply.MigrationError",
        "migration.legacy_approval.LegacyApprovalError",
        "safe_json.UnsafeJson",
        "migration.json_files.UnsafeJson",
    ],
)
def test_an_old_home_that_uses_its_class_still_gives_the_same_one_without_a_warning(old: str) -> None:
    module_name, name = old.rsplit(".", 1)
    module = importlib.import_module(f"airflow_idempotent_jobs.{module_name}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(module, name) is getattr(errors, name)
