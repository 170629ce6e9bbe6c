"""A local API shaped like Amazon Bedrock's control plane for batch inference, for the real ``boto3``
``bedrock`` client pointed at it (``endpoint_url=url``), with a minimal S3 ``GetObject`` on the same
port for the jobs' output manifests (an ``s3`` client at the same URL, path-style addressing).

Runnable (``python -m airflow_idempotent_jobs.testing.bedrock_control_api --port 0`` prints its URL)
and importable (`BedrockControlApi`, a context manager running in a thread). REST-JSON as botocore's
``bedrock`` 2023-04-20 model describes it (`_bedrock_jobs` holds its patterns); a SigV4
``Authorization`` header is required and accepted unchecked (unsigned: 403)::

    POST /model-invocation-job            CreateModelInvocationJob: {"jobName", "roleArn", "modelId",
                                          "inputDataConfig", "outputDataConfig", "clientRequestToken",
                                          "timeoutDurationInHours", "tags", "vpcConfig",
                                          "modelInvocationType"} -> {"jobArn"}. PAID (``accepted``, per
                                          token), but for a token seen before (below)
    GET  /model-invocation-job/{jobIdentifier}
                                          GetModelInvocationJob, by ARN or 12-character id (unknown: 404
                                          ResourceNotFoundException); each read moves the job on through
                                          ``progress``, then to ``end_as`` on read ``polls_to_finish``
    GET  /model-invocation-jobs?nameContains=&submitTimeAfter=&submitTimeBefore=&statusEquals=
         &maxResults=&nextToken=&sortBy=CreationTime&sortOrder=
                                          ListModelInvocationJobs: {"invocationJobSummaries",
                                          "nextToken"}, newest first unless sortOrder=Ascending
    GET  /{bucket}/{key}                  S3 GetObject: what the double wrote (an ended job's
                                          ``{s3Uri}/{jobId}/manifest.json.out``) or a test put; else 404
                                          NoSuchKey (S3's XML error)

**Tokens**, as AWS documents ``clientRequestToken`` ("if this token matches a previous request, Amazon
Bedrock ignores the request, but does not return an error"): a token seen before with the same
parameters answers its job's ARN again and makes nothing (``replayed``). The same token with other
parameters is 400 ``ConflictException``: AWS's idempotency guide, which the token's documentation
cites, answers that case with ``IdempotentParameterMismatch``, an error this operation does not
declare; of those it declares, ConflictException ("a conflict while performing an operation") is
the one that fits. **Names**: a ``jobName`` another job holds is 400 ``ValidationException`` "The
provided job name is currently in use", as Bedrock's sibling ``CreateModelImportJob`` answers it
(aws/sagemaker-python-sdk#6076); the model declares no error of its own for it. The token is looked
at before the name, unless ``names_before_tokens`` (an API that did it the other way round would
refuse boto3's repetition of an accepted call: the provider must not take that as "nothing made").

Switches (``POST /_admin/config``, fields of `BedrockControlConfig`): ``fault`` on the paid call, as
`bedrock_api`'s (``drop_after_accept``, ``hang_after_accept`` for ``slow_seconds``,
``500_after_accept``, ``503_after_accept``; before creating: ``429``, ``500``, ``400``);
``honour_tokens``; ``unique_names``, ``names_before_tokens``; ``progress`` and ``end_as``
(Completed, PartiallyCompleted, Failed, Stopped, Expired); the manifest's ``records``,
``input_tokens``, ``output_tokens`` or its raw ``manifest_text``; ``listing`` (``honest``;
``unfiltered``: ``nameContains`` ignored; or a lie: ``other_token`` (every summary shows another
token than its job's), ``no_token``, ``endless`` (a new ``nextToken`` on every page), ``repeat_token``
(the same ``nextToken`` again)); ``status_errors``,
``lookup_errors`` and ``object_errors`` (the next reads answer these codes). ``GET /_admin/stats``:
counters (``signed_by``: calls per access key id), jobs and object keys.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ._api_switches import ApiSwitches
from ._aws_rest import Reply, aws_app, aws_error, iso, parameters_digest, s3_error, when
from ._background import BackgroundServer, UvicornServer, serve_until_terminated
from ._bedrock_jobs import END_STATES, JOB_ID, LISTING_MODES, MANIFESTED, RUNNING, create_problem, listing_problem
from ._bedrock_jobs import public as _public
from ._double import CountedDouble
from .bedrock_api import ACCOUNT, CREATE_FAULTS

__all__ = ["BedrockControlApi", "BedrockControlConfig", "main"]

_JOBS = "/model-invocation-job"


@dataclass
class BedrockControlConfig(ApiSwitches):
    """The double's switches (those of every local API, and these); see the module docstring."""

    faults: ClassVar[frozenset[str]] = CREATE_FAULTS

    #: Answer a repeated ``clientRequestToken`` with its job (AWS's documented behaviour).
    honour_tokens: bool = True
    #: Refuse a ``jobName`` another job holds (inferred from CreateModelImportJob: module docstring);
    #: off, a name may repeat, and an Airflow retry with the same ``job_name`` makes a second job.
    unique_names: bool = True
    #: Refuse a held ``jobName`` before looking at the token.
    names_before_tokens: bool = False
    #: The statuses a job shows before it ends: the first when made, then one per read.
    progress: list[str] = dataclasses.field(default_factory=lambda: ["Submitted", "InProgress"])
    end_as: str = "Completed"
    #: The manifest of a job that ends with output: its records and the tokens of all of them.
    records: int = 100
    input_tokens: int = 250_000
    output_tokens: int = 40_000
    #: Written as the manifest instead, verbatim (a manifest that is not what AWS documents).
    manifest_text: str | None = None
    listing: str = "honest"
    #: The next S3 reads answer these HTTP codes, one per read.
    object_errors: list[int] = dataclasses.field(default_factory=list)
    region: str = "us-east-1"

    def check(self, changes: dict[str, Any]) -> None:
        super().check(changes)
        if changes.get("end_as", "Completed") not in END_STATES:
            raise ValueError(f"unknown end_as {changes['end_as']!r} (one of {sorted(END_STATES)})")
        progress = changes.get("progress", ["Submitted"])
        if not isinstance(progress, list) or not progress or not set(progress) <= RUNNING:
            raise ValueError(f"progress must be a non-empty list of {sorted(RUNNING)}")
        if changes.get("listing", "honest") not in LISTING_MODES:
            raise ValueError(f"unknown listing {changes['listing']!r} (one of {sorted(LISTING_MODES)})")
        for name in ("records", "input_tokens", "output_tokens"):
            value = changes.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0")


