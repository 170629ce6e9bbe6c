"""A local API shaped like Amazon Bedrock Runtime's asynchronous invocation, for the real ``boto3``
``bedrock-runtime`` client pointed at it (``endpoint_url=url``).

Runnable (``python -m airflow_idempotent_jobs.testing.bedrock_api --port 0`` prints its URL) and
importable (`BedrockRuntimeApi`, a context manager running in a thread). REST-JSON as botocore's
model of ``bedrock-runtime`` 2023-09-30 describes it; a SigV4 ``Authorization`` header is required
and accepted unchecked (an unsigned call is 403 ``AccessDeniedException``). Errors are the
``x-amzn-ErrorType`` header with ``{"message"}``, the way botocore reads them::

    POST /async-invoke                    StartAsyncInvoke: {"clientRequestToken", "modelId", "modelInput",
                                          "outputDataConfig": {"s3OutputDataConfig": {"s3Uri"}}, "tags"}
                                          -> {"invocationArn"}. PAID (``accepted``, per token), except
                                          that a token seen before answers its invocation again (no new
                                          job) and, with other parameters, 400 ConflictException
    GET  /async-invoke/{invocationArn}    GetAsyncInvoke; each read moves it on: InProgress, then
                                          ``end_as`` (Completed or Failed) after ``polls_to_finish`` reads
    GET  /async-invoke?submitTimeAfter=&submitTimeBefore=&statusEquals=&maxResults=&nextToken=&sortOrder=
                                          ListAsyncInvokes: {"asyncInvokeSummaries", "nextToken"},
                                          newest first unless sortOrder=Ascending

How a token is honoured follows AWS's documentation of ``clientRequestToken`` ("if this token matches
a previous request, Amazon Bedrock ignores the request, but does not return an error"); that other
parameters with a used token are a ConflictException (400) is this double's reading of the
operation's declared errors: AWS documents no other answer for it.

Switches (``POST /_admin/config``, fields of `BedrockConfig`): ``fault`` on the paid call
(``drop_after_accept``, ``hang_after_accept`` for ``slow_seconds``, ``500_after_accept``
InternalServerException, ``503_after_accept`` ServiceUnavailableException; before creating:
``429`` ThrottlingException, ``500``, ``400`` ValidationException); ``honour_tokens`` (off: every
call makes a job, as an API without idempotency would); ``end_as``. ``GET /_admin/stats``: counters
and invocations.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import unquote

from ._api_switches import ApiSwitches
from ._aws_rest import Reply, aws_app, aws_error, iso, parameters_digest, when
from ._background import BackgroundServer, UvicornServer, serve_until_terminated
from ._double import CountedDouble

__all__ = ["CREATE_FAULTS", "BedrockConfig", "BedrockRuntimeApi", "main"]

CREATE_FAULTS: Final = frozenset(
    {"drop_after_accept", "hang_after_accept", "500_after_accept", "503_after_accept", "429", "500", "400"}
)
ACCOUNT: Final = "123456789012"
_ENDED: Final = frozenset({"Completed", "Failed"})


@dataclass
class BedrockConfig(ApiSwitches):
    """The double's switches (those of every local API, and these); see the module docstring."""

    faults: ClassVar[frozenset[str]] = CREATE_FAULTS

    #: Answer a repeated ``clientRequestToken`` with its invocation (AWS's documented behaviour).
    honour_tokens: bool = True
    #: How an invocation ends: ``Completed`` or ``Failed``.
    end_as: str = "Completed"
    region: str = "us-east-1"

    def check(self, changes: dict[str, Any]) -> None:
        super().check(changes)
        if changes.get("end_as", "Completed") not in _ENDED:
            raise ValueError(f"unknown end_as {changes['end_as']!r} (one of {sorted(_ENDED)})")


