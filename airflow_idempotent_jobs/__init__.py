"""Exactly one job per scheduled invocation, at most one paid submission per job.

Importing the package never imports Airflow or SQLAlchemy.
"""

from __future__ import annotations

from .episode import Episode, EpisodeStatus, Submission, SubmissionState
from .errors import (
    AllocationConflict,
    BudgetExceeded,
    EpisodeNotFound,
    IdempotentJobsError,
    IllegalTransition,
    InvalidIdentifier,
    StoreCorrupted,
    StoreUnavailable,
    SubmissionStateUnknown,
)
from .identity import EpisodeId, WeekId
from .stores import EpisodeStore, FileEpisodeStore, open_store

__version__ = "0.1.0"

__all__ = [
    "AllocationConflict",
    "BudgetExceeded",
    "Episode",
    "EpisodeId",
    "EpisodeNotFound",
    "EpisodeStatus",
    "EpisodeStore",
    "FileEpisodeStore",
    "IdempotentJobsError",
    "IllegalTransition",
    "InvalidIdentifier",
    "StoreCorrupted",
    "StoreUnavailable",
    "Submission",
    "SubmissionState",
    "SubmissionStateUnknown",
    "WeekId",
    "__version__",
    "open_store",
]
