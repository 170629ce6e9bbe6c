"""An effect's token looked up over HTTP: one GET of a URL template holding ``{token}``.

A lookup for `EffectLedger.reconcile` (``idempotent-jobs reconcile ID --effect NAME --lookup-url``)
and for `EffectLedger.run` with capability ``lookup``. It sends through the paid layer's HTTP client
(`paid.http.HttpPaidProvider.lookup_answer`: its timeouts, TLS, no redirects, retries of what was
never sent, the credential redacted from every text), so there is one client to trust, not two.

What an answer proves: a 2xx JSON answer says the effect happened (its body is the result, or with
``ref_path`` the reference found there; an empty body, ``null``, ``""``, ``[]`` or ``{}``, says
nothing); the declared ``no_effect_status`` (a 4xx) with a JSON body says it did not. Anything else
(another status, a body that is not JSON, a 2xx without the reference, a redirect, no answer) raises
a `ProviderError` and the effect stays as it was: "not done" is never inferred, since a wrong URL's
HTML 404 page would run the effect a second time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from ..errors import InvalidConfiguration, ProviderOutcomeUnknown
from ..paid.http import NEVER_NO_JOB, HttpPaidProvider, HttpProviderConfig
from .ledger import Happened

__all__ = ["HttpEffectLookup", "HttpEffectLookupConfig"]

WHAT: Final = "effect lookup"
#: Statuses that refuse the credential: an answer about us, never about the effect.
_CREDENTIAL_REFUSED: Final = frozenset({401, 403, 407})
#: 2xx bodies that say nothing (a search endpoint's "no match"): never read as "it happened".
_EMPTY: Final[tuple[object, ...]] = (None, "", [], {})


@dataclass(frozen=True)
class HttpEffectLookupConfig:
    """Where an effect's token is looked up and how the answer reads; every field checked at construction."""

    #: ``http(s)://host[:port]/path?query`` holding ``{token}`` (filled URL-quoted); no credentials, no fragment.
    url: str
    #: The status of the answer "nothing for this token" (a 4xx, e.g. 404); None: "not done" is never proven.
    no_effect_status: int | None = None
    #: Dotted JSON path of the reference to record (``{"ref": ...}``); None: the whole answer is the result.
    ref_path: str | None = None

    def __post_init__(self) -> None:
        self.provider_config()  # the URL and the path, by the paid lookup's own rules
        status = self.no_effect_status
        if status is None:
            return
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status < 500:
            raise InvalidConfiguration(WHAT, "no_effect_status", "must be a 4xx HTTP status (a 2xx says it happened)")
        if status in NEVER_NO_JOB | _CREDENTIAL_REFUSED:
            raise InvalidConfiguration(
                WHAT, "no_effect_status", f"{status} says the answer is unknown or refused, never that nothing happened"
            )

    def provider_config(self) -> HttpProviderConfig:
        """The URL as the paid layer's lookup config (base URL, lookup path); errors name our fields."""
        base, path = _split(self.url)
        try:
            return HttpProviderConfig(
                base_url=base, lookup_path=path, lookup_ref_path=self.ref_path, idempotency_header=None
            )
        except InvalidConfiguration as exc:
            field = "ref_path" if exc.field == "lookup_ref_path" else "url"
            raise InvalidConfiguration(WHAT, field, exc.reason) from None


class HttpEffectLookup:
    """Looks an effect's token up: `Happened` or None (certainly not done); anything else raises `ProviderError`.

    ``auth_header``/``auth_value``: the credential, e.g. ``Authorization`` / ``Bearer ...``; redacted
    from every text this produces, results included.
    """

    def __init__(
        self, config: HttpEffectLookupConfig, *, auth_header: str | None = None, auth_value: str | None = None
    ) -> None:
        self.config = config
        self._client = HttpPaidProvider(config.provider_config(), auth_header=auth_header, auth_value=auth_value)

    def __repr__(self) -> str:
        return f"HttpEffectLookup(url={self.config.url!r})"

    def redact(self, text: str) -> str:
        """``text`` with the credential replaced in every form (`paid.http.HttpPaidProvider.redact`)."""
        return self._client.redact(text)

    def __call__(self, token: str) -> Happened | None:
        answer = self._client.lookup_answer(token)
        cfg = self.config
        if 200 <= answer.status < 300 and answer.is_json:
            if cfg.ref_path is None:
                if answer.body not in _EMPTY:
                    return Happened(answer.body)
            elif (ref := answer.ref_at(cfg.ref_path)) is not None:
                return Happened({"ref": ref})
        elif answer.status == cfg.no_effect_status and answer.is_json:
            return None
        found = f"a reference at {cfg.ref_path!r}" if cfg.ref_path else "a JSON body that is not empty"
        declared = (
            f"the declared 'nothing' answer (HTTP {cfg.no_effect_status} with a JSON body)"
            if cfg.no_effect_status is not None
            else "a declared 'nothing' answer (none is declared: --no-effect-status)"
        )
        raise ProviderOutcomeUnknown(
            f"lookup {answer.where} answered HTTP {answer.status} ({answer.kind}), which is neither a 2xx with "
            f"{found} nor {declared}: whether the effect happened is unknown ({answer.detail})",
            status=answer.status,
        )


def _split(url: object) -> tuple[str, str]:
    """``http(s)://host[:port]`` and the rest (a path starting with ``/``, its query kept)."""
    if not isinstance(url, str) or not url.isprintable() or any(char.isspace() for char in url):
        raise InvalidConfiguration(
            WHAT, "url", "must be an http:// or https:// URL without spaces or control characters"
        )
    scheme, sep, rest = url.partition("://")
    if not sep or urlsplit(url).scheme not in ("http", "https"):
        raise InvalidConfiguration(WHAT, "url", "must be an http:// or https:// URL")
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    netloc, path = rest[:end], rest[end:]
    if "{" in netloc or "}" in netloc:
        raise InvalidConfiguration(WHAT, "url", "may hold {token} only in its path or query, not in its host")
    if not path.startswith("/"):
        path = "/" + path
    return f"{scheme.lower()}://{netloc}", path
