from __future__ import annotations

import multiprocessing
import multiprocessing.context
import multiprocessing.process
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.testing.openai_api import OpenAIApi
from tests.vendors.openai.support import API_KEY


@pytest.fixture
def api() -> Iterator[OpenAIApi]:
    with OpenAIApi(api_key=API_KEY, polls_to_finish=1) as server:
        yield server


@pytest.fixture(scope="session")
def forkserver() -> multiprocessing.context.ForkServerContext:
    """Paid steps as real processes, forked by a server that imported the adapter and the SDK once."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.vendors.openai._child"])
    return context


def start_step(
    forkserver: multiprocessing.context.ForkServerContext, spec: dict[str, Any], out: Path
) -> multiprocessing.process.BaseProcess:
    from tests.vendors.openai import _child

    process = forkserver.Process(target=_child.run, args=(spec, str(out)))
    process.start()
    return process
