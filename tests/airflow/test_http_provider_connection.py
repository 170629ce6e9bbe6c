"""The HTTP provider hook reads real Connections (``AIRFLOW_CONN_*``), URI and JSON forms alike.

In a URI every extra is a string: the hook must read ``?tokens_honoured=false`` as false, mappings
from JSON text, and the host/port/path of the URI as the base URL; a value that means nothing is an
`InvalidConfiguration` naming the field. It also registers every form of the token with Airflow's
secrets masker.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.hooks.http_provider import HttpPaidProviderHook
from airflow_idempotent_jobs.paid import RemoteState
from airflow_idempotent_jobs.testing.server import ProviderServer, server_connection, server_connection_uri
from tests.paid.leaks import TOKEN, token_forms

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(120)]


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(auth_token=TOKEN, polls_to_finish=2, honour_tokens=False) as srv:
        yield srv


def uri_conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, server: ProviderServer, **extra: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", server_connection_uri(server.url, TOKEN, **extra))


def test_a_uri_connection_reads_booleans_numbers_and_mappings(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer
) -> None:
    uri_conn(monkeypatch, "ij_uri", server, tokens_honoured=False)
    assert "tokens_honoured=false" in server_connection_uri(server.url, TOKEN, tokens_honoured=False)
    provider = HttpPaidProviderHook("ij_uri").get_provider()
    assert provider.capabilities.idempotent_tokens is False  # the text "false" is false, not a non-empty string
    assert provider.config == server.provider_config(tokens_honoured=False)
    # The mappings came as JSON text: state_map maps "rendering", and the base URL kept its port.
    ref = provider.submit({"prompt": "p"}, "tok")
    assert provider.status(ref).state is RemoteState.RUNNING
    assert HttpPaidProviderHook("ij_uri").test_connection()[0]


def test_the_uri_host_port_and_path_make_the_base_url(monkeypatch: pytest.MonkeyPatch, server: ProviderServer) -> None:
    port = server.port
    extra = "?ref_path=job.id&state_path=job.status&tokens_honoured=0"
    monkeypatch.setenv(
        "AIRFLOW_CONN_IJ_PORT", f"idempotent-jobs-http://:x@{quote('http://127.0.0.1', safe='')}:{port}{extra}"
    )
    monkeypatch.setenv("AIRFLOW_CONN_IJ_PATH", f"idempotent-jobs-http://:x@api.example.invalid:8443/v1{extra}")
    monkeypatch.setenv("AIRFLOW_CONN_IJ_CLASH", f"idempotent-jobs-http://:x@{quote('http://h:81', safe='')}:82{extra}")
    assert HttpPaidProviderHook("ij_port").get_provider().config.base_url == f"http://127.0.0.1:{port}"
    assert HttpPaidProviderHook("ij_path").get_provider().config.base_url == "https://api.example.invalid:8443/v1"
    with pytest.raises(InvalidConfiguration) as caught:
        HttpPaidProviderHook("ij_clash").get_provider()
    assert caught.value.field == "port"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tokens_honoured", "maybe"),
        ("idempotency_header", ""),
        ("read_timeout", "nan"),
        ("connect_timeout", "-1"),
        ("connect_retries", "1000"),
        ("state_map", "rendering=running"),
        ("headers", '{"Authorization": "Bearer other"}'),
        ("headers", '{"X-Team": 7}'),
        ("lookup_path", "/j/{token}/{oops}"),
        ("status_path", "{0}"),
        ("base_url", "https://api.example.invalid/?key=1"),
        ("auth_header", "Auth Header"),
        ("auth_scheme", "Bearer x"),
    ],
)
def test_a_bad_value_names_its_field(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer, field: str, value: str
) -> None:
    uri_conn(monkeypatch, "ij_bad", server, **{field: value})
    with pytest.raises(InvalidConfiguration) as caught:
        HttpPaidProviderHook("ij_bad").get_provider()
    assert caught.value.field == field and not caught.value.retryable
    ok, message = HttpPaidProviderHook("ij_bad").test_connection()
    assert not ok and field in message
    assert server.stats()["submissions"] == 0 and server.stats()["status_calls"] == 0


def test_json_extras_that_used_to_raise_attribute_errors(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer
) -> None:
    """``state_map``/``headers`` given as strings in a JSON extra raised AttributeError (and retried)."""
    conn = server_connection(server.url, TOKEN, state_map='{"rendering": "running"}', headers='{"X-Team": "m"}')
    monkeypatch.setenv("AIRFLOW_CONN_IJ_JSON", json.dumps(conn))
    config = HttpPaidProviderHook("ij_json").get_provider().config
    assert config.state_map == {"rendering": "running"} and config.headers == {"X-Team": "m"}
    conn = server_connection(server.url, "ab\ncd-token")
    monkeypatch.setenv("AIRFLOW_CONN_IJ_NEWLINE", json.dumps(conn))
    with pytest.raises(InvalidConfiguration) as caught:
        HttpPaidProviderHook("ij_newline").get_provider()
    assert caught.value.field == "password" and "cd-token" not in str(caught.value)


def test_every_form_of_the_token_is_registered_with_airflows_masker(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer
) -> None:
    from airflow.sdk import BaseHook
    from airflow.sdk._shared.secrets_masker import redact

    def unmasked(token: str) -> list[str]:
        return [name for name, form in token_forms(token).items() if form in str(redact(f"x {form} y"))]

    token = f'mask/{uuid.uuid4().hex}+"q"&z'  # new to this process's masker
    monkeypatch.setenv("AIRFLOW_CONN_IJ_MASK", server_connection_uri(server.url, token))
    BaseHook.get_connection("ij_mask")  # Airflow itself masks the password as given, and only that
    assert "bare" not in unmasked(token) and {"url", "json", "b64"} <= set(unmasked(token))
    HttpPaidProviderHook("ij_mask").get_provider()
    assert unmasked(token) == []
    # The trigger's path (async) registers too.
    other = f"async/{uuid.uuid4().hex}+token"
    monkeypatch.setenv("AIRFLOW_CONN_IJ_ASYNC", server_connection_uri(server.url, other))
    asyncio.run(HttpPaidProviderHook("ij_async").aget_provider())
    assert unmasked(other) == []


@pytest.mark.parametrize(
    ("page", "host", "password"),
    [
        ("how-to/install.md", "https://api.example.com", "<API token>"),
        ("reference/connections.md", "https://api.example.com", "<API token>"),
        ("tutorial/first-dag.md", "http://127.0.0.1:8765", "demo-token"),
    ],
)
def test_the_docs_connection_examples_work_against_the_provider_server(
    monkeypatch: pytest.MonkeyPatch, server: ProviderServer, page: str, host: str, password: str
) -> None:
    """Each complete ``AIRFLOW_CONN_MEDIA_PROVIDER`` the documentation shows, with the host pointed at
    the local server: the hook reads it, a job goes through it, and its lookup finds the job by token
    and proves "no job" for a token never sent."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / page).read_text(encoding="utf-8")
    found = re.search(r"AIRFLOW_CONN_MEDIA_PROVIDER='(.*?)'\n", text, re.S)
    assert found is not None, f"docs/{page} lost its connection example"
    conn = json.loads(found.group(1))
    assert (conn["conn_type"], conn["host"], conn["password"]) == ("idempotent_jobs_http", host, password)
    monkeypatch.setenv("AIRFLOW_CONN_MEDIA_PROVIDER", json.dumps({**conn, "host": server.url, "password": TOKEN}))
    provider = HttpPaidProviderHook("media_provider").get_provider()
    expected = server.provider_config(tokens_honoured=True)
    for name in ("submit_path", "status_path", "idempotency_header", "tokens_honoured", "lookup_path", "ref_path"):
        assert getattr(provider.config, name) == getattr(expected, name), name
    ref = provider.submit({"prompt": "p"}, "tok-docs")
    assert provider.status(ref).state is RemoteState.RUNNING
    assert provider.find("tok-docs") == ref
    assert provider.find("tok-never-sent") is None
