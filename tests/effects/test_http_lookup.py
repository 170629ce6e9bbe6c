"""`HttpEffectLookup` as the ledger's lookup (capability ``lookup``), against a real HTTP target.

On both stores.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.effects import EffectLedger, EffectState, EffectStateUnknown
from airflow_idempotent_jobs.effects.http_lookup import HttpEffectLookup, HttpEffectLookupConfig
from airflow_idempotent_jobs.errors import InvalidConfiguration, ProviderOutcomeUnknown
from tests.effect_target import ECHO, TOKEN, EffectTarget, json_answer


@pytest.fixture
def target() -> Iterator[EffectTarget]:
    with EffectTarget() as running:
        yield running


def _lookup(target: EffectTarget, **options: object) -> HttpEffectLookup:
    config = HttpEffectLookupConfig(target.url + "/posts/{token}", **options)  # type: ignore[arg-type]
    return HttpEffectLookup(config, auth_header="Authorization", auth_value=f"Bearer {TOKEN}")


def _unknown(store: EpisodeStore) -> tuple[str, str]:
    eid = store.allocate("2026-W32", "k").episode_id

    def lost(token: str) -> None:
        raise RuntimeError("lost")

    with pytest.raises(EffectStateUnknown):
        EffectLedger(store).run(eid, "publish", lost)
    return eid, store.get(eid).effects["publish"].token


class Counted:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, token: str) -> str:
        self.calls += 1
        return "posted"


def test_a_retry_adopts_what_the_lookup_found(store: EpisodeStore, target: EffectTarget) -> None:
    eid, token = _unknown(store)
    target.answer(token, json_answer(200, {"id": "post-4", "echo": ECHO}))
    body = Counted()
    run = EffectLedger(store).run(eid, "publish", body, capability="lookup", lookup=_lookup(target))
    assert (run.ran, body.calls, run.effect.state) == (False, 0, EffectState.DONE)
    assert run.result == {"id": "post-4", "echo": "<redacted>"}  # the credential never reaches the record


def test_a_retry_runs_once_when_the_lookup_proves_nothing_happened(store: EpisodeStore, target: EffectTarget) -> None:
    eid, _ = _unknown(store)
    body = Counted()
    lookup = _lookup(target, no_effect_status=404)
    run = EffectLedger(store).run(eid, "publish", body, capability="lookup", lookup=lookup)
    assert (run.ran, body.calls, run.result) == (True, 1, "posted")


def test_a_lookup_that_proves_nothing_runs_nothing(store: EpisodeStore, target: EffectTarget) -> None:
    eid, _ = _unknown(store)
    record = store.get(eid).to_record()
    body = Counted()
    with pytest.raises(ProviderOutcomeUnknown, match="HTTP 404"):  # 404 was not declared "nothing"
        EffectLedger(store).run(eid, "publish", body, capability="lookup", lookup=_lookup(target))
    assert body.calls == 0
    assert store.get(eid).to_record() == record


def test_the_credential_is_in_no_text(target: EffectTarget) -> None:
    lookup = _lookup(target)
    assert TOKEN not in repr(lookup)
    assert lookup.redact(f"echo Bearer {TOKEN} and {TOKEN}") == "echo <redacted> and <redacted>"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"url": "ftp://example.invalid/{token}"}, "url"),
        ({"url": "http://example.invalid/posts"}, "url"),
        ({"url": "http://{token}.example.invalid/"}, "url"),
        ({"url": "http://u:p@example.invalid/{token}"}, "url"),
        ({"url": "http://example.invalid/{token}", "ref_path": "a..b"}, "ref_path"),
        ({"url": "http://example.invalid/{token}", "no_effect_status": 200}, "no_effect_status"),
        ({"url": "http://example.invalid/{token}", "no_effect_status": 429}, "no_effect_status"),
        ({"url": "http://example.invalid/{token}", "no_effect_status": 401}, "no_effect_status"),
        ({"url": "http://example.invalid/{token}", "no_effect_status": True}, "no_effect_status"),
    ],
)
def test_bad_configs_name_their_field(options: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidConfiguration) as raised:
        HttpEffectLookupConfig(**options)  # type: ignore[arg-type]
    assert (raised.value.what, raised.value.field) == ("effect lookup", field)


def test_a_url_splits_into_the_paid_lookups_parts() -> None:
    config = HttpEffectLookupConfig("HTTPS://api.example.invalid:8443?token={token}&kind=post", ref_path="id")
    paid = config.provider_config()
    assert (paid.base_url, paid.lookup_path, paid.lookup_ref_path) == (
        "https://api.example.invalid:8443",
        "/?token={token}&kind=post",
        "id",
    )
