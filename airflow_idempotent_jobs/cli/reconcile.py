"""``reconcile``: settle a paid submission whose acceptance is unknown (with ``--effect``: an effect).

Order matters: the arguments and the provider config are validated, then the episode loaded and
its state checked, before any provider credential is read or any request is sent. A lookup settles
"not submitted" only on the answer the config declares (``--no-job-*``); any other answer leaves
the submission unknown and exits non-zero. ``--effect NAME`` settles that effect instead, in the
same order (`_reconcile_effect`).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Final

from .. import safe_json
from ..errors import NotReconcilable
from ..paid.ledger import SubmissionLedger
from ._common import EXIT, CliError, open_cli_store, print_json
from ._reconcile_effect import EFFECT_ONLY, given_flags, reconcile_effect
from ._settling import TOKEN_ENV, check_word, credential, settler

if TYPE_CHECKING:
    from ..paid.http import HttpProviderConfig

__all__ = ["register"]

#: Largest --provider-config file read.
MAX_CONFIG_BYTES: Final = 1 << 20
#: --lookup-path and --ref-path when not given (with --provider-url).
DEFAULT_LOOKUP_PATH: Final = "/jobs?token={token}"
DEFAULT_REF_PATH: Final = "id"


def register(commands: Any) -> None:
    p = commands.add_parser(
        "reconcile",
        help="settle a paid submission left in submitting/unknown (or, with --effect, an effect)",
        description=(
            "Settle a submission whose outcome is unknown: by looking its idempotency token up at the "
            "provider (--provider-url or --provider-config, credential in $" + TOKEN_ENV + "), or by your "
            "word: --remote-ref REF (this remote job is ours) or --not-submitted (nothing reached the "
            "provider; the next run submits once). With --effect NAME, settle that effect of the episode "
            "instead: --lookup-url URL (look its token up, same credential), --done REF (it happened) or "
            "--not-done (it did not; the next run runs it once)."
        ),
    )
    p.add_argument("episode_id", help="the episode, e.g. 2026-W32-0")
    p.add_argument("--effect", metavar="NAME", help="settle this effect of the episode, not its paid submission")
    way = p.add_mutually_exclusive_group()
    way.add_argument("--done", metavar="REF", help="with --effect: it happened; REF is recorded as its result's ref")
    way.add_argument("--not-done", action="store_true", help="with --effect: it did not happen (the next run runs it)")
    way.add_argument(
        "--lookup-url",
        metavar="URL",
        help="with --effect: http(s) URL holding {token}, GET to look the effect's token up; "
        "a 2xx JSON answer says it happened",
    )
    p.add_argument(
        "--no-effect-status",
        type=int,
        metavar="N",
        help="with --lookup-url: the HTTP status (a 4xx, e.g. 404) of the answer 'nothing for this token'; "
        "without it, only a found effect settles anything",
    )
    p.add_argument("--comment", help="with --effect: why (recorded in how it was settled)")
    word = p.add_mutually_exclusive_group()
    word.add_argument("--remote-ref", help="the provider's id of the job this episode created")
    word.add_argument("--not-submitted", action="store_true", help="the provider never received the request")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--provider-url", help="base URL of the provider's job API, to look the token up")
    source.add_argument("--provider-config", help="JSON file with an HttpProviderConfig (no secrets)")
    p.add_argument("--lookup-path", help="with --provider-url: lookup URL template (default /jobs?token={token})")
    p.add_argument(
        "--ref-path",
        help="with --provider-url: dotted JSON path of the job id (default id); with --lookup-url: of the "
        "reference to record (default: the whole answer is the result)",
    )
    p.add_argument(
        "--no-job-status",
        type=int,
        help="with --provider-url: the HTTP status of the lookup's 'no job for this token' answer (e.g. 404); "
        "without it, only a found job settles anything",
    )
    p.add_argument("--no-job-path", help="with --no-job-status: dotted JSON path of the field that says so")
    p.add_argument("--no-job-value", help="with --no-job-status: the text that field holds (omit: it is an empty list)")
    p.add_argument("--by", help="who settles it (default: $USER@hostname)")
    p.set_defaults(func=_reconcile)


def _reconcile(args: argparse.Namespace) -> int:
    if args.effect is not None:
        return reconcile_effect(args)
    given = given_flags(args, EFFECT_ONLY)
    if given:
        raise CliError(f"{given[0]} goes with --effect NAME (it settles an effect, not the paid submission)")
    by_word = args.remote_ref is not None or args.not_submitted
    has_provider = args.provider_url is not None or args.provider_config is not None
    if by_word and has_provider:
        raise CliError("give either a provider to look the token up, or --remote-ref/--not-submitted, not both")
    if not by_word and not has_provider:
        raise CliError("give --remote-ref REF, --not-submitted, or --provider-url/--provider-config to look it up")
    if args.remote_ref is not None:
        check_word("--remote-ref", args.remote_ref)
    if args.by is not None:
        check_word("--by", args.by)
    shape_flags = (args.no_job_status, args.no_job_path, args.no_job_value)
    if args.provider_url is None and any(flag is not None for flag in shape_flags):
        raise CliError("--no-job-status/--no-job-path/--no-job-value go with --provider-url")
    config = _config(args) if has_provider else None  # bad input exits 2 before the store is opened
    settled_by = settler(args.by)
    with open_cli_store(args) as store:
        ledger = SubmissionLedger(store)
        try:
            ledger.check_reconcilable(args.episode_id)  # before any credential is read
            provider = _provider(config) if config is not None else None
            episode = ledger.reconcile(
                args.episode_id,
                provider=provider,
                remote_ref=args.remote_ref,
                not_submitted=args.not_submitted,
                settled_by=settled_by,
            )
        except NotReconcilable as exc:
            raise CliError(str(exc), EXIT["conflict"]) from exc
        except ValueError as exc:
            raise CliError(str(exc)) from exc
    sub = episode.submission
    print_json(episode.to_dict())
    what = f"accepted {sub.remote_ref}" if sub.remote_ref and sub.state.value == "accepted" else sub.state.value
    how = f"{sub.settled_how}; by {sub.settled_by} at {sub.settled_at}"
    sys.stderr.write(f"settled {episode.episode_id}: {what} ({how})\n")
    return EXIT["ok"]


def _config(args: argparse.Namespace) -> HttpProviderConfig:
    """The lookup's provider config from --provider-config or --provider-url and its options."""
    from ..paid.http import HttpProviderConfig

    if args.provider_config is not None:
        try:
            with open(args.provider_config, "rb") as handle:
                raw = handle.read(MAX_CONFIG_BYTES + 1)
            if len(raw) > MAX_CONFIG_BYTES:
                raise ValueError(f"larger than {MAX_CONFIG_BYTES} bytes")
            config = HttpProviderConfig.from_dict(safe_json.loads(raw))
        except (OSError, ValueError) as exc:  # InvalidConfiguration and UnsafeJson are ValueErrors
            raise CliError(f"cannot use --provider-config {args.provider_config}: {exc}") from None
    else:
        fields: dict[str, Any] = {
            "base_url": args.provider_url,
            "lookup_path": DEFAULT_LOOKUP_PATH if args.lookup_path is None else args.lookup_path,
            "ref_path": DEFAULT_REF_PATH if args.ref_path is None else args.ref_path,
            "lookup_no_job_status": args.no_job_status,
            "lookup_no_job_path": args.no_job_path,
            "lookup_no_job_value": args.no_job_value,
        }
        try:
            config = HttpProviderConfig(**fields)
        except ValueError as exc:  # InvalidConfiguration names the field
            raise CliError(str(exc)) from None
    if config.lookup_path is None:
        raise CliError("the provider config has no lookup_path: settle with --remote-ref or --not-submitted")
    return config


def _provider(config: HttpProviderConfig) -> Any:
    from ..paid.http import HttpPaidProvider

    header, value = credential()
    return HttpPaidProvider(config, auth_header=header, auth_value=value)
