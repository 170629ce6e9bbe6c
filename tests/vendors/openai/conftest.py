from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_idempotent_jobs.testing.openai_api import OpenAIApi
from tests.vendors.openai.support import API_KEY


@pytest.fixture
def api() -> Iterator[OpenAIApi]:
    with OpenAIApi(api_key=API_KEY, polls_to_finish=1) as server:
        yield server
