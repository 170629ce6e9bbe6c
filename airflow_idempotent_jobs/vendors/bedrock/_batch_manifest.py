"""What an ended batch inference job cost: its output manifest in S3, priced per million tokens.

Bedrock writes ``manifest.json.out`` to ``{outputDataConfig.s3OutputDataConfig.s3Uri}/{job id}/`` when
a job ends: ``{"totalRecordCount", "processedRecordCount", "successRecordCount", "errorRecordCount",
"inputTokenCount", "outputTokenCount"}`` (AWS's "View the results of a batch inference job"). The cost
is the input tokens at the model's input price plus the output tokens at its output price, per
million (`PriceTable`, batch prices). How each case reads (`read_usage`):

* no manifest (NoSuchKey) or any other 4xx (no access): no cost (None, the submission's estimate
  stands), and a note saying why;
* a read that fails otherwise (a 5xx, a lost answer): `ProviderOutcomeUnknown`, and the poll asks
  again: a terminal answer is recorded once, so a cost it lacked would never be read later;
* a manifest that is not what AWS documents (not JSON, over 64 KiB, a token count that is not an
  integer from 0 to 10^15: NaN, a float, text, a number of 400 digits): cost NaN, which the ledger
  records as a cost anomaly, never as the cost, and keeps the job. A record count that is no such
  integer is left out of the result.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from ...errors import ProviderOutcomeUnknown
from ..llm_batch import PriceTable, Usage
from ._botocore import classify

__all__ = ["COUNTS", "ManifestUsage", "manifest_location", "read_usage"]

#: The largest manifest read; AWS's is a few hundred bytes.
MAX_BYTES: Final = 64 * 1024
#: The largest count believed (a billion records of a million tokens each).
MAX_COUNT: Final = 10**15
COUNTS: Final = (
    "totalRecordCount",
    "processedRecordCount",
    "successRecordCount",
    "errorRecordCount",
    "inputTokenCount",
    "outputTokenCount",
)


@dataclass(frozen=True)
class ManifestUsage:
    """What the manifest said: its counts when readable, the cost (None: not known; NaN: unreadable), why."""

    cost: float | None
    counts: dict[str, int] | None = None
    note: str | None = None


def manifest_location(output_uri: str, job_id: str) -> tuple[str, str]:
    """``(bucket, key)`` of the job's manifest under its output URI."""
    bucket, _, prefix = output_uri.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/")
    return bucket, f"{prefix}/{job_id}/manifest.json.out" if prefix else f"{job_id}/manifest.json.out"


def read_usage(s3: Any, output_uri: str, job_id: str, model: str, prices: PriceTable) -> ManifestUsage:
    """The job's usage and cost from its manifest (module docstring)."""
    bucket, key = manifest_location(output_uri, job_id)
    where = f"s3://{bucket}/{key}"
    try:
        answer = s3.get_object(Bucket=bucket, Key=key)
        body = answer["Body"]
        try:
            raw = body.read(MAX_BYTES + 1)
        finally:
            body.close()
    except ClientError as exc:
        status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        if isinstance(status, int) and 400 <= status < 500:
            code = (exc.response.get("Error") or {}).get("Code") or status
            return ManifestUsage(None, note=f"no cost: the manifest {where} could not be read ({code})")
        raise ProviderOutcomeUnknown(f"{classify(exc, f'reading the manifest {where}')}: try again") from None
    except Exception as exc:
        raise ProviderOutcomeUnknown(f"{classify(exc, f'reading the manifest {where}')}: try again") from None
    counts, problem = _counts(raw)
    if counts is None:
        return ManifestUsage(math.nan, note=f"the manifest {where} is not AWS's: {problem}")
    usage = Usage(input_tokens=counts["inputTokenCount"], output_tokens=counts["outputTokenCount"])
    priced = model if model in prices.models else model.rpartition("foundation-model/")[2]
    if priced not in prices.models:
        return ManifestUsage(math.nan, counts, f"model {model[:120]!r} has no price: the cost is unknown")
    return ManifestUsage(prices.cost({priced: usage}), counts)


def _counts(raw: bytes) -> tuple[dict[str, int] | None, str]:
    if len(raw) > MAX_BYTES:
        return None, f"over {MAX_BYTES} bytes"
    try:
        data: Any = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON, or an integer beyond Python's digit limit
        return None, f"not JSON ({str(exc)[:80]})"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    counts = {name: data[name] for name in COUNTS if _count(data.get(name))}
    for name in ("inputTokenCount", "outputTokenCount"):  # the cost needs these; the record counts are shown
        if name not in counts:
            return None, f"{name} is {str(data.get(name))[:40]}, not an integer from 0 to {MAX_COUNT}"
    return counts, ""


def _count(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= MAX_COUNT
