"""What the vendors' hooks share on the Airflow side: the key masked in logs, a batch's output written to storage.

A batch's outputs never go into XCom or the record (they may be gigabytes): a downstream task
streams them to an `ObjectStoragePath` (a local path, ``s3://``, ``gs://``, whatever Airflow's
object storage reaches), chunk by chunk.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from ..airflow_compat import mask_secret
from ..errors import InvalidConfiguration
from ..paid._redaction import secret_forms

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath

__all__ = ["mask_key", "write_to_storage"]


def mask_key(api_key: str) -> None:
    """Register an API key, in every form it is sent or echoed in, with Airflow's secrets masker.

    The key may come from the connection's extra (the client kwargs), which Airflow does not mask.
    """
    for form in secret_forms(f"Bearer {api_key}"):
        mask_secret(form)


def write_to_storage(destination: str | ObjectStoragePath, write: Callable[[IO[bytes]], int]) -> int:
    """``write(file)`` into ``destination`` (a path or URL, or an `ObjectStoragePath`); what it returns.

    The bytes go to a temporary sibling that is renamed into place once whole, so a reader never
    sees half an output and a failed write (a full disk, a lost connection) leaves only what was
    there before. On the local file system an existing destination must be a regular file: a
    link, a FIFO, a device or a directory is refused (`InvalidConfiguration`), never written through.
    """
    from airflow.sdk import ObjectStoragePath

    path = destination if isinstance(destination, ObjectStoragePath) else ObjectStoragePath(destination)
    if path.protocol in ("", "file", "local"):
        _refuse_special(str(path.path))
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with partial.open("wb") as out:  # type: ignore[no-untyped-call]  # (ObjectStoragePath.open is untyped)
            written = write(out)
        partial.rename(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return written


def _refuse_special(local: str) -> None:
    try:
        mode = os.lstat(local).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        kind = "a link" if stat.S_ISLNK(mode) else "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise InvalidConfiguration("batch output", "destination", f"{local!r:.200} is {kind}: refusing to write there")
