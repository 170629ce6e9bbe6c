"""The episodes the UI deployment starts with: several states across two weeks and two teams' DAGs.

Made through the store's own API and the ledger's legal moves (`Submission.moved_to`), so every
record is one the product could have written: the DAGs' episodes with the owner Airflow's operator
records (``owner=``), the rest as the CLI makes them. `seed` returns what was made, for assertions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
from dataclasses import dataclass, field
from typing import Any

from airflow_idempotent_jobs.effects import EffectLedger, EffectStateUnknown
from airflow_idempotent_jobs.episode import Episode, EpisodeStatus, SubmissionState
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.operations import Owner, owner_of
from airflow_idempotent_jobs.stores import EpisodeStore

ALPHA, BETA = "ij_ui_alpha", "ij_ui_beta"
#: The deployment's store: ``[idempotent_jobs] store_conn_id``; the page's commands name it so.
STORE_CONN_ID = "ij_store"
STORE_OPTION = f"--store-conn-id {STORE_CONN_ID}"
#: ``[idempotent_jobs] currency``: the page shows every cost and budget in it.
CURRENCY = "EUR"
#: team_a's DAG with a paid step that fails (e2e/dags_ui/ij_ui_alpha.py); it seeds nothing.
ALPHA_PAID = "ij_ui_alpha_paid"
#: team_a's DAG whose paid step pays a provider with neither tokens nor lookup (capability (c)): a lost
#: answer fails it for good until someone settles it (e2e/dags_ui/ij_ui_alpha.py); it seeds nothing.
ALPHA_SETTLE = "ij_ui_alpha_settle"
#: team_b's DAG that names ALPHA in its allocation keys (e2e/dags_ui/ij_ui_beta.py); it seeds nothing.
MIMIC = "ij_ui_beta_mimic"
#: The key of the migrated job: no DAG named, so only store-wide users see it.
MIGRATED_KEY = "legacy:weekly-media:job-17"
#: Stored text that would be markup, script or a reordering of the page if it were rendered as
#: anything but text (``window.__pwned`` set means it ran): the hostile episode's key (its run id
#: starts ``javascript:``), approver, comment, provider error, remote ref, history notes and metadata.
PWN = "<img src=x onerror=window.__pwned=1>"
HOSTILE_KEY = f'airflow:{ALPHA}:allocate:javascript:alert(1)//">{PWN}'
HOSTILE_TEXT = f'"><script>window.__pwned=2</script>{PWN}'
#: A right-to-left override: shown raw, "exe.txt" would read as "txt.exe".
RLO = "\u202e"
_S = SubmissionState


@dataclass
class Seeded:
    """What `seed` made: episode ids by owning DAG (None: no recorded owner), and the facts the page must show."""

    current: str
    previous: str
    by_dag: dict[str | None, list[str]] = field(default_factory=dict)
    #: Episode id -> cost of each succeeded submission.
    costs: dict[str, float] = field(default_factory=dict)
    #: Episodes that need attention (unknown, or submitting past the lease).
    attention: list[str] = field(default_factory=list)
    #: Episode id -> the reconcile command its attention item gives, where not the submission's.
    commands: dict[str, str] = field(default_factory=dict)
    #: Episode id -> approval decision recorded.
    decisions: dict[str, str] = field(default_factory=dict)
    #: The episode whose stored text is hostile (last week, ALPHA's).
    hostile: str = ""
    #: Allocated outside Airflow with a key naming ALPHA: no recorded owner, so store-wide only.
    outside: str = ""
    #: Allocated by BETA's task with a key naming ALPHA: BETA's, on BETA's page only.
    mimic: str = ""

    def command(self, episode_id: str, store_option: str = STORE_OPTION) -> str:
        """The reconcile command the page gives for ``episode_id``'s attention item (the deployment names
        its store by Connection: ``[idempotent_jobs] store_conn_id``)."""
        base = self.commands.get(episode_id, f"idempotent-jobs reconcile {episode_id}")
        return base.replace("idempotent-jobs ", f"idempotent-jobs {store_option} ", 1)

    def visible_to(self, dags: set[str | None]) -> list[str]:
        return sorted(eid for dag, ids in self.by_dag.items() if dag in dags for eid in ids)

    def spend(self, week: str, dags: set[str | None]) -> float:
        return sum(self.costs.get(eid, 0.0) for eid in self.visible_to(dags) if eid.startswith(week + "-"))


def _lost(token: str) -> None:
    raise ConnectionResetError("answer lost (seeded)")


def _key(dag_id: str, n: int, when: str) -> str:
    return f"airflow:{dag_id}:allocate:manual__{when}T0{n}:00:00+00:00"


def seed(store: EpisodeStore, now: dt.datetime | None = None) -> Seeded:
    """Fill ``store``: this week and last week, owned by ALPHA, BETA or nobody."""
    now = now or dt.datetime.now(dt.timezone.utc)
    current = WeekId.from_datetime(now)
    previous = WeekId.from_datetime(now - dt.timedelta(days=7))
    facts = Seeded(str(current), str(previous))
    day = now.date().isoformat()
    stale = (now - dt.timedelta(hours=2)).isoformat(timespec="microseconds")

    def allocate(week: WeekId, dag: str | None, key: str, owner: Owner | None = None) -> Episode:
        """As ``dag``'s operator would (its owner as the key names it, unless given), or as the CLI (no dag)."""
        if dag is not None and owner is None:
            named = owner_of(key)
            assert named is not None and named.dag_id == dag and named.run_id is not None, key
            owner = Owner.of_task(dag, named.task_id, named.run_id, named.map_index)
        episode = store.allocate(week, key, owner=owner)
        facts.by_dag.setdefault(dag, []).append(episode.episode_id)
        return episode

    def move(
        episode: Episode, *states: SubmissionState, status: EpisodeStatus, note: str = "seeded", **last: object
    ) -> None:
        """One update per ledger move: the PostgreSQL schema refuses a write that skips a state."""
        for n, state in enumerate(states):
            extra = dict(last) if n == len(states) - 1 else {}
            if state is _S.SUBMITTING:
                extra = {"claimed_by": "seed:1:x", "claimed_at": stale, "attempts": 1, **extra}

            def change(now_: Episode, state: SubmissionState = state, extra: dict[str, Any] = extra) -> Episode:
                submission = now_.submission.moved_to(state, episode_id=episode.episode_id, note=note, **extra)
                return dataclasses.replace(now_, status=status, submission=submission)

            store.update(episode.episode_id, change)

    def paid(episode: Episode, cost: float, ref: str) -> None:
        move(episode, _S.SUBMITTING, _S.ACCEPTED, status=EpisodeStatus.RUNNING, remote_ref=ref)
        move(episode, _S.SUCCEEDED, status=EpisodeStatus.SUCCEEDED, cost=cost, remote_state="succeeded")
        facts.costs[episode.episode_id] = cost

    # This week: ALPHA allocated / approved and paid / unknown; BETA stale claim / paid / rejected; migrated.
    allocate(current, ALPHA, _key(ALPHA, 1, day))
    approved = allocate(current, ALPHA, _key(ALPHA, 2, day))
    store.decide(approved.episode_id, "approved", by="carol", via="cli", comment="fine")
    facts.decisions[approved.episode_id] = "approved"
    paid(approved, 12.5, "job-a2")
    # Its effects: published, and a notification whose outcome was lost (needs attention).
    effects = EffectLedger(store)
    effects.run(approved.episode_id, "publish", lambda token: {"url": "https://cdn.example/a2"})
    with contextlib.suppress(EffectStateUnknown):
        effects.run(approved.episode_id, "notify:slack", _lost)
    lost = allocate(current, ALPHA, _key(ALPHA, 3, day))
    move(lost, _S.SUBMITTING, _S.UNKNOWN, status=EpisodeStatus.RUNNING, error="answer lost (seeded)")
    facts.attention.append(lost.episode_id)
    stuck = allocate(current, BETA, _key(BETA, 1, day))
    move(stuck, _S.SUBMITTING, status=EpisodeStatus.RUNNING)
    facts.attention.append(stuck.episode_id)
    facts.attention.append(approved.episode_id)
    facts.commands[approved.episode_id] = f"idempotent-jobs reconcile {approved.episode_id} --effect notify:slack"
    paid(allocate(current, BETA, _key(BETA, 2, day)), 30.0, "job-b2")
    rejected = allocate(current, BETA, _key(BETA, 3, day))
    store.decide(rejected.episode_id, "rejected", by="carol", via="cli", comment="too expensive")
    facts.decisions[rejected.episode_id] = "rejected"
    # BETA's task chose a key that names ALPHA: BETA's episode, shown on BETA's page, never ALPHA's.
    beta_task = Owner.of_task(BETA, "allocate", f"manual__{day}T07:00:00+00:00", None)
    facts.mimic = allocate(current, BETA, _key(ALPHA, 7, day), beta_task).episode_id
    migrated = allocate(current, None, MIGRATED_KEY)
    paid(migrated, 7.0, "legacy-17")
    store.update(
        migrated.episode_id,
        lambda e: dataclasses.replace(e, metadata={"migration": {"source": "jobs/job-17.json", "legacy_id": "17"}}),
    )
    # The key names ALPHA, but no operator recorded it (the CLI, the library): store-wide users only.
    facts.outside = allocate(current, None, _key(ALPHA, 6, day)).episode_id
    # Last week: ALPHA paid (a mapped task), BETA failed.
    paid(allocate(previous, ALPHA, _key(ALPHA, 4, day) + ":2"), 20.0, "job-a4")
    failed = allocate(previous, BETA, _key(BETA, 4, day))
    move(failed, _S.SUBMITTING, _S.FAILED, status=EpisodeStatus.FAILED, error="provider rejected (seeded)")
    hostile = allocate(previous, ALPHA, HOSTILE_KEY)
    store.decide(hostile.episode_id, "approved", by=HOSTILE_TEXT, via="cli", comment=HOSTILE_TEXT)
    facts.decisions[hostile.episode_id] = "approved"
    move(
        hostile,
        _S.SUBMITTING,
        _S.FAILED,
        status=EpisodeStatus.FAILED,
        note=f"{RLO}{HOSTILE_TEXT}",
        error=f"{HOSTILE_TEXT} exe.txt{RLO}",
        remote_ref="javascript:alert(3)",
    )
    store.update(
        hostile.episode_id,
        lambda e: dataclasses.replace(
            e, metadata={**e.metadata, "link": "javascript:alert(4)", "html": f"</pre>{HOSTILE_TEXT}{RLO}"}
        ),
    )
    facts.hostile = hostile.episode_id
    return facts