class BedrockRuntimeApi(CountedDouble[BedrockConfig], BackgroundServer):
    """The double on a thread of this process: ``with BedrockRuntimeApi() as api: api.url``."""

    per_token = "accepted_per_token"

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, **config: Any) -> None:
        self.config = BedrockConfig()
        self.config.update(config)
        self.lock = threading.Lock()
        #: Invocations by ARN, in submission order.
        self.invocations: dict[str, dict[str, Any]] = {}
        self.counters: dict[str, Any] = dict.fromkeys(
            ("unsigned", "submissions", "accepted", "replayed", "conflicts", "status_calls", "lookup_calls"), 0
        )
        self.counters["accepted_per_token"] = {}
        #: Calls per access key id (``Credential=<id>/`` of each SigV4 header): which keys signed.
        self.counters["signed_by"] = {}
        stopping = threading.Event()
        super().__init__(UvicornServer((host, port), aws_app(self, stopping), stopping), host)

    @property
    def slow_seconds(self) -> float:
        return self.config.slow_seconds

    def unsigned(self, path: str) -> Reply:
        return aws_error(403, "Missing Authentication Token", "AccessDeniedException")

    # -- for tests (configure, stats, accepted per clientRequestToken: CountedDouble) -------------
    def snapshot(self) -> dict[str, Any]:
        """What ``GET /_admin/stats`` shows (``lock`` held)."""
        return {
            **copy.deepcopy(self.counters),
            "invocations": {arn: _public(i) for arn, i in self.invocations.items()},
            "config": dataclasses.asdict(self.config),
        }

    # -- the API (``lock`` held) -----------------------------------------------------------------
    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Reply:
        if (method, path) == ("POST", "/async-invoke"):
            return self._start(body)
        if (method, path) == ("GET", "/async-invoke"):
            return self._list(query)
        if method == "GET" and path.startswith("/async-invoke/"):
            return self._get(unquote(path[len("/async-invoke/") :]))
        if (method, path) == ("GET", "/_admin/stats"):
            return Reply(200, self.snapshot())
        if (method, path) == ("POST", "/_admin/config"):
            try:
                self.config.update(body if isinstance(body, dict) else {})
            except ValueError as exc:
                return aws_error(400, str(exc))
            return Reply(200, dataclasses.asdict(self.config))
        return aws_error(404, f"no route {method} {path}", "UnknownOperationException")

    def _start(self, body: Any) -> Reply:
        self.counters["submissions"] += 1
        fault = self.config.take_fault()
        if fault in ("429", "500", "400"):
            return aws_error(int(fault), f"refused before anything was made (HTTP {fault})")
        problem = _start_problem(body)
        if problem:
            return aws_error(400, problem)
        token = body.get("clientRequestToken")
        params = parameters_digest(body)
        if token is not None and self.config.honour_tokens:
            for seen in self.invocations.values():
                if seen["clientRequestToken"] == token:
                    if seen["_params"] != params:
                        self.counters["conflicts"] += 1
                        return aws_error(
                            400, "the client request token was used with other parameters", "ConflictException"
                        )
                    self.counters["replayed"] += 1
                    return Reply(200, {"invocationArn": seen["invocationArn"]}, fault=fault)
        invocation = self._new(body, token, params)
        self.counters["accepted"] += 1
        per_token = self.counters["accepted_per_token"]
        per_token[str(token)] = per_token.get(str(token), 0) + 1
        return Reply(200, {"invocationArn": invocation["invocationArn"]}, fault=fault)

    def _new(self, body: dict[str, Any], token: str | None, params: str) -> dict[str, Any]:
        job = uuid.uuid4().hex[:12]
        arn = f"arn:aws:bedrock:{self.config.region}:{ACCOUNT}:async-invoke/{job}"
        now = iso(time.time())
        output = copy.deepcopy(body["outputDataConfig"])
        invocation: dict[str, Any] = {
            "invocationArn": arn,
            "modelArn": f"arn:aws:bedrock:{self.config.region}::foundation-model/{body['modelId']}",
            "clientRequestToken": token,
            "status": "InProgress",
            "submitTime": now,
            "lastModifiedTime": now,
            "outputDataConfig": output,
            "_params": params,
            "_polls": 0,
            "_submitted": time.time(),
        }
        self.invocations[arn] = invocation
        return invocation

    def _get(self, arn: str) -> Reply:
        self.counters["status_calls"] += 1
        if self.config.status_errors:
            code = self.config.status_errors.pop(0)
            return aws_error(code, f"status refused (HTTP {code})")
        invocation = self.invocations.get(arn)
        if invocation is None:
            return aws_error(400, f"no async invocation {arn}", "ValidationException")
        invocation["_polls"] += 1
        if invocation["status"] not in _ENDED and invocation["_polls"] >= self.config.polls_to_finish:
            now = iso(time.time())
            invocation.update(status=self.config.end_as, lastModifiedTime=now, endTime=now)
            if self.config.end_as == "Failed":
                invocation["failureMessage"] = "the model could not render this input"
        return Reply(200, _public(invocation))

    def _list(self, query: dict[str, list[str]]) -> Reply:
        self.counters["lookup_calls"] += 1
        if self.config.lookup_errors:
            code = self.config.lookup_errors.pop(0)
            return aws_error(code, f"listing refused (HTTP {code})")
        try:
            after = when(query.get("submitTimeAfter"))
            before = when(query.get("submitTimeBefore"))
            size = int(query.get("maxResults", ["1000"])[-1])
            start = int(query.get("nextToken", ["0"])[-1])
        except ValueError as exc:
            return aws_error(400, f"bad listing parameter: {exc}")
        if not 1 <= size <= 1000 or start < 0:
            return aws_error(400, "maxResults must be 1..1000")
        status = query.get("statusEquals", [None])[-1]
        chosen = [
            i
            for i in self.invocations.values()
            if (after is None or i["_submitted"] > after)
            and (before is None or i["_submitted"] < before)
            and (status is None or i["status"] == status)
        ]
        if query.get("sortOrder", ["Descending"])[-1] != "Ascending":
            chosen.reverse()
        page = chosen[start : start + size]
        answer: dict[str, Any] = {"asyncInvokeSummaries": [_public(i) for i in page]}
        if start + size < len(chosen):
            answer["nextToken"] = str(start + size)
        return Reply(200, answer)


def _start_problem(body: Any) -> str | None:
    """Why a StartAsyncInvoke body is not valid (ValidationException), or None."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    for name in ("modelId", "modelInput", "outputDataConfig"):
        if name not in body:
            return f"1 validation error detected: Value null at '{name}' failed to satisfy constraint: must not be null"
    token = body.get("clientRequestToken")
    if token is not None and (not isinstance(token, str) or not 1 <= len(token) <= 256 or not token.isascii()):
        return "clientRequestToken must be 1..256 printable ASCII characters"
    s3 = (
        (body["outputDataConfig"] or {}).get("s3OutputDataConfig")
        if isinstance(body["outputDataConfig"], dict)
        else None
    )
    if not isinstance(s3, dict) or not str(s3.get("s3Uri", "")).startswith("s3://"):
        return "outputDataConfig.s3OutputDataConfig.s3Uri must be an s3:// URI"
    return None


def _public(invocation: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in invocation.items() if not k.startswith("_") and v is not None}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_idempotent_jobs.testing.bedrock_api", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--polls-to-finish", type=int, default=2)
    args = parser.parse_args(argv)
    server = BedrockRuntimeApi(host=args.host, port=args.port, polls_to_finish=args.polls_to_finish)
    return serve_until_terminated(server)


if __name__ == "__main__":
    sys.exit(main())
