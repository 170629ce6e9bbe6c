"""`HttpProviderConfig`: every field typed and checked, from JSON and from a connection URI's strings.

In a connection URI every extra is a string: ``?tokens_honoured=false`` must read as false, never
as a true-ish text (a provider that ignores tokens would be sent a second job), and a value that
means nothing must fail naming its field, not be guessed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.paid.http import HttpPaidProvider, HttpProviderConfig
from airflow_idempotent_jobs.testing.server import ProviderServer, server_connection

BASE = {"base_url": "https://api.example.invalid/v1"}
L = {"lookup_path": "/j?t={token}"}


def parsed(**fields: Any) -> HttpProviderConfig:
    return HttpProviderConfig.from_dict({**BASE, **fields})


def refused(field: str, **fields: Any) -> str:
    with pytest.raises(InvalidConfiguration) as caught:
        parsed(**fields)
    assert caught.value.field == field, (caught.value.field, str(caught.value))
    assert not caught.value.retryable and caught.value.exit_code == 2
    assert "\n" not in str(caught.value)
    return str(caught.value)


@pytest.mark.parametrize(
    ("text", "value"), [("false", False), ("False", False), ("0", False), ("true", True), ("1", True), (0, False)]
)
def test_booleans_from_uri_text(text: Any, value: bool) -> None:
    config = parsed(tokens_honoured=text)
    assert config.tokens_honoured is value
    assert config.capabilities.idempotent_tokens is value


@pytest.mark.parametrize("text", ["maybe", "yes", "no", "", "2", 2, "none", 1.0])
def test_anything_else_is_not_a_boolean(text: Any) -> None:
    assert "true or false" in refused("tokens_honoured", tokens_honoured=text)


def test_numbers_and_mappings_from_uri_text() -> None:
    config = parsed(
        connect_timeout="2.5",
        read_timeout="60",
        connect_retries="4",
        backoff_initial="0.1",
        backoff_max="1e1",
        lookup_path="/jobs?token={token}",
        lookup_no_job_status="404",
        lookup_no_job_path="error.code",
        state_map='{"rendering": "running"}',
        headers='{"X-Team": "media"}',
    )
    assert (config.connect_timeout, config.read_timeout, config.connect_retries) == (2.5, 60.0, 4)
    assert (config.backoff_initial, config.backoff_max, config.lookup_no_job_status) == (0.1, 10.0, 404)
    assert config.state_map == {"rendering": "running"} and config.headers == {"X-Team": "media"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("read_timeout", "nan"),
        ("read_timeout", "inf"),
        ("read_timeout", float("nan")),
        ("read_timeout", float("inf")),
        ("read_timeout", -1),
        ("read_timeout", 0),
        ("read_timeout", "1e9"),
        ("read_timeout", True),
        ("read_timeout", "30s"),
        ("connect_timeout", "-0.5"),
        ("connect_timeout", 10_000),
        ("connect_retries", -1),
        ("connect_retries", 1000),
        ("connect_retries", 2.5),
        ("connect_retries", "3x"),
        ("connect_retries", "1e3"),
        ("backoff_initial", "NaN"),
        ("backoff_max", -2),
        ("backoff_max", 10**30),
    ],
)
def test_numbers_are_finite_and_in_range(field: str, value: Any) -> None:
    refused(field, **{field: value})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("state_map", "not json"),
        ("state_map", "[1]"),
        ("state_map", '{"done!": "finished"}'),
        ("state_map", {"x": 1}),
        ("state_map", "[" * 5000 + "]" * 5000),
        ("headers", "X-Team: media"),
        ("headers", {"X-Team": 7}),
        ("headers", {"bad name": "x"}),
        ("headers", {"X-Injected": "a\r\nAuthorization: Bearer stolen"}),
        ("headers", {"Authorization": "Bearer other"}),
        ("headers", {"idempotency-key": "fixed"}),
        ("headers", {"Host": "elsewhere.example"}),
        ("headers", {"X-Team": "caf\u00e9"}),
    ],
)
def test_mappings_are_json_objects_of_texts_that_never_replace_our_headers(field: str, value: Any) -> None:
    message = refused(field, **{field: value})
    assert "stolen" not in message and "fixed" not in message  # header values are never echoed


def test_the_idempotency_header_must_be_sent_to_count() -> None:
    """``""`` is refused: it would send no header yet claim capability (a), and a retry would resubmit blind."""
    refused("idempotency_header", idempotency_header="")
    refused("idempotency_header", idempotency_header="Idempotency Key")
    refused("idempotency_header", idempotency_header=7)
    assert not parsed(idempotency_header=None).capabilities.idempotent_tokens
    assert not parsed(idempotency_header="Idempotency-Key", tokens_honoured="false").capabilities.idempotent_tokens


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.invalid/v1?key=abc",
        "https://api.example.invalid/v1#frag",
        "https://api.example.invalid:99999/",
        "https://api.example.invalid:port/",
        "https://user:pw@api.example.invalid/",
        "https://api.example.invalid/v 1",
        "https://api.example.invalid/\n",
        "ftp://api.example.invalid/",
        "api.example.invalid",
    ],
)
def test_base_url_has_no_query_fragment_or_credentials(url: str) -> None:
    message = refused("base_url", base_url=url)
    assert "pw@" not in message


@pytest.mark.parametrize(
    ("field", "template"),
    [
        ("status_path", "/j/{remote_ref}/{oops}"),
        ("status_path", "{0}"),
        ("status_path", "/j/{}"),
        ("status_path", "/j/{remote_ref!r}"),
        ("status_path", "/j/{remote_ref:>40}"),
        ("status_path", "/j/{remote_ref.__class__}"),
        ("status_path", "/j/{remote_ref"),
        ("status_path", "/jobs"),
        ("status_path", "jobs/{remote_ref}"),
        ("status_path", "@evil.example/{remote_ref}"),
        ("lookup_path", "/j/{token}/{oops}"),
        ("lookup_path", "{0}"),
        ("lookup_path", "/find"),
        ("lookup_path", ".evil.example/{token}"),
        ("submit_path", "jobs"),
        ("submit_path", "@evil.example/jobs"),
        ("submit_path", "/jobs/{token}"),
        ("submit_path", "/jobs#x"),
    ],
)
def test_path_templates_hold_only_their_placeholder(field: str, template: str) -> None:
    refused(field, **({"lookup_path": "/jobs?token={token}"} if field != "lookup_path" else {}), **{field: template})


@pytest.mark.parametrize(
    ("field", "fields"),
    [
        ("lookup_no_job_status", {"lookup_no_job_status": 404, "lookup_no_job_path": "error.code"}),  # no lookup
        ("lookup_no_job_status", {**L, "lookup_no_job_path": "error.code"}),
        ("lookup_no_job_status", {**L, "lookup_no_job_value": "no_job"}),
        (
            "lookup_no_job_status",
            {**L, "lookup_no_job_status": 500, "lookup_no_job_path": "e"},
        ),
        (
            "lookup_no_job_status",
            {**L, "lookup_no_job_status": 409, "lookup_no_job_path": "e"},
        ),
        (
            "lookup_no_job_status",
            {**L, "lookup_no_job_status": 302, "lookup_no_job_path": "e"},
        ),
        (
            "lookup_no_job_status",
            {**L, "lookup_no_job_status": "abc", "lookup_no_job_path": "e"},
        ),
        (
            "lookup_no_job_path",
            {**L, "lookup_no_job_status": 404, "lookup_no_job_path": "a..b"},
        ),
        (
            "lookup_no_job_value",
            {
                "lookup_path": "/j?t={token}",
                "lookup_no_job_status": 404,
                "lookup_no_job_path": "e",
                "lookup_no_job_value": "",
            },
        ),
        ("ref_path", {"ref_path": ""}),
        ("ref_path", {"ref_path": "job..id"}),
        ("submit_method", {"submit_method": "GET"}),
        ("base_url", {"base_url": None}),
        ("cost_path", {"cost_path": 5}),
    ],
)
def test_every_other_field(field: str, fields: dict[str, Any]) -> None:
    refused(field, **fields)


def test_unknown_keys_and_a_missing_base_url() -> None:
    with pytest.raises(InvalidConfiguration, match="no_such_option"):
        parsed(no_such_option=1)
    with pytest.raises(InvalidConfiguration, match="base_url: is required"):
        HttpProviderConfig.from_dict({"status_path": "/jobs/{remote_ref}"})
    with pytest.raises(InvalidConfiguration):
        HttpProviderConfig.from_dict([("base_url", "http://h")])  # type: ignore[arg-type]


def test_the_server_connection_round_trips() -> None:
    """What `server_connection` writes (JSON extras) reads back as the same config."""
    with ProviderServer() as server:
        conn = server_connection(server.url, "t")
        config = HttpProviderConfig.from_dict({"base_url": conn["host"], **json.loads(json.dumps(conn["extra"]))})
        assert config == server.provider_config()
        assert HttpProviderConfig.from_dict(config.to_dict()) == config


def test_the_provider_refuses_extra_headers_that_replace_its_auth_header() -> None:
    config = parsed(headers={"X-Api-Key": "static"})
    with pytest.raises(InvalidConfiguration) as caught:
        HttpPaidProvider(config, auth_header="x-api-key", auth_value="secret-value-1")
    assert caught.value.field == "headers" and "static" not in str(caught.value)
    for bad in ("Bearer a\r\nX-Evil: 1", "Bearer caf\u00e9-token", "Bearer tab\there"):
        with pytest.raises(InvalidConfiguration) as caught:
            HttpPaidProvider(parsed(), auth_header="Authorization", auth_value=bad)
        assert caught.value.field == "auth_value" and bad not in str(caught.value)
    with pytest.raises(InvalidConfiguration):
        HttpPaidProvider(parsed(), auth_header="Auth Header", auth_value="Bearer x")
