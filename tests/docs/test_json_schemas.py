"""The JSON Schemas the reference publishes (docs/reference/schemas/) hold for what the code prints.

``show`` of every episode and ``report --json`` of the week, through the real command on both
stores, for episodes in every state the operations scenarios make (submissions, approvals, effects,
a result left out, a cost anomaly); the schemas are strict (no unlisted key), so a field added to
the code and not to the schema fails here.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import Backend
from tests.clirun import run_cli
from tests.effects_scenario import build_effects
from tests.operations_scenario import LAST_WEEK, WEEK, build

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "reference" / "schemas"


def _schema(name: str) -> dict[str, Any]:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema  # type: ignore[no-any-return]


def _valid(instance: Any, name: str) -> None:
    jsonschema.Draft202012Validator(_schema(name)).validate(instance)


@pytest.fixture
def populated(store: EpisodeStore) -> EpisodeStore:
    now = dt.datetime.now(dt.timezone.utc)
    with ProviderServer(polls_to_finish=1) as server:
        build(store, server, now)
    build_effects(store, now)
    return store


def test_show_and_list_of_every_episode_match_the_episode_schema(backend: Backend, populated: EpisodeStore) -> None:
    ids = [e.episode_id for week in (LAST_WEEK, WEEK) for e in populated.list(week)]
    assert len(ids) > 10
    seen: set[str] = set()
    for eid in ids:
        done = run_cli("--store", backend.url, "show", eid)
        assert done.code == 0, done.stderr
        shown = json.loads(done.stdout)
        _valid(shown, "episode")
        seen |= {shown["submission"]["state"], *(e["state"] for e in shown["effects"].values())}
        seen |= {k for k in ("cost_anomaly", "result_omitted", "request_fingerprint") if k in shown["submission"]}
    assert {"none", "submitting", "accepted", "succeeded", "failed", "unknown", "pending", "done"} <= seen
    listed = run_cli("--store", backend.url, "list", "--json")
    assert listed.code == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert len(rows) == len(ids)
    for row in rows:
        _valid(row, "episode")


def test_report_json_matches_the_week_schema(backend: Backend, populated: EpisodeStore) -> None:
    done = run_cli("--store", backend.url, "report", "--from", LAST_WEEK, "--to", WEEK, "--json")
    assert done.code == 0, done.stderr
    weeks = [json.loads(line) for line in done.stdout.splitlines()]
    assert [w["week_id"] for w in weeks] == [LAST_WEEK, WEEK]
    for week in weeks:
        _valid(week, "week")
    assert weeks[1]["attention"] and weeks[1]["episodes"]


def test_a_field_the_schema_does_not_list_is_refused(backend: Backend, populated: EpisodeStore) -> None:
    shown = json.loads(run_cli("--store", backend.url, "show", f"{WEEK}-0").stdout)
    shown["submission"]["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError, match="surprise"):
        _valid(shown, "episode")