class BedrockControlApi(CountedDouble[BedrockControlConfig], BackgroundServer):
    """The double on a thread of this process: ``with BedrockControlApi() as api: api.url``."""

    per_token = "accepted_per_token"

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, **config: Any) -> None:
        self.config = BedrockControlConfig()
        self.config.update(config)
        self.lock = threading.Lock()
        #: Jobs by ARN, in submission order.
        self.jobs: dict[str, dict[str, Any]] = {}
        #: S3 objects by ``bucket/key``.
        self.objects: dict[str, bytes] = {}
        self.counters: dict[str, Any] = dict.fromkeys(
            (
                "unsigned",
                "submissions",
                "accepted",
                "replayed",
                "conflicts",
                "name_conflicts",
                "status_calls",
                "lookup_calls",
                "object_reads",
            ),
            0,
        )
        self.counters["accepted_per_token"] = {}
        #: Calls per access key id (``Credential=<id>/`` of each SigV4 header): which keys signed.
        self.counters["signed_by"] = {}
        stopping = threading.Event()
        super().__init__(UvicornServer((host, port), aws_app(self, stopping), stopping), host)

    # -- for tests --------------------------------------------------------------------------------
    @property
    def slow_seconds(self) -> float:
        return self.config.slow_seconds

    def snapshot(self) -> dict[str, Any]:
        """What ``GET /_admin/stats`` shows (``lock`` held)."""
        return {
            **copy.deepcopy(self.counters),
            "jobs": {arn: _public(job) for arn, job in self.jobs.items()},
            "objects": sorted(self.objects),
            "config": dataclasses.asdict(self.config),
        }

    def put_object(self, uri: str, body: bytes) -> None:
        """Store ``body`` at ``s3://bucket/key`` (a manifest a test writes itself)."""
        with self.lock:
            self.objects[uri.removeprefix("s3://")] = bytes(body)

    # -- the API (``lock`` held) -------------------------------------------------------------------
    def unsigned(self, path: str) -> Reply:
        if path.startswith(_JOBS):
            return aws_error(403, "Missing Authentication Token", "AccessDeniedException")
        return s3_error(403, "AccessDenied", "Access Denied", path)

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Reply:
        if (method, path) == ("POST", _JOBS):
            return self._create(body)
        if (method, path) == ("GET", _JOBS + "s"):
            return self._list(query)
        if method == "GET" and path.startswith(_JOBS + "/"):
            return self._get(path[len(_JOBS) + 1 :])
        if (method, path) == ("GET", "/_admin/stats"):
            return Reply(200, self.snapshot())
        if (method, path) == ("POST", "/_admin/config"):
            try:
                self.config.update(body if isinstance(body, dict) else {})
            except ValueError as exc:
                return aws_error(400, str(exc))
            return Reply(200, dataclasses.asdict(self.config))
        if method == "GET" and path.count("/") >= 2 and not path.startswith("/_admin/"):
            return self._object(path[1:])
        return aws_error(404, f"no route {method} {path}", "UnknownOperationException")

    def _create(self, body: Any) -> Reply:
        self.counters["submissions"] += 1
        fault = self.config.take_fault()
        if fault in ("429", "500", "400"):
            return aws_error(int(fault), f"refused before anything was made (HTTP {fault})")
        problem = create_problem(body)
        if problem:
            return aws_error(400, problem)
        token, params = body.get("clientRequestToken"), parameters_digest(body)
        first_names = self.config.names_before_tokens
        for check in (self._held_name, self._seen_token) if first_names else (self._seen_token, self._held_name):
            answer = check(body, token, params)
            if answer is not None:
                return dataclasses.replace(answer, fault=fault) if answer.code == 200 else answer
        job = self._new(body, token, params)
        self.counters["accepted"] += 1
        per_token = self.counters["accepted_per_token"]
        per_token[str(token)] = per_token.get(str(token), 0) + 1
        return Reply(200, {"jobArn": job["jobArn"]}, fault=fault)

    def _seen_token(self, body: dict[str, Any], token: str | None, params: str) -> Reply | None:
        if token is None or not self.config.honour_tokens:
            return None
        for job in self.jobs.values():
            if job["clientRequestToken"] == token:
                if job["_params"] != params:
                    self.counters["conflicts"] += 1
                    why = "the client request token was used with other parameters"
                    return aws_error(400, why, "ConflictException")
                self.counters["replayed"] += 1
                return Reply(200, {"jobArn": job["jobArn"]})
        return None

    def _held_name(self, body: dict[str, Any], token: str | None, params: str) -> Reply | None:
        if self.config.unique_names and any(job["jobName"] == body["jobName"] for job in self.jobs.values()):
            self.counters["name_conflicts"] += 1
            return aws_error(400, "The provided job name is currently in use.", "ValidationException")
        return None

    def _new(self, body: dict[str, Any], token: str | None, params: str) -> dict[str, Any]:
        job_id = uuid.uuid4().hex[:12]
        now = time.time()
        hours = int(body.get("timeoutDurationInHours") or 168)
        job: dict[str, Any] = {
            **{k: copy.deepcopy(v) for k, v in body.items() if k != "clientRequestToken"},
            "jobArn": f"arn:aws:bedrock:{self.config.region}:{ACCOUNT}:model-invocation-job/{job_id}",
            "clientRequestToken": token,
            "status": self.config.progress[0],
            "submitTime": iso(now),
            "lastModifiedTime": iso(now),
            "timeoutDurationInHours": hours,
            "jobExpirationTime": iso(now + hours * 3600),
            "_id": job_id,
            "_params": params,
            "_polls": 0,
            "_submitted": now,
        }
        job.pop("tags", None)  # tags are not part of a job's description
        self.jobs[job["jobArn"]] = job
        return job

    def _get(self, identifier: str) -> Reply:
        self.counters["status_calls"] += 1
        if self.config.status_errors:
            code = self.config.status_errors.pop(0)
            return aws_error(code, f"status refused (HTTP {code})")
        match = JOB_ID.fullmatch(identifier)
        if match is None:
            return aws_error(400, f"1 validation error detected: Value '{identifier}' at 'jobIdentifier'")
        job = next((j for j in self.jobs.values() if j["_id"] == match.group("id")), None)
        if job is None or (identifier.startswith("arn:") and identifier != job["jobArn"]):
            return aws_error(404, f"The specified resource ARN was not found: {identifier}")
        job["_polls"] += 1
        if job["status"] not in END_STATES:
            if job["_polls"] >= self.config.polls_to_finish:
                self._end(job)
            else:
                progress = self.config.progress
                job.update(status=progress[min(job["_polls"], len(progress) - 1)], lastModifiedTime=iso(time.time()))
        return Reply(200, _public(job))

    def _end(self, job: dict[str, Any]) -> None:
        end, total = self.config.end_as, self.config.records
        processed = {"Completed": total, "PartiallyCompleted": total - max(1, total // 10), "Stopped": total // 2}
        done = max(0, processed.get(end, 0))
        errors = min(2, done) if end != "Completed" else 0
        now = iso(time.time())
        job.update(status=end, endTime=now, lastModifiedTime=now, totalRecordCount=total)
        job.update(processedRecordCount=done, successRecordCount=done - errors, errorRecordCount=errors)
        messages = {
            "Failed": "The job failed: the input file is not valid JSONL.",
            "Expired": "The job timed out before it began.",
            "Stopped": "The job was stopped by a user.",
            "PartiallyCompleted": "Not all records could be processed in time.",
        }
        if end in messages:
            job["message"] = messages[end]
        if end in MANIFESTED:
            share = done / total if total else 0.0
            manifest = {
                "totalRecordCount": total,
                "processedRecordCount": done,
                "successRecordCount": done - errors,
                "errorRecordCount": errors,
                "inputTokenCount": int(self.config.input_tokens * share),
                "outputTokenCount": int(self.config.output_tokens * share),
            }
            text = self.config.manifest_text if self.config.manifest_text is not None else json.dumps(manifest)
            output = job["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"].removeprefix("s3://").rstrip("/")
            self.objects[f"{output}/{job['_id']}/manifest.json.out"] = text.encode()

    def _list(self, query: dict[str, list[str]]) -> Reply:
        self.counters["lookup_calls"] += 1
        if self.config.lookup_errors:
            code = self.config.lookup_errors.pop(0)
            return aws_error(code, f"listing refused (HTTP {code})")
        problem = listing_problem(query)
        try:
            after, before = when(query.get("submitTimeAfter")), when(query.get("submitTimeBefore"))
            start = int(query.get("nextToken", ["0"])[-1])
        except ValueError as exc:
            problem = problem or f"bad listing parameter: {exc}"
        if problem:
            return aws_error(400, problem)
        name = query.get("nameContains", [None])[-1]
        status = query.get("statusEquals", [None])[-1]
        chosen = [
            j
            for j in self.jobs.values()
            if (after is None or j["_submitted"] > after)
            and (before is None or j["_submitted"] < before)
            and (status is None or j["status"] == status)
            and (name is None or name in j["jobName"] or self.config.listing == "unfiltered")
        ]
        if query.get("sortOrder", ["Descending"])[-1] != "Ascending":
            chosen.reverse()
        size = int(query.get("maxResults", ["1000"])[-1])
        summaries = [self._summary(j) for j in chosen[start : start + size]]
        answer: dict[str, Any] = {"invocationJobSummaries": summaries}
        mode = self.config.listing
        if mode == "endless" or start + size < len(chosen):
            answer["nextToken"] = str(start + size)
        if mode == "repeat_token":
            answer["nextToken"] = str(start)
        return Reply(200, answer)

    def _summary(self, job: dict[str, Any]) -> dict[str, Any]:
        summary = _public(job)
        if self.config.listing == "other_token":
            summary["clientRequestToken"] = "another" + uuid.uuid4().hex
        elif self.config.listing == "no_token":
            summary.pop("clientRequestToken", None)
        return summary

    def _object(self, key: str) -> Reply:
        self.counters["object_reads"] += 1
        if self.config.object_errors:
            code = self.config.object_errors.pop(0)
            return s3_error(code, "InternalError" if code >= 500 else "AccessDenied", f"HTTP {code}", key)
        body = self.objects.get(key)
        if body is None:
            return s3_error(404, "NoSuchKey", "The specified key does not exist.", key)
        return Reply(200, raw=body, media_type="binary/octet-stream", headers={"ETag": f'"{uuid.uuid4().hex}"'})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m airflow_idempotent_jobs.testing.bedrock_control_api", description=__doc__
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--polls-to-finish", type=int, default=2)
    args = parser.parse_args(argv)
    server = BedrockControlApi(host=args.host, port=args.port, polls_to_finish=args.polls_to_finish)
    return serve_until_terminated(server)


if __name__ == "__main__":
    sys.exit(main())
