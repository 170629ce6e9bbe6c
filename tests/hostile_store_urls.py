"""Store URLs whose password holds characters a URL reserves, and the leak check.

Shared by the command's tests, the Airflow runs and the page's tests. ``{where}`` is the part after
the password: a host, a port and a database. Each password is built from pieces of at least four
characters that occur in no message, so "no part of it shows" can be checked concretely: no window
of four characters of any form of it (as written, decoded) occurs in what was shown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["HOSTILE", "Hostile", "leaked", "windows"]


@dataclass(frozen=True)
class Hostile:
    """A store URL with a password in a hostile shape, and what the store makes of it."""

    #: Short name (a test id, a Variable name suffix).
    name: str
    #: The URL, ``{where}`` standing for ``host:port/db``.
    url: str
    #: Every form of the password that must never be shown (as written, decoded, the pieces of an
    #: ambiguous one).
    secrets: tuple[str, ...]
    #: The password the store connects with; None when the URL is refused unread (exit 2).
    password: str | None

    def at(self, where: str) -> str:
        return self.url.replace("{where}", where)


HOSTILE: tuple[Hostile, ...] = (
    # The two shapes: urllib reads "?SECRET..." as the query; SQLAlchemy ends the password
    # at the first '@' and takes the rest for the host.
    Hostile("question", "postgresql://ij:?SECRETq7Zx@{where}", ("?SECRETq7Zx",), "?SECRETq7Zx"),
    Hostile("at", "postgresql://ij:SE@CRETq7Zx@{where}", ("SE@CRETq7Zx",), "SE@CRETq7Zx"),
    Hostile("hash", "postgresql://ij:Kq9z#Vb7mHASH@{where}", ("Kq9z#Vb7mHASH",), "Kq9z#Vb7mHASH"),
    Hostile("slash", "postgresql://ij:Kq9z/Vb7mSLSH@{where}", ("Kq9z/Vb7mSLSH",), "Kq9z/Vb7mSLSH"),
    Hostile("two-ats", "postgresql://ij:Kq9z@Vb7m@Nc2rTWO@{where}", ("Kq9z@Vb7m@Nc2rTWO",), "Kq9z@Vb7m@Nc2rTWO"),
    Hostile(
        "every-mark",
        "postgresql://ij:?Kq9z@Vb7m#Nc2r/Ld5s:Mx4wALL@{where}",
        ("?Kq9z@Vb7m#Nc2r/Ld5s:Mx4wALL",),
        "?Kq9z@Vb7m#Nc2r/Ld5s:Mx4wALL",
    ),
    Hostile("colon-first", "postgresql://ij::Kq9zCOLN@{where}", (":Kq9zCOLN",), ":Kq9zCOLN"),
    Hostile(
        "blank-newline", "postgresql://ij:Kq9z Vb7m\nNc2rBLNK@{where}", ("Kq9z Vb7m\nNc2rBLNK",), "Kq9z Vb7m\nNc2rBLNK"
    ),
    Hostile(
        "percent-encoded",
        "postgresql://ij:Kq9z%40Vb7m%2FNc2r%3FENC@{where}",
        ("Kq9z%40Vb7m%2FNc2r%3FENC", "Kq9z@Vb7m/Nc2r?ENC"),
        "Kq9z@Vb7m/Nc2r?ENC",
    ),
    Hostile("upper-scheme", "POSTGRES://ij:?Kq9zUPPR@{where}", ("?Kq9zUPPR",), "?Kq9zUPPR"),
    Hostile("driver-scheme", "postgresql+psycopg://ij:Kq9z#Vb7mDRVR@{where}", ("Kq9z#Vb7mDRVR",), "Kq9z#Vb7mDRVR"),
    # Two readings: the password "Kq9zAMB" (the rest a database name holding '@'), or everything up
    # to the last '@'. Refused, repeating neither.
    Hostile("ambiguous-host", "postgresql://ij:Kq9zAMB@{where}/Vb7mAMB@{where}", ("Kq9zAMB", "Vb7mAMB"), None),
    # No credentials at all (host "ij", port 5432, a database holding '@'), or the password "5432/...".
    Hostile("ambiguous-port", "postgresql://ij:5432/Kq9zPORT@{where}", ("Kq9zPORT",), None),
    # A '%' that starts no escape, an escape that is not UTF-8, a NUL: libpq refuses them all.
    Hostile("bad-percent", "postgresql://ij:Kq9z%zzVb7mPCNT@{where}", ("Kq9z%zzVb7mPCNT",), None),
    Hostile("not-utf8", "postgresql://ij:Kq9z%ffVb7mUTF8@{where}", ("Kq9z%ffVb7mUTF8", "Kq9z\ufffdVb7mUTF8"), None),
    Hostile("nul", "postgresql://ij:Kq9z%00Vb7mNULL@{where}", ("Kq9z%00Vb7mNULL", "Kq9z\x00Vb7mNULL"), None),
    Hostile("query-password", "postgresql://ij@{where}?password=Kq9z@Vb7mQURY", ("Kq9z@Vb7mQURY",), None),
    Hostile("file-url", "file://ij:Kq9z@Vb7mFILE@localhost/tmp/ij-hostile", ("Kq9z@Vb7mFILE",), None),
    Hostile("file-url-slash", "file://ij:Kq9z/Vb7mFSLH@localhost/tmp/ij-hostile", ("Kq9z/Vb7mFSLH",), None),
    Hostile("ipv6-unclosed", "postgresql://ij:Kq9z@Vb7mIPV6@[::1/ij", ("Kq9z@Vb7mIPV6",), None),
)


def windows(secret: str, size: int = 4) -> set[str]:
    """Every run of ``size`` characters of ``secret`` (the whole of a shorter one)."""
    if len(secret) <= size:
        return {secret}
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


def leaked(secrets: Iterable[str], *texts: str) -> list[str]:
    """The windows of ``secrets`` found in ``texts`` (empty: nothing of them shows)."""
    joined = "\n".join(texts)
    return sorted({piece for secret in secrets for piece in windows(secret) if piece in joined})
