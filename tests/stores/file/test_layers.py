"""The file store's modules import only modules below them: every import, deferred ones included."""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_idempotent_jobs.stores.file as file_store

#: Lowest first: the read layer below the writers, the writers below the session, the store on top.
ORDER = [
    "_lock",
    "_week_history",
    "_key_index",
    "_fresh_record",
    "_tree",
    "_key_lookup",
    "_writes",
    "_rebuild",
    "_session",
    "_check",
    "_store",
    "__init__",
]
HERE = Path(file_store.__file__).parent


def _imported(path: Path) -> set[str]:
    """The sibling modules ``path`` imports, wherever the import statement stands."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(file_store.__name__):
            rest = node.module[len(file_store.__name__) :].lstrip(".")
            found.add(rest.split(".")[0] if rest else "__init__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(file_store.__name__ + "."):
                    found.add(alias.name[len(file_store.__name__) + 1 :].split(".")[0])
    return found


def test_every_module_of_the_file_store_has_its_place_in_the_order() -> None:
    assert sorted(p.stem for p in HERE.glob("*.py")) == sorted(ORDER)


def test_no_module_of_the_file_store_imports_one_above_it() -> None:
    upward = [
        f"{path.stem} imports {name}"
        for path in sorted(HERE.glob("*.py"))
        for name in sorted(_imported(path))
        if ORDER.index(name) >= ORDER.index(path.stem)
    ]
    assert upward == []
