"""``reconcile ID --effect NAME``: settle an effect whose outcome is unknown (or whose runner is gone).

Three ways, one at a time: ``--done REF`` (a person says it happened; the result is ``{"ref": REF}``),
``--not-done`` (it did not: the next run runs it once), or ``--lookup-url URL`` (its token looked up,
`effects.http_lookup`). The order is the paid reconcile's: every argument is checked, then the
episode loaded and the effect checked (`EffectLedger.check_reconcilable`), and only then is the
credential read and a request sent. A lookup that proves nothing records nothing and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Final

from ..effect import validate_effect_name
from ..effects.ledger import EffectLedger
from ..errors import InvalidConfiguration, NotReconcilable, ProviderError
from ..identity import EpisodeId
from ._common import EXIT, CliError, open_cli_store, print_json
from ._output import visible
from ._settling import check_word, credential, settler

if TYPE_CHECKING:
    from ..effects.http_lookup import HttpEffectLookup, HttpEffectLookupConfig

__all__ = ["EFFECT_ONLY", "PAID_ONLY", "given_flags", "reconcile_effect"]

#: (flag, argparse dest) of the options that settle an effect only.
EFFECT_ONLY: Final = (
    ("--done", "done"),
    ("--not-done", "not_done"),
    ("--lookup-url", "lookup_url"),
    ("--no-effect-status", "no_effect_status"),
    ("--comment", "comment"),
)
#: (flag, argparse dest) of the options that settle a paid submission only.
PAID_ONLY: Final = (
    ("--remote-ref", "remote_ref"),
    ("--not-submitted", "not_submitted"),
    ("--provider-url", "provider_url"),
    ("--provider-config", "provider_config"),
    ("--lookup-path", "lookup_path"),
    ("--no-job-status", "no_job_status"),
    ("--no-job-path", "no_job_path"),
    ("--no-job-value", "no_job_value"),
)

#: The lookup config's fields as the command's options, for its one-line errors.
_FLAGS: Final = {"url": "--lookup-url", "ref_path": "--ref-path", "no_effect_status": "--no-effect-status"}


def reconcile_effect(args: argparse.Namespace) -> int:
    eid = str(EpisodeId.parse(args.episode_id))
    name = validate_effect_name(args.effect)
    config = _checked(args)  # bad input exits 2 before the store is opened
    settled_by = settler(args.by)
    with open_cli_store(args) as store:
        ledger = EffectLedger(store)
        try:
            seen = ledger.check_reconcilable(eid, name)  # before any credential is read
            lookup = _lookup(config) if config is not None else None
            episode = ledger.reconcile(
                eid,
                name,
                done_ref=args.done,
                not_done=args.not_done,
                lookup=lookup,
                settled_by=settled_by,
                comment=args.comment,
            )
        except NotReconcilable as exc:
            raise CliError(
                f"episode {eid}: cannot reconcile effect {name} ({exc.current}): {exc.reason}", exc.exit_code
            ) from exc
        except ProviderError as exc:
            kept = f"episode {eid}: effect {name} is still {seen.state.value}, nothing recorded"
            raise CliError(f"{kept}: {exc}", exc.exit_code) from None
    effect = episode.effects[name]
    print_json(episode.to_dict())
    how = f"{effect.settled_how}; by {effect.settled_by} at {effect.settled_at}"
    sys.stderr.write(visible(f"settled {eid} effect {name}: {effect.state.value} ({how})") + "\n")
    return EXIT["ok"]


def _checked(args: argparse.Namespace) -> HttpEffectLookupConfig | None:
    """Every argument checked; the lookup's config when one is asked for."""
    given = given_flags(args, PAID_ONLY)
    if given:
        raise CliError(
            f"{given[0]} settles a paid submission: not with --effect (use --done, --not-done or --lookup-url)"
        )
    if args.done is None and not args.not_done and args.lookup_url is None:
        raise CliError("give --done REF, --not-done, or --lookup-url URL to look the effect's token up")
    if args.lookup_url is None and (args.no_effect_status is not None or args.ref_path is not None):
        raise CliError("--no-effect-status and --ref-path go with --lookup-url")
    for flag, text in (("--done", args.done), ("--by", args.by), ("--comment", args.comment)):
        if text is not None:
            check_word(flag, text)
    if args.lookup_url is None:
        return None
    from ..effects.http_lookup import HttpEffectLookupConfig

    try:
        return HttpEffectLookupConfig(args.lookup_url, no_effect_status=args.no_effect_status, ref_path=args.ref_path)
    except InvalidConfiguration as exc:
        raise CliError(f"{_FLAGS.get(exc.field, exc.field)} {exc.reason}") from None


def given_flags(args: argparse.Namespace, options: tuple[tuple[str, str], ...]) -> list[str]:
    """The flags of ``options`` given on the command line (0 is given: only None and an unset switch are not)."""
    return [flag for flag, dest in options if getattr(args, dest) is not None and getattr(args, dest) is not False]


def _lookup(config: HttpEffectLookupConfig) -> HttpEffectLookup:
    from ..effects.http_lookup import HttpEffectLookup

    header, value = credential()
    return HttpEffectLookup(config, auth_header=header, auth_value=value)
