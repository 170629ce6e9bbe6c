"""Store backends for the conformance suite: every store-level test runs once per backend.

A backend knows how to make an empty store, open it (also from another process, by URL), take a
byte-exact snapshot of everything the store persisted (for "nothing changed" assertions), and
damage one stored episode in the ways the bad-input tests need.
"""

from __future__ import annotations

import hashlib
import json
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

    def stored(self, episode_id: str) -> dict[str, Any]:
        """The record as persisted (JSON parsed), read around the store; no ``approval`` nor ``effects`` if none."""
        ...

    def overwrite(self, episode_id: str, status: str, approval: dict[str, Any] | None) -> None:
        """Write status and approval as a writer that bypasses the store (and its checks) would."""
        ...

    def write_effects(self, episode_id: str, effects: dict[str, Any]) -> None:
        """Give an episode that has no effects these (the record's ``effects`` object), bypassing the store."""
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

    def stored(self, episode_id: str) -> dict[str, Any]:
        record: dict[str, Any] = json.loads(self.state_path(episode_id).read_bytes())
        return record

    def overwrite(self, episode_id: str, status: str, approval: dict[str, Any] | None) -> None:
        record = self.stored(episode_id)
        record["status"] = status
        record.pop("approval", None)
        if approval is not None:
            record["approval"] = approval
        self._write(episode_id, record)

    def write_effects(self, episode_id: str, effects: dict[str, Any]) -> None:
        record = self.stored(episode_id)
        if "effects" in record:
            raise AssertionError(f"{episode_id} has effects already")
        self._write(episode_id, {**record, "effects": effects})

    def _write(self, episode_id: str, record: dict[str, Any]) -> None:
        self.state_path(episode_id).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")


class PostgresBackend:
    """A store in its own database (created per test from a migrated template, see tests/pg.py)."""

    name = "postgres"

    def __init__(self, url: str, schema: str = "idempotent_jobs") -> None:
        self.url = url
        self.schema = schema

    def open(self, **options: Any) -> EpisodeStore:
        return open_store(self.url, **options)

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def snapshot(self) -> dict[str, str]:
        """Every row of every table in the store's schema, keyed by table and primary key.

        A column that is NULL is left out of its row's hash: a table's columns are fixed, so nothing
        is lost, and a nullable column a migration adds (``effects``) leaves every older row as it was.
        """
        rows: dict[str, str] = {}
        with self._connect() as conn:
            tables = conn.execute(
                "SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY c.relname",
                (self.schema,),
            ).fetchall()
            for oid, table in tables:
                keys = [
                    name
                    for (name,) in conn.execute(
                        "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                        "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                        "WHERE i.indrelid = %s AND i.indisprimary ORDER BY a.attnum",
                        (oid,),
                    )
                ]
                for (whole,) in conn.execute(f'SELECT to_jsonb(t) FROM "{self.schema}"."{table}" t'):
                    row = {column: value for column, value in whole.items() if value is not None}
                    key = "/".join([table, *(str(row[k]) for k in keys)]) if keys else f"{table}/{len(rows)}"
                    text = json.dumps(row, sort_keys=True, ensure_ascii=False)
                    rows[key] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return rows

    def corrupt(self, episode_id: str, how: str) -> None:
        damage = {
            "truncated": "submission = to_jsonb(left(submission::text, length(submission::text) / 2))",
            "not-json": "submission = to_jsonb('\\xff not json at all'::text)",
            "unknown-version": "schema_version = 99",
        }[how]
        with self._connect() as conn:
            done = conn.execute(
                f'UPDATE "{self.schema}".episodes SET {damage} WHERE episode_id = %s', (episode_id,)
            ).rowcount
        if done != 1:
            raise AssertionError(f"no row for {episode_id} to corrupt")

    def stored(self, episode_id: str) -> dict[str, Any]:
        """The row's columns; ``approval`` and ``effects`` only when not NULL (JSON columns parsed)."""
        with self._connect() as conn:
            found = conn.execute(
                f'SELECT to_jsonb(t) FROM "{self.schema}".episodes t WHERE episode_id = %s', (episode_id,)
            ).fetchone()
        if found is None:
            raise AssertionError(f"no row for {episode_id}")
        row: dict[str, Any] = found[0]
        for name in ("namespace", "submission_state"):
            del row[name]
        for name in ("approval", "effects"):
            if row.get(name) is None:
                row.pop(name, None)
        return row

    def overwrite(self, episode_id: str, status: str, approval: dict[str, Any] | None) -> None:
        from psycopg.types.json import Jsonb

        with self._connect() as conn:
            done = conn.execute(
                f'UPDATE "{self.schema}".episodes SET status = %s, approval = %s WHERE episode_id = %s',
                (status, None if approval is None else Jsonb(approval), episode_id),
            ).rowcount
        if done != 1:
            raise AssertionError(f"no row for {episode_id} to overwrite")

    def write_effects(self, episode_id: str, effects: dict[str, Any]) -> None:
        """From NULL: the guard of schema version 6 watches changes to effects already recorded, not this."""
        from psycopg.types.json import Jsonb

        with self._connect() as conn:
            done = conn.execute(
                f'UPDATE "{self.schema}".episodes SET effects = %s WHERE episode_id = %s AND effects IS NULL',
                (Jsonb(effects), episode_id),
            ).rowcount
        if done != 1:
            raise AssertionError(f"no row without effects for {episode_id}")
