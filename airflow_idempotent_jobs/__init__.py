"""Exactly one job per scheduled invocation, at most one paid submission per job.

Names are loaded on first use: Airflow imports this package (for ``get_provider_info``) in every
process that imports ``airflow.sdk``, so the package itself must cost next to nothing. Importing it
never imports Airflow or SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import _moved
from ._version import __version__

_moved.install()  # module paths of the previous release still import, with a warning

#: Public name -> the module that defines it: for library users, the model, the stores and the
#: errors they meet (every error is in `errors`; `paid` has the paid API's own).
_EXPORTS = {
    "Effect": "effect",
    "EffectState": "effect",
    "Approval": "episode",
    "Decision": "episode",
    "Episode": "episode",
    "EpisodeStatus": "episode",
    "Submission": "episode",
    "SubmissionState": "episode",
    "AllocationConflict": "errors",
    "ApprovalRequired": "errors",
    "BudgetExceeded": "errors",
    "DecisionConflict": "errors",
    "EffectInProgress": "errors",
    "EffectInputConflict": "errors",
    "EffectNotDone": "errors",
    "EffectStateUnknown": "errors",
    "EpisodeNotFound": "errors",
    "IdempotentJobsError": "errors",
    "IllegalTransition": "errors",
    "InvalidConfiguration": "errors",
    "InvalidIdentifier": "errors",
    "StoreCorrupted": "errors",
    "StoreMissing": "errors",
    "StoreOutdated": "errors",
    "StoreTooNew": "errors",
    "StoreUnavailable": "errors",
    "SubmissionStateUnknown": "errors",
    "EpisodeId": "identity",
    "WeekId": "identity",
    "EpisodeStore": "stores",
    "FileEpisodeStore": "stores",
    "PostgresEpisodeStore": "stores",  # stores imports SQLAlchemy only for this name
    "open_store": "stores",
}

__all__ = [
    "AllocationConflict",
    "Approval",
    "ApprovalRequired",
    "BudgetExceeded",
    "Decision",
    "DecisionConflict",
    "Effect",
    "EffectInProgress",
    "EffectInputConflict",
    "EffectNotDone",
    "EffectState",
    "EffectStateUnknown",
    "Episode",
    "EpisodeId",
    "EpisodeNotFound",
    "EpisodeStatus",
    "EpisodeStore",
    "FileEpisodeStore",
    "IdempotentJobsError",
    "IllegalTransition",
    "InvalidConfiguration",
    "InvalidIdentifier",
    "PostgresEpisodeStore",
    "StoreCorrupted",
    "StoreMissing",
    "StoreOutdated",
    "StoreTooNew",
    "StoreUnavailable",
    "Submission",
    "SubmissionState",
    "SubmissionStateUnknown",
    "WeekId",
    "__version__",
    "open_store",
]

if TYPE_CHECKING:
    from .effect import Effect, EffectState
    from .episode import Approval, Decision, Episode, EpisodeStatus, Submission, SubmissionState
    from .errors import (
        AllocationConflict,
        ApprovalRequired,
        BudgetExceeded,
        DecisionConflict,
        EffectInProgress,
        EffectInputConflict,
        EffectNotDone,
        EffectStateUnknown,
        EpisodeNotFound,
        IdempotentJobsError,
        IllegalTransition,
        InvalidConfiguration,
        InvalidIdentifier,
        StoreCorrupted,
        StoreMissing,
        StoreOutdated,
        StoreTooNew,
        StoreUnavailable,
        SubmissionStateUnknown,
    )
    from .identity import EpisodeId, WeekId
    from .stores import EpisodeStore, FileEpisodeStore, PostgresEpisodeStore, open_store


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return [*globals(), *_EXPORTS]
