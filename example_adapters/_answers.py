"""Reading an API's answers the way the ledger needs them: costs, results, and listings by token."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from airflow_idempotent_jobs.paid import ProviderOutcomeUnknown

from ._client import job_ref

__all__ = ["METADATA_KEY", "ours"]

#: The metadata field that carries the ledger's idempotency token on a job.
METADATA_KEY: Final = "token"


def ours(jobs: Any, token: str, *, more: bool, where: str) -> str | None:
    """The one listed job whose ``metadata.token`` is ``token``; None only for an empty, complete list.

    A listing is trusted only as far as it shows: an API that ignores the filter lists other jobs
    too, so a job is adopted only when its own metadata carries the token, and a listing without it
    proves "no job" only when it is empty and has no next page. Two jobs with one token are not
    chosen between: whoever settles it must look.
    """
    if not isinstance(jobs, list):
        raise ProviderOutcomeUnknown(f"lookup: the answer has no {where!r} list: whether a job exists is unknown")
    mine = [job.get("id") for job in jobs if isinstance(job, dict) and _token_of(job) == token]
    if len(mine) == 1 and job_ref(mine[0]) is not None:
        return str(mine[0])
    if mine:
        shown = ", ".join(repr(ref)[:80] for ref in mine[:5])
        raise ProviderOutcomeUnknown(f"lookup: {len(mine)} jobs carry this token ({shown}): settle it with reconcile")
    if jobs or more:
        raise ProviderOutcomeUnknown(
            f"lookup: the listing's {where!r} holds other jobs or has more pages, but none with this token: "
            "the API did not filter by it, so whether a job exists is unknown"
        )
    return None


def _token_of(job: Mapping[str, Any]) -> Any:
    metadata = job.get("metadata")
    return metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
