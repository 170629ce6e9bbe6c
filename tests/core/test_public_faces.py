"""The faces for adapter authors: `paid`'s names resolve without a warning, and the example adapters
(what an adapter author copies) import only public modules of the package."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

from airflow_idempotent_jobs import paid

EXAMPLES = Path(__file__).resolve().parents[2] / "example_adapters"


def test_every_name_of_the_paid_face_resolves_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in paid.__all__:
            assert getattr(paid, name) is not None, name


def imported_modules(path: Path) -> set[str]:
    """Every absolute ``import``/``from`` target in ``path``, deferred imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names if alias.name.startswith("_"))
    return found


def test_the_example_adapters_import_only_public_modules_of_the_package() -> None:
    private = {
        f"{path.name}: {module}"
        for path in sorted(EXAMPLES.glob("*.py"))
        for module in imported_modules(path)
        if module.split(".")[0] == "airflow_idempotent_jobs" and any(p.startswith("_") for p in module.split("."))
    }
    assert private == set()
    assert imported_modules(EXAMPLES / "_api_server.py") >= {"airflow_idempotent_jobs.testing.local_api"}
