"""What both kinds of ``reconcile`` share: an operator's word, who settles, the lookup's credential."""

from __future__ import annotations

import getpass
import os
import socket
from typing import Final

from ._common import CliError

__all__ = ["HEADER_ENV", "MAX_WORD", "TOKEN_ENV", "check_word", "credential", "settler"]

#: The credential for a lookup, sent as ``Authorization: Bearer <token>``.
TOKEN_ENV: Final = "IDEMPOTENT_JOBS_PROVIDER_TOKEN"
#: Optional other header name; the token is then sent as the header's whole value.
HEADER_ENV: Final = "IDEMPOTENT_JOBS_PROVIDER_AUTH_HEADER"
#: Longest word accepted (--remote-ref, --done, --by, --comment: stored and shown in every listing).
MAX_WORD: Final = 512


def check_word(flag: str, text: str) -> None:
    """An operator's word is stored and shown in listings: one printable line of bounded length."""
    if not text.strip():
        raise CliError(f"{flag} must not be empty")
    if not text.isprintable():
        raise CliError(f"{flag} must not contain control, format or line-separator characters")
    if len(text) > MAX_WORD:
        raise CliError(f"{flag} is longer than {MAX_WORD} characters")


def settler(by: str | None) -> str:
    """``--by``, else ``$USER@hostname``."""
    return by or f"{os.environ.get('USER') or getpass.getuser()}@{socket.gethostname()}"


def credential() -> tuple[str, str]:
    """The lookup's auth header and value, from the environment; read only once the episode was checked.

    Required: without it a target may answer 404 for "not yours", which a lookup would read as "not there".
    """
    token = os.environ.get(TOKEN_ENV)
    if not token:
        raise CliError(f"looking the token up needs the credential in ${TOKEN_ENV}")
    header = os.environ.get(HEADER_ENV)
    if header:
        return header, token
    return "Authorization", f"Bearer {token}"
