"""Store backends for the conformance suite: every store-level test runs once per backend.

A backend knows how to make an empty store, open it (also from another process, by URL), take a
byte-exact snapshot of everything the store persisted (for "nothing changed" assertions), and
damage one stored episode in the ways the bad-input tests need.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Protocol

from airflow_idempotent_jobs import EpisodeStore, open_store


class Backend(Protocol):
    name: str
    #: A URL that `open_store` (and the CLI's ``--store``) accepts, usable from any process.
    url: str

    def open(self, **options: Any) -> EpisodeStore: ...

    def snapshot(self) -> dict[str, str]:
        """Everything persisted, as ``{location: sha256}``; equal snapshots mean nothing changed."""
        ...

    def corrupt(self, episode_id: str, how: str) -> None:
        """Damage one episode's record: ``how`` is ``truncated``, ``not-json`` or ``unknown-version``."""
        ...


class FileBackend:
    name = "file"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = str(root)

    def open(self, **options: Any) -> EpisodeStore:
        return open_store(self.url, **options)

    def snapshot(self) -> dict[str, str]:
        tree: dict[str, str] = {}
        if not self.root.exists():
            return tree
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in dirnames:
                tree[os.path.relpath(os.path.join(dirpath, name), self.root) + "/"] = "dir"
            for name in filenames:
                path = os.path.join(dirpath, name)
                tree[os.path.relpath(path, self.root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        return tree

    def state_path(self, episode_id: str) -> Path:
        week = episode_id.rsplit("-", 1)[0]
        return self.root / "episodes" / week / episode_id / "state.json"

    def corrupt(self, episode_id: str, how: str) -> None:
        path = self.state_path(episode_id)
        raw = path.read_bytes()
        if how == "truncated":
            path.write_bytes(raw[: len(raw) // 2])
        elif how == "not-json":
            path.write_bytes(b"\x00\xffnot json at all")
        elif how == "unknown-version":
            path.write_bytes(raw.replace(b'"schema_version": 1', b'"schema_version": 99'))
        else:
            raise ValueError(how)
