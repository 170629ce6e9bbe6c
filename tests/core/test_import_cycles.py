"""No import circle inside a subpackage: every ``import``/``from`` statement counts, module-level,
deferred (inside a function) or for type checking alike, read from the source (nothing is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import airflow_idempotent_jobs

ROOT = Path(airflow_idempotent_jobs.__file__).parent
PACKAGE = airflow_idempotent_jobs.__name__


def module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every module of the package that ``path`` imports, wherever the statement stands.

    ``from package import name`` imports the submodule ``package.name`` when there is one, else
    the package itself (its ``__init__``).
    """
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if _is_module(submodule) else base)
    return {name for name in found if name.startswith(PACKAGE + ".") or name == PACKAGE}


def _is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:])
    return (ROOT / relative).with_suffix(".py").is_file() or (ROOT / relative / "__init__.py").is_file()


def graph(under: str) -> dict[str, set[str]]:
    modules = {module_name(path): path for path in (ROOT / under).rglob("*.py")}
    return {name: imported(path) & set(modules) - {name} for name, path in modules.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_scan_finds_a_circle_and_a_deferred_import() -> None:
    assert circles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    ledger = imported(ROOT / "paid" / "ledger.py")
    assert f"{PACKAGE}.paid.claims" in ledger  # `from . import claims`
    assert f"{PACKAGE}.paid" not in ledger  # ... which is no import of the package's face
    assert f"{PACKAGE}.errors" in ledger
    trigger = imported(ROOT / "triggers" / "paid_job.py")
    assert f"{PACKAGE}.paid.trigger_event" in trigger  # imported inside `run`


@pytest.mark.parametrize("under", ["paid", "migration", "cli", "stores", "stores/file", "stores/postgres", "."])
def test_no_import_circle_in(under: str) -> None:
    # The package's __init__ imports its modules to re-export them; a module importing its own
    # package's face is the circle this test exists to find, so the __init__ counts like any module.
    assert circles(graph(under)) == []
