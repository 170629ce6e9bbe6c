"""Module paths of the previous release that moved: each still imports, with a DeprecationWarning.

An old path stays importable for one release and is listed in CHANGELOG.md; then its line here goes.
The finder runs only after the normal import system found no such module, so it costs nothing on
any other import.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Final, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

__all__ = ["MOVED", "install"]

#: Old module path -> the module that holds its names now.
MOVED: Final[dict[str, str]] = {
    "airflow_idempotent_jobs.stores.pg_allocate": "airflow_idempotent_jobs.stores.postgres._allocate",
    "airflow_idempotent_jobs.stores.pg_check": "airflow_idempotent_jobs.stores.postgres._check",
    "airflow_idempotent_jobs.stores.pg_connection": "airflow_idempotent_jobs.stores.postgres._connection",
    "airflow_idempotent_jobs.stores.pg_options": "airflow_idempotent_jobs.stores.postgres._options",
    "airflow_idempotent_jobs.stores.pg_schema": "airflow_idempotent_jobs.stores.postgres._schema",
    "airflow_idempotent_jobs.stores.pg_session": "airflow_idempotent_jobs.stores.postgres._session",
}


class _MovedFinder:
    """A meta path finder (the protocol only: importlib.abc would cost 20 ms of imports)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        new = MOVED.get(fullname)
        return None if new is None else ModuleSpec(fullname, cast("Loader", _AliasLoader(new)))


class _AliasLoader:
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # a placeholder module: exec_module swaps the real one in

    def exec_module(self, module: ModuleType) -> None:
        warnings.warn(
            f"{module.__name__} moved to {self.new}; the old path goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        # The import system returns what sys.modules holds after exec_module: the real module,
        # whose own __name__ and __spec__ stay untouched.
        sys.modules[module.__name__] = importlib.import_module(self.new)


_FINDER: Final = _MovedFinder()


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
