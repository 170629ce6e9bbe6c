"""`CheckEpisodesOperator`: a DAG verifies a week (or named episodes) before publishing it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from ._common import AirflowFailException, StoreOperator, refuse_empty_renderings, task_errors

if TYPE_CHECKING:
    from airflow.sdk import Context

    from ..record_rules import Problem

__all__ = ["CheckEpisodesOperator", "parse_episode_ids"]

#: A rendered list longer than this is not a list of episode ids (and is not parsed).
_MAX_RENDERED_LIST: Final = 1_000_000


def parse_episode_ids(raw: Any) -> list[str]:
    """The ids ``episode_ids`` names: a list (native rendering), a rendered list (``"['2026-W32-0',
    '2026-W32-1']"``, what ``{{ ti.xcom_pull('allocate') }}`` of a mapped task renders to, or JSON),
    or text with ids separated by commas or blanks. Anything else is a `ValueError` naming it.
    """
    if isinstance(raw, str):
        text = raw.strip()
        if text[:1] in "[(":
            items = _rendered_list(text)
        else:
            return [item for item in re.split(r"[\s,]+", text) if item]
    elif isinstance(raw, Sequence):
        items = list(raw)
    else:
        raise ValueError(f"is a {type(raw).__name__}, not a list of episode ids")
    bad = [item for item in items if not isinstance(item, str)]
    if bad:
        raise ValueError(f"item {bad[0]!r} is not an episode id")
    return [item.strip() for item in items]


def _rendered_list(text: str) -> list[Any]:
    """A list or tuple literal, as Python or JSON renders it; nothing else is evaluated."""
    import ast

    if len(text) > _MAX_RENDERED_LIST:
        raise ValueError(f"is {len(text)} characters long, not a list of episode ids")
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ValueError(f"{text[:80]!r} is neither a list of episode ids nor ids separated by commas") from None
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{text[:80]!r} is not a list of episode ids")
    return list(value)


class CheckEpisodesOperator(StoreOperator):
    """Run the read-only checker; any finding fails the task without retry, every finding logged.

    It never writes: a store that does not exist, or whose schema is older than this release's,
    fails the task without retry (nothing created or migrated; an allocation of this release does that).

    Returns the ids of the episodes it checked (an empty list when it checked the whole store).

    :param episode_ids: templated: one id, ids separated by commas or spaces, or a list
        (typically ``{{ ti.xcom_pull('allocate') }}``, a list when ``allocate`` is mapped). A
        template that renders empty, ``None``, ``null`` or an empty list fails the task.
    :param week: templated ``YYYY-Www``: check every episode of that week.
    :param manifest: templated path of a migration manifest: also check that nothing it lists was lost.
    :param require_episodes: with ``week``, an empty week is a failure (nothing to publish).
    :param max_reported: how many findings the failure message lists (all are logged).
    :param store: templated store URL (path, ``file://`` or ``postgresql://``).
    :param store_conn_id: a Connection naming the store.
    """

    template_fields: Sequence[str] = ("episode_ids", "week", "manifest", "store")
    ui_color = "#fdf1dc"

    def __init__(
        self,
        *,
        episode_ids: str | Sequence[str] | None = None,
        week: str | None = None,
        manifest: str | None = None,
        require_episodes: bool = True,
        max_reported: int = 20,
        store: str | None = None,
        store_conn_id: str | None = None,
        lock_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.episode_ids = episode_ids
        self.week = week
        self.manifest = manifest
        self.require_episodes = require_episodes
        self.max_reported = max_reported
        self.store = store
        self.store_conn_id = store_conn_id
        self.lock_timeout = lock_timeout
        # The templates as written, to name them when one renders nothing.
        self._templates = {field: getattr(self, field) for field in self.template_fields}

    def execute(self, context: Context) -> list[str]:
        with task_errors():
            refuse_empty_renderings(
                self.task_id, self._templates, {field: getattr(self, field) for field in self.template_fields}
            )
            problems, ids, where = self._check()
        scope = ", ".join(ids) if ids else "every episode"
        if not problems:
            self.log.info("check of %s in %s: no problems", scope, where)
            return ids
        for problem in problems:
            self.log.error("%s", problem)
        shown = [str(p) for p in problems[: self.max_reported]]
        if len(problems) > len(shown):
            shown.append(f"... and {len(problems) - len(shown)} more (see the log)")
        raise AirflowFailException(
            f"check of {scope} in {where} found {len(problems)} problem{'s' if len(problems) != 1 else ''}:\n"
            + "\n".join(shown)
        )

    def _requested_ids(self) -> list[str]:
        raw = self.episode_ids
        if raw is None:
            return []
        try:
            ids = parse_episode_ids(raw)
        except ValueError as exc:
            raise AirflowFailException(f"{self.task_id}: episode_ids {exc}") from None
        if not ids:
            template = self._templates.get("episode_ids")
            raise AirflowFailException(
                f"{self.task_id}: episode_ids rendered {raw!r} from {template!r}: no episode to verify"
            )
        return ids

    def _check(self) -> tuple[list[Problem], list[str], str]:
        from pathlib import Path

        from ..errors import StoreCorrupted, StoreMissing, StoreOutdated
        from ..identity import EpisodeId, WeekId
        from ..migration.manifest import load_manifest
        from ..store_check import check_store

        ids = [str(EpisodeId.parse(item)) for item in self._requested_ids()]
        week = WeekId.parse(self.week) if self.week else None
        manifest = load_manifest(Path(self.manifest)) if self.manifest else None
        store = self.hook.store
        try:
            try:
                # A checker never writes: no schema created, none migrated. Before publishing, a check
                # of the wrong (or an empty) database must fail loudly, not pass on "no episodes".
                store.require_existing()
            except (StoreMissing, StoreOutdated) as exc:
                raise AirflowFailException(f"{self.task_id}: nothing checked: {exc}") from exc
            if week is not None:
                try:
                    listed = [episode.episode_id for episode in store.list(week)]
                except StoreCorrupted as exc:
                    # The week cannot even be listed: check the whole store, so the damage is reported.
                    self.log.warning("week %s cannot be listed (%s): checking the whole store", week, exc)
                    return check_store(store, [], manifest), [], store.location
                ids += [i for i in listed if i not in ids]
                if not ids and self.require_episodes:
                    raise AirflowFailException(f"week {week} has no episodes in {store.location}: nothing to verify")
            return check_store(store, ids, manifest), ids, store.location
        finally:
            store.close()
