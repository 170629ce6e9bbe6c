"""The migration's evidence: the manifest written before anything moves, and the migration record.

The manifest lists every legacy job with every file and its sha256, every remote reference, every
cost record and the decision its legacy approval records. A migrated episode keeps, in its
``metadata``: ``legacy_state`` (the legacy state object, whole), ``legacy_history`` (its week's
history entry) and ``migration`` (where it came from, when, by which tool, the sha256 of every file
it brought, the decision); the decision itself is its ``approval``. `check` compares them all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..episode import SCHEMA_VERSION, Episode
from ..errors import InvalidIdentifier
from ..record_rules import Problem
from ..stores.durable import write_durable
from .json_files import read_json_file
from .legacy import LegacyJob, SkippedSource, cost_total, extract_costs, extract_refs
from .legacy_approval import LegacyDecision

__all__ = [
    "LEGACY_HISTORY_KEY",
    "LEGACY_STATE_KEY",
    "LEGACY_SUBDIR",
    "MANIFEST_KIND",
    "MIGRATION_KEY",
    "HashOf",
    "Manifest",
    "ManifestJob",
    "decision_problems",
    "same_cost",
    "submission_as_migrated",
    "load_manifest",
    "verify_manifest",
    "write_manifest",
]

MANIFEST_KIND: Final = "legacy-migration-manifest"
MIGRATION_KEY: Final = "migration"
LEGACY_STATE_KEY: Final = "legacy_state"
LEGACY_HISTORY_KEY: Final = "legacy_history"
#: Inside an episode directory of the file store: the legacy week directory's files, paths kept.
LEGACY_SUBDIR: Final = "legacy"

#: Largest manifest `load_manifest` reads: it holds every legacy state of one migration.
MAX_MANIFEST_BYTES: Final = 256 * 1024 * 1024

#: sha256 of a migrated file as it is now (None: missing), given its episode and legacy path.
HashOf = Callable[[Episode, str], "str | None"]


@dataclass(frozen=True)
class ManifestJob:
    """A legacy job and the allocation key its episode gets."""

    job: LegacyJob
    allocation_key: str
    #: False for a manifest written before decisions were migrated: its episodes carry none to verify.
    decision_listed: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {**self.job.to_dict(), "allocation_key": self.allocation_key}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ManifestJob:
        return cls(LegacyJob.from_dict(data), str(data["allocation_key"]), "approval" in data)


@dataclass(frozen=True)
class Manifest:
    created_at: str
    legacy_root: str
    store: str
    tool_version: str
    history_sha256: str | None
    jobs: tuple[ManifestJob, ...]
    skipped: tuple[SkippedSource, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": MANIFEST_KIND,
            "created_at": self.created_at,
            "legacy_root": self.legacy_root,
            "store": self.store,
            "tool_version": self.tool_version,
            "history_sha256": self.history_sha256,
            "jobs": [job.to_dict() for job in self.jobs],
            "skipped": [{"where": s.where, "reason": s.reason} for s in self.skipped],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        return cls(
            created_at=str(data["created_at"]),
            legacy_root=str(data["legacy_root"]),
            store=str(data["store"]),
            tool_version=str(data["tool_version"]),
            history_sha256=data.get("history_sha256"),
            jobs=tuple(ManifestJob.from_dict(job) for job in data["jobs"]),
            skipped=tuple(SkippedSource(str(s["where"]), str(s["reason"])) for s in data.get("skipped", ())),
        )


def write_manifest(path: Path, manifest: Manifest) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_durable(path, manifest.to_dict())


def load_manifest(path: Path) -> Manifest:
    """A manifest file; anything unreadable is bad input (`InvalidIdentifier`)."""
    try:
        data = read_json_file(path, max_bytes=MAX_MANIFEST_BYTES)
        if not isinstance(data, dict) or data.get("kind") != MANIFEST_KIND:
            raise ValueError(f"not a {MANIFEST_KIND}")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"unknown schema_version {data.get('schema_version')!r}")
        return Manifest.from_dict(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidIdentifier("manifest", str(path), reason) from exc


def same_cost(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def verify_manifest(manifest: Manifest, episodes: Iterable[Episode], hash_of: HashOf | None) -> list[Problem]:
    """Nothing of the manifest lost: one episode per job, same hashes, references and costs.

    ``hash_of`` recomputes a file's hash where the store holds files; without it the hashes the
    migration recorded are compared.
    """
    episodes = list(episodes)
    problems: list[Problem] = []
    for entry in manifest.jobs:
        job = entry.job
        holders = [
            e
            for e in episodes
            if _migration(e).get("source") == str(job.source) or e.allocation_key == entry.allocation_key
        ]
        label = f"manifest job {job.week} ({job.source})"
        if not holders:
            problems.append(Problem(label, "no migrated episode holds it: lost"))
            continue
        if len(holders) > 1:
            ids = ", ".join(sorted(e.episode_id for e in holders))
            problems.append(Problem(label, f"migrated more than once: {ids}"))
            continue
        problems += _compare(entry, holders[0], hash_of)
    return problems


def submission_as_migrated(episode: Episode) -> bool:
    """True while the submission ledger has not moved since the migration wrote it.

    An unfinished migrated job may be taken over by the paid layer (submitted, polled, paid):
    from then on its cost and remote reference are the ledger's, no longer the legacy state's.
    """
    moves = _migration(episode).get("submission_moves")
    return not isinstance(moves, int) or len(episode.submission.history) <= moves


def _migration(episode: Episode) -> Mapping[str, Any]:
    record = episode.metadata.get(MIGRATION_KEY)
    return record if isinstance(record, dict) else {}


def _compare(entry: ManifestJob, episode: Episode, hash_of: HashOf | None) -> list[Problem]:
    job, where = entry.job, episode.episode_id
    problems = []
    if episode.allocation_key != entry.allocation_key:
        problems.append(
            Problem(where, f"allocation key {episode.allocation_key!r}, the manifest {entry.allocation_key!r}")
        )
    recorded = _migration(episode).get("files")
    recorded = recorded if isinstance(recorded, dict) else {}
    for file in job.files:
        now = hash_of(episode, file.path) if hash_of is not None else recorded.get(file.path)
        if now is None:
            problems.append(Problem(where, f"{LEGACY_SUBDIR}/{file.path} is missing (manifest sha256 {file.sha256})"))
        elif now != file.sha256:
            problems.append(Problem(where, f"{LEGACY_SUBDIR}/{file.path} hashes to {now}, the manifest {file.sha256}"))
    state = episode.metadata.get(LEGACY_STATE_KEY)
    if not isinstance(state, dict):
        return [*problems, Problem(where, "the legacy state is gone")]
    refs, want_refs = [r.value for r in extract_refs(state)], [r.value for r in job.remote_refs]
    if sorted(refs) != sorted(want_refs):
        problems.append(
            Problem(where, f"{len(refs)} remote references {refs}, the manifest has {len(want_refs)} {want_refs}")
        )
    try:
        costs = [(c.pointer, dict(c.record)) for c in extract_costs(state)]
    except ValueError as exc:
        costs = []
        problems.append(Problem(where, f"legacy state: {exc}"))
    want = [(c.pointer, dict(c.record)) for c in job.cost_records]
    for pointer, record in want:
        if (pointer, record) not in costs:
            problems.append(
                Problem(where, f"cost record {pointer} {json.dumps(record, sort_keys=True)} changed or lost")
            )
    for pointer, record in costs:
        if (pointer, record) not in want:
            problems.append(
                Problem(where, f"cost record {pointer} {json.dumps(record, sort_keys=True)} is not in the manifest")
            )
    if submission_as_migrated(episode) and not same_cost(episode.submission.cost, cost_total(job.cost_records)):
        problems.append(
            Problem(where, f"submission cost {episode.submission.cost}, the manifest {cost_total(job.cost_records)}")
        )
    if episode.metadata.get(LEGACY_HISTORY_KEY) != job.history_entry:
        problems.append(Problem(where, "the legacy history entry differs from the manifest"))
    if entry.decision_listed:
        problems += decision_problems(where, job.approval, episode, "the manifest")
    return problems


def decision_problems(where: str, wanted: LegacyDecision | None, episode: Episode, source: str) -> list[Problem]:
    """The legacy decision ``source`` lists, still the episode's; None wanted: any later decision is fine."""
    if wanted is None:
        return []
    approval = episode.approval
    if approval.decision is None:
        return [Problem(where, f"no decision recorded, {source} has {_said(wanted.to_dict())}: lost")]
    now = {"decision": approval.decision.value, "by": approval.by, "at": approval.at, "comment": approval.comment}
    if now != wanted.to_dict():
        return [Problem(where, f"decision {_said(now)}, {source} has {_said(wanted.to_dict())}")]
    return []


def _said(decision: Mapping[str, Any]) -> str:
    comment = f" ({decision['comment']!r})" if decision.get("comment") else ""
    return f"{decision['decision']} by {decision['by']!r} at {decision['at']!r}{comment}"