def lost_episode(store: EpisodeStore, week: str, dag: str) -> Episode:
    """A new episode of ``dag`` (owned as its operator records it) in ``week`` whose paid answer was
    lost (``unknown``), for the settle checks: each makes its own, so the seeded weeks stay as they are."""
    run_id = f"manual__settle_{os.urandom(4).hex()}"
    key = f"airflow:{dag}:allocate:{run_id}"
    episode = store.allocate(WeekId.parse(week), key, owner=Owner.of_task(dag, "allocate", run_id, -1))
    claim = {"claimed_by": "seed:1:x", "claimed_at": "2026-01-01T00:00:00+00:00", "token": f"tok-{run_id}"}
    for state, extra in ((_S.SUBMITTING, claim), (_S.UNKNOWN, {"error": "answer lost (seeded)"})):

        def change(now: Episode, state: SubmissionState = state, extra: dict[str, Any] = extra) -> Episode:
            submission = now.submission.moved_to(state, episode_id=episode.episode_id, note="seeded", **extra)
            return dataclasses.replace(now, status=EpisodeStatus.RUNNING, submission=submission)

        store.update(episode.episode_id, change)
    return store.get(episode.episode_id)


def big_week(store: EpisodeStore, week: str, count: int, dag: str = ALPHA) -> dict[str, Any]:
    """``count`` episodes of ``dag`` in ``week``, as its operator records them: every 100th (from
    1) lost its paid answer, every 100th from 2 is paid with a cost of its number. What was made."""
    run = "scheduled__bigweek"
    made: dict[str, Any] = {"unknown": [], "paid": {}, "tokens": {}}
    for n in range(count):
        run_id = f"{run}_{n:05d}"
        episode = store.allocate(
            WeekId.parse(week), f"airflow:{dag}:allocate:{run_id}", owner=Owner.of_task(dag, "allocate", run_id, -1)
        )
        if n % 100 not in (1, 2):
            continue
        token = f"tok-big-{n:05d}"
        made["tokens"][episode.episode_id] = token
        steps: list[tuple[SubmissionState, dict[str, Any]]] = [
            (_S.SUBMITTING, {"claimed_by": "seed:1:x", "claimed_at": "2026-01-01T00:00:00+00:00", "token": token})
        ]
        if n % 100 == 1:
            steps.append((_S.UNKNOWN, {"error": "answer lost (seeded)"}))
            made["unknown"].append(episode.episode_id)
        else:
            steps += [(_S.ACCEPTED, {"remote_ref": f"job-big-{n:05d}"}), (_S.SUCCEEDED, {"cost": float(n)})]
            made["paid"][episode.episode_id] = float(n)
        for state, extra in steps:
            status = EpisodeStatus.SUCCEEDED if state is _S.SUCCEEDED else EpisodeStatus.RUNNING

            def change(
                now: Episode,
                state: SubmissionState = state,
                extra: dict[str, Any] = extra,
                status: EpisodeStatus = status,
            ) -> Episode:
                submission = now.submission.moved_to(state, episode_id=now.episode_id, note="seeded", **extra)
                return dataclasses.replace(now, status=status, submission=submission)

            store.update(episode.episode_id, change)
    return made
