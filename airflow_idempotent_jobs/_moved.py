"""Module paths and names of the previous release that moved: each still imports, with a DeprecationWarning.

An old path or name stays importable for one release and is listed in CHANGELOG.md; then its line
here goes. A moved name is answered by its old module's ``__getattr__`` (`moved_name`), which only
runs for a name the module does not hold.
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

__all__ = ["MOVED", "MOVED_NAMES", "install", "moved_name"]

#: Old module path -> the module that holds its names now.
MOVED: Final[dict[str, str]] = {
    "airflow_idempotent_jobs.check": "airflow_idempotent_jobs.record_rules",
    "airflow_idempotent_jobs.migration.verify": "airflow_idempotent_jobs.migration.evidence",
    "airflow_idempotent_jobs.operators.check": "airflow_idempotent_jobs.operators.check_episodes",
    "airflow_idempotent_jobs.operations_owner": "airflow_idempotent_jobs.task_key",
    "airflow_idempotent_jobs.provider_config": "airflow_idempotent_jobs.config",
    "airflow_idempotent_jobs.ui": "airflow_idempotent_jobs.plugins",
    "airflow_idempotent_jobs.ui.app": "airflow_idempotent_jobs.plugins.page_app",
    "airflow_idempotent_jobs.ui.auth": "airflow_idempotent_jobs.plugins.page_auth",
    "airflow_idempotent_jobs.ui.links": "airflow_idempotent_jobs.links.episode",
    "airflow_idempotent_jobs.ui.plugin": "airflow_idempotent_jobs.plugins.idempotent_jobs",
    "airflow_idempotent_jobs.ui.settings": "airflow_idempotent_jobs.plugins.page_settings",
    "airflow_idempotent_jobs.stores.file_check": "airflow_idempotent_jobs.stores.file._check",
    "airflow_idempotent_jobs.stores.pg_allocate": "airflow_idempotent_jobs.stores.postgres._allocate",
    "airflow_idempotent_jobs.stores.pg_check": "airflow_idempotent_jobs.stores.postgres._check",
    "airflow_idempotent_jobs.stores.pg_connection": "airflow_idempotent_jobs.stores.postgres._connection",
    "airflow_idempotent_jobs.stores.pg_options": "airflow_idempotent_jobs.stores.postgres._options",
    "airflow_idempotent_jobs.stores.pg_schema": "airflow_idempotent_jobs.stores.postgres._schema",
    "airflow_idempotent_jobs.stores.pg_session": "airflow_idempotent_jobs.stores.postgres._session",
    "airflow_idempotent_jobs.verify": "airflow_idempotent_jobs.store_check",
}

#: Old ``module.Name`` -> the module that defines ``Name`` now.
MOVED_NAMES: Final[dict[str, str]] = {
    "airflow_idempotent_jobs.migration.legacy_approval.LegacyApprovalRefused": "airflow_idempotent_jobs.errors",
    "airflow_idempotent_jobs.paid.BudgetUnknowable": "airflow_idempotent_jobs.errors",
    "airflow_idempotent_jobs.paid.Bounded": "airflow_idempotent_jobs.paid.results",
    "airflow_idempotent_jobs.paid.DEFAULT_RESULT_LIMIT": "airflow_idempotent_jobs.paid.results",
    "airflow_idempotent_jobs.paid.bound_result": "airflow_idempotent_jobs.paid.results",
    "airflow_idempotent_jobs.paid.canonical_json": "airflow_idempotent_jobs.paid.fingerprint",
    "airflow_idempotent_jobs.paid.checked_amount": "airflow_idempotent_jobs.paid.budget",
    "airflow_idempotent_jobs.paid.clean_text": "airflow_idempotent_jobs.paid.results",
    "airflow_idempotent_jobs.paid.fingerprint.RequestConflict": "airflow_idempotent_jobs.errors",
    "airflow_idempotent_jobs.paid.provider.ERROR_EVENT": "airflow_idempotent_jobs.paid.trigger_event",
    "airflow_idempotent_jobs.paid.provider.ProviderError": "airflow_idempotent_jobs.errors",
    "airflow_idempotent_jobs.paid.provider.ProviderOutcomeUnknown": "airflow_idempotent_jobs.errors",
    "airflow_idempotent_jobs.paid.provider.ProviderRejected": "airflow_idempotent_jobs.errors",
    "airflow_idempotent_jobs.paid.provider.ProviderUnavailable": "airflow_idempotent_jobs.errors",
    "airflow_idempotent_jobs.paid.provider.TERMINAL_EVENT": "airflow_idempotent_jobs.paid.trigger_event",
    "airflow_idempotent_jobs.paid.provider.decode_event": "airflow_idempotent_jobs.paid.trigger_event",
    "airflow_idempotent_jobs.paid.provider.encode_error_event": "airflow_idempotent_jobs.paid.trigger_event",
    "airflow_idempotent_jobs.paid.provider.encode_status_event": "airflow_idempotent_jobs.paid.trigger_event",
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


def moved_name(module: str, name: str) -> object:
    """A module's ``__getattr__``: the object ``module.name`` moved to, with a DeprecationWarning."""
    new = MOVED_NAMES.get(f"{module}.{name}")
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} moved to {new}.{name}; the old name goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(new), name)
