"""Legacy weekly-named jobs become versioned episodes, without losing evidence or paying again.

Each legacy week ``W`` becomes the episode ``W-<next free sequence>``, allocated through the
store's own `allocate` (under its lock) with the key ``migrated:W``, or the original scheduled
invocation's key from a key map, so that a re-run of that invocation gets the episode back.

Order of one apply (every step may be killed; a re-run completes it, never duplicates it)::

    manifest written (all jobs, every file's sha256, references, costs)   nothing changed yet
    per job: journal  migrations/journal/W.json (the job as the manifest has it)
             allocate(W, key)           a retry returns the same episode: no second job
             files moved into <episode>/legacy/ with os.rename (copy, verify, delete across devices)
             the episode record gains legacy_state, legacy_history, the migration record and
             the legacy decision (approval, via "migration")
             the emptied legacy directory removed, then the journal
A journal that exists means "this job was started": the next run resumes it from the journal,
not from the half-moved legacy directory. Nothing here reads credentials or calls a provider.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import re
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..approval import decided
from ..episode import Episode, EpisodeStatus, SubmissionState, utc_now
from ..errors import (
    AllocationConflict,
    DecisionConflict,
    InvalidIdentifier,
    MigrationError,
    StoreCorrupted,
    StoreUnavailable,
)
from ..identity import EpisodeId, WeekId, validate_allocation_key
from ..stores.durable import TMP_PREFIX, fsync_dir, read_json, require_dir, tmp_name, write_durable
from ..stores.file import FileEpisodeStore
from ..stores.file._lock import LockTimeout, StoreLock
from .json_files import UnsafeJson, read_json_file
from .legacy import LegacyJob, SkippedSource, check_legacy_approvals, cost_total, scan_legacy, sha256_file
from .manifest import (
    LEGACY_HISTORY_KEY,
    LEGACY_STATE_KEY,
    LEGACY_SUBDIR,
    MIGRATION_KEY,
    Manifest,
    ManifestJob,
    write_manifest,
)

__all__ = [
    "DEFAULT_KEY_PREFIX",
    "MIGRATIONS_DIR",
    "MigrationPlan",
    "MigrationResult",
    "PlannedJob",
    "apply_migration",
    "counted",
    "decision_text",
    "load_key_map",
    "plan_migration",
]

DEFAULT_KEY_PREFIX: Final = "migrated:"
#: Under the store root: manifests, the journal of started jobs, the lock of the migration.
MIGRATIONS_DIR: Final = "migrations"
_JOURNAL: Final = "journal"
TOOL: Final = "airflow-idempotent-jobs"
#: How a decision carried over from a legacy state is recorded (`Approval.via`).
VIA: Final = "migration"
#: What `tmp_name` makes of a file name: the prefix, the name, a dash and 8 hex digits.
_OUR_TMP: Final = re.compile(re.escape(TMP_PREFIX) + r".+-[0-9a-f]{8}")


@dataclass(frozen=True)
class PlannedJob:
    entry: ManifestJob
    #: The episode it will get (predicted for a new job, known for a resumed one).
    episode_id: str
    #: True when a killed run started this job: it resumes from the journal.
    resume: bool


@dataclass(frozen=True)
class MigrationPlan:
    legacy_root: Path
    jobs: tuple[PlannedJob, ...]
    skipped: tuple[SkippedSource, ...]
    history_sha256: str | None


@dataclass
class MigrationResult:
    plan: MigrationPlan
    manifest: Path | None = None
    migrated: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[SkippedSource] = field(default_factory=list)


def load_key_map(path: Path) -> dict[str, str]:
    """``{"2026-W30": "<original allocation key>", ...}``; anything off is `InvalidIdentifier`."""
    try:
        data = read_json_file(path, unique_keys=True)
    except OSError as exc:
        raise InvalidIdentifier("key map", str(path), f"unreadable: {exc.strerror or exc}") from exc
    except UnsafeJson as exc:
        raise InvalidIdentifier("key map", str(path), f"unreadable: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidIdentifier("key map", str(path), "expected a JSON object {week: allocation key}")
    return {str(WeekId.parse(week)): validate_allocation_key(key) for week, key in data.items()}


def _journal_dir(store: FileEpisodeStore) -> Path:
    return store.root / MIGRATIONS_DIR / _JOURNAL


def _require_own_dirs(store: FileEpisodeStore) -> None:
    """`StoreCorrupted` when the root, ``migrations/`` or its journal is a link or no directory: like
    the rest of the store, they are never read or written through a link (and a root that is a
    regular file is named as such, not as a failed read of the journal inside it)."""
    for path in (store.root, store.root / MIGRATIONS_DIR, _journal_dir(store)):
        try:
            require_dir(path)
        except FileNotFoundError:
            return


def _journals(store: FileEpisodeStore) -> dict[str, ManifestJob]:
    _require_own_dirs(store)
    found = {}
    try:
        names = sorted(os.listdir(_journal_dir(store)))
    except FileNotFoundError:
        return {}
    for name in names:
        if name.startswith(TMP_PREFIX) or not name.endswith(".json"):
            continue
        path = _journal_dir(store) / name
        try:
            entry = ManifestJob.from_dict(read_json(path))
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreCorrupted(str(path), f"unreadable migration journal: {exc}") from exc
        found[str(entry.job.week)] = entry
    return found


def _next_free(store: FileEpisodeStore, week: WeekId) -> EpisodeId:
    """What `allocate` would hand out now, read without the lock (a dry run's prediction)."""
    highest = max((e.sequence for e in store.list(week)), default=-1)
    recorded = store.history_highest(week)
    return EpisodeId(week, max(highest, -1 if recorded is None else recorded) + 1)


def plan_migration(
    store: FileEpisodeStore, legacy_root: Path, key_map: Mapping[str, str] | None = None
) -> MigrationPlan:
    """What an apply would do; reads the legacy directory and the store, changes nothing."""
    with store.io_errors():  # the store's files (journals, histories) read outside its own calls
        return _plan(store, Path(legacy_root).absolute(), key_map)


def _plan(store: FileEpisodeStore, legacy_root: Path, key_map: Mapping[str, str] | None) -> MigrationPlan:
    scan = scan_legacy(legacy_root)
    journals = _journals(store)
    jobs: list[PlannedJob] = []
    skipped = [s for s in scan.skipped if Path(s.where).name not in journals]
    for _week, entry in sorted(journals.items()):
        if entry.job.source.parent != legacy_root:
            skipped.append(
                SkippedSource(str(entry.job.source), "a migration from another legacy directory is half done")
            )
            continue
        held = store.find(entry.allocation_key)
        episode_id = held.episode_id if held is not None else str(_next_free(store, entry.job.week))
        jobs.append(PlannedJob(entry, episode_id, resume=True))
    for job in scan.jobs:
        if str(job.week) in journals:
            if journals[str(job.week)].job.source != job.source:
                reason = f"{job.week} has a half-done migration from {journals[str(job.week)].job.source}"
                skipped.append(SkippedSource(str(job.source), reason))
            continue
        key = (key_map or {}).get(str(job.week), f"{DEFAULT_KEY_PREFIX}{job.week}")
        try:
            held = store.find(key)
        except AllocationConflict as exc:
            skipped.append(SkippedSource(str(job.source), str(exc)))
            continue
        if held is not None:
            record = held.metadata.get(MIGRATION_KEY)
            origin = f", migrated from {record.get('source')}" if isinstance(record, dict) else ""
            skipped.append(
                SkippedSource(str(job.source), f"allocation key {key!r} is already held by {held.episode_id}{origin}")
            )
            continue
        jobs.append(PlannedJob(ManifestJob(job, key), str(_next_free(store, job.week)), resume=False))
    jobs.sort(key=lambda j: str(j.entry.job.week))
    return MigrationPlan(legacy_root, tuple(jobs), tuple(skipped), scan.history_sha256)


def apply_migration(
    store: FileEpisodeStore,
    legacy_root: Path,
    key_map: Mapping[str, str] | None = None,
    *,
    manifest_path: Path | None = None,
    echo: Callable[[str], None] = lambda line: None,
) -> MigrationResult:
    """Plan again under the migration lock, write the manifest, then migrate job by job."""
    from .. import __version__

    check_legacy_approvals(Path(legacy_root).absolute())  # bad input changes nothing, not even the lock
    if manifest_path is not None and manifest_path.exists() and plan_migration(store, legacy_root, key_map).jobs:
        raise InvalidIdentifier("manifest path", str(manifest_path), "exists already: a manifest is never overwritten")
    migrations = store.root / MIGRATIONS_DIR
    lock = StoreLock(str(migrations / ".lock"), 0)  # the store's lock policy: no link, a regular file
    with store.io_errors():
        _require_own_dirs(store)
        migrations.mkdir(parents=True, exist_ok=True)
    try:
        lock.acquire()
    except LockTimeout as exc:  # a TimeoutError, so outside io_errors, which would take it for I/O
        raise StoreUnavailable(f"another migration into {store.root} is running") from exc
    try:
        plan = plan_migration(store, legacy_root, key_map)
        result = MigrationResult(plan, skipped=list(plan.skipped))
        if not plan.jobs:
            return result
        stamp = utc_now().replace("-", "").replace(":", "")[:15]
        path = manifest_path or migrations / f"manifest-{stamp}Z-{secrets.token_hex(2)}.json"
        manifest = Manifest(
            created_at=utc_now(),
            legacy_root=str(plan.legacy_root),
            store=store.location,
            tool_version=__version__,
            history_sha256=plan.history_sha256,
            jobs=tuple(j.entry for j in plan.jobs),
            skipped=plan.skipped,
        )
        try:
            write_manifest(path.absolute(), manifest)
        except OSError as exc:
            raise StoreUnavailable(f"cannot write the manifest {path}: {exc.strerror or exc}") from exc
        result.manifest = path.absolute()
        echo(f"manifest: {result.manifest}")
        for planned in plan.jobs:
            source = str(planned.entry.job.source)
            try:
                episode, left = _migrate_one(store, planned, result.manifest, __version__)
            except MigrationError as exc:
                result.skipped.append(SkippedSource(source, str(exc)))
                continue
            except OSError as exc:
                # Resumable like a kill: the journal (if written) makes the next run pick it up.
                where = exc.filename or source
                result.skipped.append(SkippedSource(source, f"stopped at {where}: {exc.strerror or exc}"))
                continue
            result.migrated.append((str(planned.entry.job.week), episode.episode_id))
            echo(_done_line(planned, episode))
            if left:
                result.skipped.append(SkippedSource(source, f"left in place, not in the manifest: {', '.join(left)}"))
        return result
    finally:
        lock.release()


def _done_line(planned: PlannedJob, episode: Episode) -> str:
    job = planned.entry.job
    how = "resumed and migrated" if planned.resume else "migrated"
    return (
        f"{how} {job.week} -> {episode.episode_id} ({episode.status.value}): {counted(len(job.files), 'file')} moved, "
        f"{counted(len(job.remote_refs), 'remote reference')}, {counted(len(job.cost_records), 'cost record')}, "
        f"{decision_text(job)}"
    )


def decision_text(job: LegacyJob) -> str:
    """``approved by X at T`` or ``no decision``: what the migrated episode records."""
    if job.approval is None:
        return "no decision"
    return f"{job.approval.decision.value} by {job.approval.by} at {job.approval.at}"


def counted(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _migrate_one(
    store: FileEpisodeStore, planned: PlannedJob, manifest: Path, version: str
) -> tuple[Episode, list[str]]:
    """Migrate one job; returns its episode and any file found in the legacy directory that is not its own."""
    entry, job = planned.entry, planned.entry.job
    journal = _journal_dir(store) / f"{job.week}.json"
    if not planned.resume:
        journal.parent.mkdir(parents=True, exist_ok=True)
        fsync_dir(journal.parent.parent)
        write_durable(journal, entry.to_dict())
    try:
        episode = store.allocate(job.week, entry.allocation_key)
    except AllocationConflict as exc:
        if not planned.resume:
            journal.unlink(missing_ok=True)
        raise MigrationError(str(exc)) from exc
    record = episode.metadata.get(MIGRATION_KEY)
    foreign = isinstance(record, dict) and record.get("source") != str(job.source)
    if episode.reused and (foreign or (MIGRATION_KEY not in episode.metadata and not planned.resume)):
        if not planned.resume:
            journal.unlink(missing_ok=True)
        raise MigrationError(f"allocation key {entry.allocation_key!r} was taken by {episode.episode_id} meanwhile")
    dest = store.episode_dir(episode.id) / LEGACY_SUBDIR
    for file in job.files:
        _move(job.source / file.path, dest / file.path, file.sha256)
    _remove_leftovers(dest, keep={file.path for file in job.files})
    migration = {
        "source": str(job.source),
        "legacy_root": str(job.source.parent),
        "legacy_week": str(job.week),
        "episode_id": episode.episode_id,
        "week_id": episode.week_id,
        "sequence": episode.sequence,
        "allocation_key": entry.allocation_key,
        "migrated_at": utc_now(),
        "tool": TOOL,
        "tool_version": version,
        "manifest": str(manifest),
        "directory": LEGACY_SUBDIR,
        "files": {f.path: f.sha256 for f in job.files},
        "cost_total": cost_total(job.cost_records),
        "approval": None if job.approval is None else job.approval.to_dict(),
    }
    try:
        episode = store.update(episode.episode_id, lambda current: _with_legacy(current, job, migration))
    except DecisionConflict as exc:  # someone decided otherwise on the episode since it was allocated
        raise MigrationError(f"the legacy decision cannot be recorded: {exc}") from exc
    left = _remove_emptied(job.source)
    journal.unlink(missing_ok=True)
    fsync_dir(journal.parent)
    return episode, left


def _with_legacy(episode: Episode, job: LegacyJob, record: dict[str, Any]) -> Episode:
    """The episode with its legacy state, history entry, migration record, status and ledger."""
    if MIGRATION_KEY in episode.metadata:
        return episode
    if job.approval is not None:  # first: a rejection is refused once a submission moved
        legacy = job.approval
        episode = decided(episode, legacy.decision, by=legacy.by, via=VIA, comment=legacy.comment, at=legacy.at)
    status_text = str(job.state.get("status", "")).lower()
    refs = job.remote_refs
    sub = episode.submission
    if refs and sub.state is SubmissionState.NONE:
        note = f"migrated from {job.source}"
        sub = sub.moved_to(SubmissionState.SUBMITTING, episode_id=episode.episode_id, note=note, attempts=1)
        sub = sub.moved_to(SubmissionState.ACCEPTED, episode_id=episode.episode_id, note=note, remote_ref=refs[0].value)
        if job.finished:
            sub = sub.moved_to(SubmissionState.SUCCEEDED, episode_id=episode.episode_id, note=note)
        elif status_text in ("failed", "error"):
            sub = sub.moved_to(SubmissionState.FAILED, episode_id=episode.episode_id, note=note)
    sub = dataclasses.replace(sub, cost=cost_total(job.cost_records))
    if episode.status is EpisodeStatus.REJECTED:
        status = EpisodeStatus.REJECTED
    elif job.finished:
        status = EpisodeStatus.SUCCEEDED
    elif status_text in ("failed", "error"):
        status = EpisodeStatus.FAILED
    elif status_text in ("cancelled", "canceled"):
        status = EpisodeStatus.CANCELLED
    else:
        status = EpisodeStatus.RUNNING if refs else EpisodeStatus.ALLOCATED
    metadata = {
        **episode.metadata,
        LEGACY_STATE_KEY: dict(job.state),
        LEGACY_HISTORY_KEY: job.history_entry,
        MIGRATION_KEY: {**record, "submission_moves": len(sub.history)},
    }
    return dataclasses.replace(episode, status=status, submission=sub, metadata=metadata, updated_at=utc_now())


def _move(src: Path, dst: Path, sha256: str) -> None:
    """Move one file without rewriting it; a step already done is recognised, never redone."""
    if dst.exists():
        if sha256_file(dst)[0] != sha256:
            raise MigrationError(f"{dst} exists with other content than the manifest records")
        if os.path.lexists(src):
            # A copy across devices finished but the source was not yet removed.
            if sha256_file(src)[0] != sha256:
                raise MigrationError(f"{src} changed since the manifest was written")
            src.unlink()
            fsync_dir(src.parent)
        return
    if not os.path.lexists(src):
        raise MigrationError(f"{src} disappeared before it was moved (the manifest has its sha256)")
    _make_dirs(dst.parent)
    try:
        os.rename(src, dst)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        _copy_verify_delete(src, dst, sha256)
        return
    fsync_dir(dst.parent)
    fsync_dir(src.parent)


def _copy_verify_delete(src: Path, dst: Path, sha256: str) -> None:
    """Across file systems: copy to a temp name, fsync, verify the hash, rename, then delete the source."""
    tmp = dst.with_name(tmp_name(dst.name))
    shutil.copy2(src, tmp)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    if sha256_file(tmp)[0] != sha256:
        tmp.unlink()
        raise MigrationError(f"the copy of {src} does not match the manifest's sha256")
    os.rename(tmp, dst)
    fsync_dir(dst.parent)
    src.unlink()
    fsync_dir(src.parent)


def _make_dirs(path: Path) -> None:
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir()
        fsync_dir(directory.parent)


def _remove_leftovers(dest: Path, keep: set[str]) -> None:
    """Temp files of a copy that a kill interrupted; never a legacy file, whatever its name.

    A legacy job may own a file named like our temp files (an editor's ``.tmp-notes``): only names
    `tmp_name` makes that are not among the job's own files are removed.
    """
    if not dest.exists():
        return
    for dirpath, _dirs, files in os.walk(dest):
        for name in files:
            relative = Path(dirpath, name).relative_to(dest).as_posix()
            if _OUR_TMP.fullmatch(name) and relative not in keep:
                os.unlink(os.path.join(dirpath, name))


def _remove_emptied(source: Path) -> list[str]:
    """Remove the legacy week directory once every file left it; files added since stay, listed."""
    if not source.exists():
        return []
    left = []
    for dirpath, dirs, files in os.walk(source, topdown=False):
        left += [os.path.join(dirpath, name) for name in files]
        for name in dirs:
            try:
                os.rmdir(os.path.join(dirpath, name))
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
    if left:
        return sorted(left)
    os.rmdir(source)
    fsync_dir(source.parent)
    return []
