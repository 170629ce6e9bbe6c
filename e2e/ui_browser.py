"""``make e2e-ui``: the "Idempotent Jobs" page in a real headless Chromium, as three people use it.

Starts the deployment of e2e/ui_deployment.py (api-server with the plugin from the provider entry
point, a seeded PostgreSQL store, the simple auth manager in multi-team mode) and, for each of
``admin`` (every episode), ``alice`` (team_a's DAG) and ``bob`` (team_b's DAG), in a browser of
their own (e2e/browser.py):

1. the page before logging in sends them to Airflow's login page; they log in through its form;
2. "Idempotent Jobs" in Airflow's Browse menu opens the page inside Airflow's UI;
3. the week view shows exactly the episodes of the DAGs they may read (the other team's ids appear
   nowhere), each row's status, submission state and decision as the store holds them, spend
   against the budget, counts, the needs-attention list with the exact reconcile command (its
   "Copy" button fills the clipboard), and links to the task instances in Airflow's UI;
   previous/next move between the seeded weeks;
4. the episode view shows the full record (equal to the store's), the submission history, the
   approval and the migration record, and no week link that leads nowhere; an episode of the
   other team is "not found".

Then an api-server whose store refuses connections: the page says so in one line, no secret shown.
Last, one of team_b's records made unreadable: admin sees the rest of the week and the record named
above the totals; alice sees her rows and no trace of it.
Expected values come from the seed's facts and the store read through the library. A screenshot of
every page goes to the work dir; ``--docs`` also copies the week and episode views to docs/img/.
Exit 0 only if every check held; always stops what it started.

Run: ``.venv/bin/python -m e2e.ui_browser [--keep] [--docs]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sys
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from urllib.parse import quote, urlsplit

import psycopg

from airflow_idempotent_jobs.episode import Episode, EpisodeStatus
from airflow_idempotent_jobs.operations import episode_owner
from airflow_idempotent_jobs.stores import open_store
from e2e.airflow_rest import AirflowRest
from e2e.browser import Browser, BrowserError
from e2e.deployment import REPO, free_port
from e2e.results import Results, run_deployed
from e2e.ui_deployment import ADMIN, ALICE, BOB, BUDGET, CAROL, READABLE, UiDeployment
from e2e.ui_seed import (
    ALPHA,
    ALPHA_PAID,
    ALPHA_SETTLE,
    BETA,
    CURRENCY,
    HOSTILE_KEY,
    HOSTILE_TEXT,
    PWN,
    RLO,
    Seeded,
    big_week,
    lost_episode,
)

DOCS_IMG = REPO / "docs" / "img"
#: Whose episode view each user opens (the owning DAG, or None for the migrated job).
EPISODE_OF = {ADMIN: None, ALICE: ALPHA, BOB: BETA}
#: A password only the store-down server's URL holds; no page may show it.
DOWN_SECRET = "s3cret-" + "e2e"


#: Visible links whose href is the placeholder '#' (a control shown where it cannot work).
DEAD_LINKS = (
    "[...document.querySelectorAll('a')].filter(a => a.getAttribute('href') === '#' && a.offsetParent !== null)"
    ".map(a => a.innerText.trim())"
)


def say(text: str) -> None:
    print(f"[e2e-ui {time.strftime('%H:%M:%S')}] {text}", flush=True)


@dataclass
class Expected:
    """What one user must see, from the seed's facts and the store (never from the page's API)."""

    seeded: Seeded
    records: dict[str, Episode]
    dags: set[str | None]

    def week(self, week: str) -> list[str]:
        return [eid for eid in self.seeded.visible_to(self.dags) if self.records[eid].week_id == week]

    def hidden(self) -> list[str]:
        return sorted(set(self.records) - set(self.seeded.visible_to(self.dags)))

    def cells(self, eid: str) -> list[str]:
        """Status, submission state and decision, as the row's 2nd, 3rd and 6th cells show them."""
        episode = self.records[eid]
        return [episode.status.value, episode.submission.state.value, self.seeded.decisions.get(eid, "")]

    def counts_line(self, week: str) -> str:
        statuses = Counter(self.records[eid].status.value for eid in self.week(week))
        return ", ".join(f"{s.value} {statuses[s.value]}" for s in EpisodeStatus if statuses[s.value])


def task_instance_href(api_url: str, episode: Episode) -> str | None:
    """Airflow's task instance page of the episode's owner (recorded, else the key's), None without one."""
    owner, _ = episode_owner(episode)
    if owner is None:
        return None
    dag = f"{api_url}/dags/{quote(owner.dag_id, safe='')}"
    if owner.run_id is None:
        return dag
    tail = "" if owner.map_index is None else f"/mapped/{owner.map_index}"
    return f"{dag}/runs/{quote(owner.run_id, safe='')}/tasks/{quote(owner.task_id, safe='')}{tail}"


class UserChecks:
    """One user's walk through the page, in their own browser."""

    def __init__(self, ui: UiDeployment, out: Results, user: str, expected: Expected, shots: Path) -> None:
        self.ui, self.out, self.user, self.expected, self.shots = ui, out, user, expected, shots
        self.seeded = expected.seeded

    def check(self, name: str, held: bool, seen: object) -> None:
        self.out.expect(f"[{self.user}] {name}", held, seen)

    def run(self, browser: Browser) -> None:
        self.login(browser)
        self.navigation(browser)
        self.week(browser)
        self.previous_next(browser)
        self.episode(browser)
        self.other_team(browser)
        self.hostile(browser)
        self.check("the page threw no script error", not browser.page_errors, browser.page_errors or "none")

    def login(self, browser: Browser) -> None:
        browser.goto(self.ui.page_url)
        browser.wait_until("Airflow's login form", "document.querySelector('input[name=password]')")
        self.check(
            "anonymous: the page sends to Airflow's login page",
            urlsplit(browser.url).path == "/auth/login",
            browser.url,
        )
        browser.type_into("input[name=username]", self.user)
        browser.type_into("input[name=password]", self.ui.passwords[self.user])
        browser.click("button[type=submit]")
        browser.wait_until("the login to finish", "location.pathname !== '/auth/login'")
        self.check("logged in through the login form", "/auth/login" not in browser.url, browser.url)

    def navigation(self, browser: Browser) -> None:
        browser.goto(self.ui.api_url + "/")
        browser.wait_until("Airflow's navigation", "document.querySelector('button[aria-label=Browse]')")
        browser.click("button[aria-label=Browse]")
        browser.wait_until("the Browse menu", _has_text("[role=menuitem]", "Idempotent Jobs"))
        browser.click_text("[role=menuitem]", "Idempotent Jobs")
        browser.wait_until(
            "the plugin's frame",
            "document.querySelector('iframe')?.contentDocument?.querySelector('#week-id')?.textContent",
        )
        frame = browser.evaluate(
            "(() => { const f = document.querySelector('iframe'); return {src: f.src, title: f.title,"
            " week: f.contentDocument.querySelector('#week-id').textContent}; })()"
        )
        self.check(
            "Browse > Idempotent Jobs opens the page inside Airflow's UI, on the current week",
            # Airflow mirrors the frame's path after its route (/plugin/idempotent-jobs/idempotent-jobs/).
            urlsplit(browser.url).path.startswith("/plugin/idempotent-jobs")
            and frame["src"] == self.ui.page_url
            and frame["week"] == self.seeded.current,
            {"url": browser.url, **frame},
        )
        browser.screenshot(self.shots / f"{self.user}-0-navigation.png")
        previous = self.seeded.previous
        browser.goto(f"{self.ui.api_url}/plugin/idempotent-jobs/idempotent-jobs/?week={previous}")
        frame_week = "document.querySelector('iframe')?.contentDocument?.querySelector('#week-id')?.textContent"
        browser.wait_until("the framed page", frame_week)
        self.check("a link into the framed page keeps its week", browser.evaluate(frame_week) == previous, previous)

    def open_week(self, browser: Browser, url: str) -> None:
        browser.goto(url)
        browser.wait_until(
            "the week view", "!document.querySelector('#week-view').hidden || !document.querySelector('#error').hidden"
        )

    def week(self, browser: Browser) -> None:
        current = self.seeded.current
        self.open_week(browser, self.ui.page_url)
        self.check(
            "the default week is the current ISO week", browser.text("#week-id") == current, browser.text("#week-id")
        )
        rows = browser.evaluate(
            "[...document.querySelectorAll('#episodes tbody tr')].map(tr => ({id: tr.dataset.episodeId,"
            " cells: [...tr.cells].map(td => td.innerText.trim()),"
            " owner: tr.querySelector('a.owner')?.href ?? null, episode: tr.querySelector('a.episode')?.href,"
            " marked: tr.querySelector('.owner-source')?.innerText ?? null}))"
        )
        by_id = {row["id"]: row for row in rows}
        want = self.expected.week(current)
        self.check("rows: exactly the episodes of the DAGs this user may read", sorted(by_id) == want, sorted(by_id))
        shown = {eid: [row["cells"][i] for i in (1, 2, 5)] for eid, row in by_id.items()}
        self.check(
            "each row's status, submission state and decision are the store's",
            shown == {eid: self.expected.cells(eid) for eid in want},
            shown,
        )
        body = browser.text()
        leaked = [eid for eid in self.expected.hidden() if eid in body]
        self.check("no episode of a DAG this user may not read appears anywhere", not leaked, leaked or "none")
        spend = f"{self.seeded.spend(current, self.expected.dags):.2f} {CURRENCY}"
        totals = (browser.text("#spend"), browser.text("#budget"))
        self.check(
            "spend this week against the weekly budget, in [idempotent_jobs] currency",
            totals == (spend, f"of {BUDGET:.2f} {CURRENCY} budget"),
            totals,
        )
        counts = browser.text("#counts p[data-kind=status] span")
        self.check("counts per status", counts == self.expected.counts_line(current), counts)
        by_dag = browser.evaluate(
            "Object.fromEntries([...document.querySelectorAll('#by-dag tbody tr')].map(tr =>"
            " [tr.dataset.dagId, tr.cells[2].innerText.split(' ')[0]]))"
        )
        want_by_dag = {
            dag or "": f"{self.seeded.spend(current, {dag}):.2f}"
            for dag in self.expected.dags
            if any(self.expected.records[e].week_id == current for e in self.seeded.by_dag.get(dag, []))
        }
        self.check("spend by DAG: each DAG this user may read, its spend this week", by_dag == want_by_dag, by_dag)
        stuck = sorted(set(self.seeded.attention) & set(want))
        commands = browser.evaluate(
            "Object.fromEntries([...document.querySelectorAll('#attention-list li')].map(li =>"
            " [li.dataset.episodeId, li.querySelector('code.command')?.textContent]))"
        )
        self.check(
            "needs attention: each stuck episode with its exact reconcile command",
            commands == {eid: self.seeded.command(eid) for eid in stuck},
            commands,
        )
        lookups = browser.evaluate(
            "Object.fromEntries([...document.querySelectorAll('#attention-list li')].filter(li =>"
            " li.querySelector('.lookup')).map(li => [li.dataset.episodeId,"
            " [li.querySelector('code.token').textContent, li.querySelector('code.lookup-command').textContent]]))"
        )
        paid_stuck = [eid for eid in stuck if "--effect" not in self.seeded.command(eid)]
        want_lookups = {
            eid: [
                self.expected.records[eid].submission.token or "(none recorded)",
                f"{self.seeded.command(eid)} --provider-url PROVIDER_URL",
            ]
            for eid in paid_stuck
        }
        self.check(
            "a stuck submission shows its token and the lookup command, the store named by its connection id",
            lookups == want_lookups,
            lookups,
        )
        if stuck:
            browser.grant_clipboard()
            browser.click(f"#attention-list li[data-episode-id={json.dumps(stuck[0])}] button.copy")
            copied = browser.evaluate("navigator.clipboard.readText()")
            self.check("'Copy' puts the reconcile command on the clipboard", copied == commands.get(stuck[0]), copied)
        links = {eid: by_id[eid]["owner"] for eid in want if eid in by_id}
        expected_links = {eid: task_instance_href(self.ui.api_url, self.expected.records[eid]) for eid in want}
        self.check("each owned row links to its task instance in Airflow's UI", links == expected_links, links)
        marked = sorted(eid for eid in want if eid in by_id and by_id[eid]["marked"])
        from_key = sorted(eid for eid in want if episode_owner(self.expected.records[eid])[1] == "key")
        self.check(
            "an owner read from the key (none recorded) is marked so; a recorded one is not",
            marked == from_key and all("not recorded" in by_id[eid]["marked"] for eid in marked),
            marked,
        )
        browser.screenshot(self.shots / f"{self.user}-1-week.png")

    def previous_next(self, browser: Browser) -> None:
        browser.click("#previous-week")
        previous = self.seeded.previous
        browser.wait_until(
            "the previous week", f"document.querySelector('#week-id')?.textContent === {json.dumps(previous)}"
        )
        ids = browser.evaluate("[...document.querySelectorAll('#episodes tbody tr')].map(tr => tr.dataset.episodeId)")
        self.check(
            "'previous' shows last week and its episodes",
            f"week={previous}" in browser.url and sorted(ids) == self.expected.week(previous),
            {"url": browser.url, "rows": ids},
        )
        browser.screenshot(self.shots / f"{self.user}-2-previous-week.png")
        browser.click("#next-week")
        current = self.seeded.current
        browser.wait_until(
            "the next week", f"document.querySelector('#week-id')?.textContent === {json.dumps(current)}"
        )
        self.check("'next' comes back to this week", f"week={current}" in browser.url, browser.url)
        weeks = browser.evaluate(
            "Object.fromEntries([...document.querySelectorAll('#weeks tbody tr')].map(tr =>"
            " [tr.dataset.weekId, tr.cells[1].innerText]))"
        )
        want = {week: str(len(self.expected.week(week))) for week in (current, previous)}
        self.check(
            "recent weeks list both weeks with their episode counts", {w: weeks.get(w) for w in want} == want, weeks
        )
        bars = browser.evaluate("[...document.querySelectorAll('#spend-chart rect title')].map(t => t.textContent)")
        self.check(
            "the spend chart has one bar per listed week with episodes, with its spend",
            len(bars) == len([w for w, n in weeks.items() if n != "0"])
            and any(b.startswith(f"{current}: {self.seeded.spend(current, self.expected.dags):.2f}") for b in bars),
            bars,
        )

    def episode(self, browser: Browser) -> None:
        dag = EPISODE_OF[self.user]
        eid = next(e for e in self.seeded.by_dag[dag] if self.expected.records[e].week_id == self.seeded.current)
        if self.user == ALICE:  # the approved, paid one: approval and two submission steps
            eid = next(e for e in self.seeded.decisions if e in self.seeded.by_dag[ALPHA])
        browser.click(f"#episodes tr[data-episode-id={json.dumps(eid)}] a.episode")
        browser.wait_until(
            "the episode view",
            "!document.querySelector('#episode-view').hidden || !document.querySelector('#error').hidden",
        )
        record = self.expected.records[eid]
        self.check(
            f"clicking {eid} opens its episode view",
            urlsplit(browser.url).path == f"/idempotent-jobs/episodes/{eid}" and browser.text("#episode-id") == eid,
            browser.url,
        )
        shown = json.loads(browser.text("#record") or "null")
        self.check(
            "the full record shown equals the store's",
            shown == record.to_dict(),
            "equal" if shown == record.to_dict() else shown,
        )
        history = browser.evaluate(
            "[...document.querySelectorAll('#submission-history tbody tr')]"
            ".map(tr => [...tr.cells].map(td => td.innerText))"
        )
        want_history = [
            [h.get("from") or "", h.get("to") or "", h.get("note") or ""]
            for h in record.to_dict()["submission"]["history"]
        ]
        self.check("the submission history, step by step", [h[1:4] for h in history] == want_history, history)
        effects = browser.evaluate(
            "[...document.querySelectorAll('#effects tbody tr')].map(tr => [...tr.cells].map(td => td.innerText))"
        )
        want_effects = [[name, e.state.value, str(e.attempts)] for name, e in sorted(record.effects.items())]
        self.check(
            "the effects: name, state and attempts of each, as the store has them",
            [row[:3] for row in effects] == want_effects,
            effects,
        )
        approval = _definitions(browser, "#approval")
        decision = record.approval.decision.value if record.approval.decision else "none"
        self.check(
            "the approval: decision, by, comment",
            approval.get("Decision") == decision and approval.get("By") == (record.approval.by or ""),
            approval,
        )
        dead = browser.evaluate(DEAD_LINKS)
        self.check("the episode view shows no link that leads nowhere (href '#')", not dead, dead or "none")
        if dag is None:
            metadata = json.loads(browser.text("#metadata"))
            self.check("the migration record", metadata.get("migration", {}).get("legacy_id") == "17", metadata)
        browser.screenshot(self.shots / f"{self.user}-3-episode.png")

    def other_team(self, browser: Browser) -> None:
        hidden = self.expected.hidden()
        if not hidden:
            return
        eid = hidden[0]
        browser.goto(f"{self.ui.page_url}episodes/{eid}")
        browser.wait_until(
            "an answer", "!document.querySelector('#error').hidden || !document.querySelector('#episode-view').hidden"
        )
        error = browser.text("#error")
        self.check(
            f"another team's episode {eid} is not found",
            error.startswith("Error 404") and not browser.text("#record"),
            error,
        )

    def hostile(self, browser: Browser) -> None:
        """Stored markup, script, ``javascript:`` and a right-to-left override stay inert, visible text."""
        eid = self.seeded.hostile
        if eid in self.expected.hidden():
            return
        self.open_week(browser, f"{self.ui.page_url}?week={self.seeded.previous}")
        row = browser.evaluate(
            f"(() => {{ const tr = document.querySelector('#episodes tr[data-episode-id={json.dumps(eid)}]');"
            " const a = tr.querySelector('a.owner'); return {cells: [...tr.cells].map(td => td.innerText),"
            " origin: new URL(a.href).origin, path: new URL(a.href).pathname}; })()"
        )
        self.check(
            "hostile text in a row is shown as text; the owner link stays in Airflow's UI",
            row["cells"][3] == "javascript:alert(3)"
            and row["origin"] == self.ui.api_url
            and row["path"].startswith(f"/dags/{ALPHA}/runs/javascript%3Aalert(1)%2F%2F%22%3E%3Cimg")
            and row["cells"][8].startswith(f'{ALPHA} / javascript:alert(1)//">{PWN}'),
            row,
        )
        browser.click(f"#episodes tr[data-episode-id={json.dumps(eid)}] a.episode")
        browser.wait_until("the hostile episode", "!document.querySelector('#episode-view').hidden")
        record = self.expected.records[eid]
        summary, approval = _definitions(browser, "#episode-summary"), _definitions(browser, "#approval")
        notes = browser.evaluate(
            "[...document.querySelectorAll('#submission-history tbody tr')].map(tr => tr.cells[3].innerText)"
        )
        escaped = RLO.encode("unicode_escape").decode()  # the six characters \u202e
        self.check(
            "hostile text in the episode view is text; the override is shown escaped, as the CLI shows it",
            approval.get("By") == HOSTILE_TEXT
            and approval.get("Comment") == HOSTILE_TEXT
            and summary.get("Error") == f"{HOSTILE_TEXT} exe.txt{escaped}"
            and summary.get("Allocation key") == HOSTILE_KEY
            and notes == [f"{escaped}{HOSTILE_TEXT}"] * 2,
            {"summary": summary, "approval": approval, "notes": notes},
        )
        shown = json.loads(browser.text("#record") or "null")
        self.check("the hostile record still parses to the store's", shown == record.to_dict(), shown)
        overrides = browser.text().count(RLO)
        self.check("no right-to-left override reaches the screen", overrides == 0, f"{overrides} found")
        self.inert(browser, "the hostile episode")
        browser.goto(f"{self.ui.page_url}?week={quote(PWN, safe='')}")
        browser.wait_until("an answer", "!document.querySelector('#error').hidden")
        error = browser.text("#error")
        self.check("a hostile ?week= is a 400 shown as text", error.startswith("Error 400"), error)
        self.inert(browser, "a hostile ?week=")

    def inert(self, browser: Browser, where: str) -> None:
        found = browser.evaluate(
            "({pwned: window.__pwned ?? null, imgs: document.querySelectorAll('img').length,"
            " scripts: [...document.scripts].map(s => new URL(s.src || 'inline:', location.href).pathname)})"
        )
        self.check(
            f"{where}: no stored markup became an element, no script ran",
            found == {"pwned": None, "imgs": 0, "scripts": ["/idempotent-jobs/static/app.js"]},
            found,
        )


def _has_text(selector: str, text: str) -> str:
    return (
        f"[...document.querySelectorAll({json.dumps(selector)})].some(e => e.innerText.trim() === {json.dumps(text)})"
    )


def _definitions(browser: Browser, selector: str) -> dict[str, str]:
    script = (
        f"Object.fromEntries([...document.querySelectorAll({json.dumps(selector + ' dt')})]"
        ".map(dt => [dt.innerText.trim(), dt.nextElementSibling.innerText.trim()]))"
    )
    return dict(browser.evaluate(script))


def store_down(ui: UiDeployment, out: Results, url: str, shots: Path) -> None:
    """The page of an api-server whose store refuses connections: one line, the secret not shown."""
    with Browser(ui.workdir, "store-down") as browser:
        browser.goto(f"{url}/auth/login?next={quote(url + '/idempotent-jobs/', safe='')}")
        browser.wait_until("Airflow's login form", "document.querySelector('input[name=password]')")
        browser.type_into("input[name=username]", ADMIN)
        browser.type_into("input[name=password]", ui.passwords[ADMIN])
        browser.click("button[type=submit]")
        browser.wait_until("the login to finish", "location.pathname !== '/auth/login'")
        browser.goto(f"{url}/idempotent-jobs/")
        browser.wait_until(
            "an answer", "!document.querySelector('#error').hidden || !document.querySelector('#week-view').hidden"
        )
        error, body, dead = browser.text("#error"), browser.text(), browser.evaluate(DEAD_LINKS)
        out.expect("[store down] no link that leads nowhere (href '#')", not dead, dead or "none")
        out.expect(
            "[store down] the page shows the store's 503 in one line, no password",
            error.startswith("Error 503") and "\n" not in error.strip() and DOWN_SECRET not in body,
            error,
        )
        browser.screenshot(shots / "admin-4-store-down.png")


def damaged_record(ui: UiDeployment, out: Results, seeded: Seeded, shots: Path) -> None:
    """One of BETA's records made unreadable: admin sees the week with it named; alice sees her rows, no trace."""
    damaged = next(eid for eid in seeded.by_dag[BETA] if eid.startswith(seeded.current + "-"))
    with psycopg.connect(ui.store_url, autocommit=True) as conn:
        sql = "UPDATE idempotent_jobs.episodes SET metadata = %s::jsonb WHERE episode_id = %s"
        (before,) = conn.execute(
            "SELECT metadata::text FROM idempotent_jobs.episodes WHERE episode_id = %s", (damaged,)
        ).fetchone() or (None,)
        conn.execute(sql, ('{"x": 1e999}', damaged))
        try:
            for user in (ADMIN, ALICE):
                with Browser(ui.workdir, f"damaged-{user}") as browser:
                    _log_in(browser, ui, user)
                    browser.goto(ui.page_url)
                    browser.wait_until(
                        "an answer",
                        "!document.querySelector('#week-view').hidden || !document.querySelector('#error').hidden",
                    )
                    rows = browser.evaluate(
                        "[...document.querySelectorAll('#episodes tbody tr')].map(tr => tr.dataset.episodeId)"
                    )
                    named = browser.evaluate(
                        "[...document.querySelectorAll('#damaged-list li')].map(li => li.dataset.episodeId)"
                    )
                    note, shown = (
                        browser.text("#damaged-note"),
                        not browser.evaluate("document.querySelector('#damaged').hidden"),
                    )
                    want = sorted(e for e in seeded.visible_to(READABLE[user]) if e.startswith(seeded.current + "-"))
                    rest = sorted(e for e in want if e != damaged)
                    if user == ADMIN:
                        held = (
                            sorted(rows) == rest
                            and named == [damaged]
                            and shown
                            and "leave out 1 damaged record" in note
                        )
                    else:
                        held = sorted(rows) == rest and not shown and damaged not in browser.text()
                    out.expect(
                        f"[{user}] a damaged record: the week is shown"
                        + (", the record named above the totals" if user == ADMIN else ", no trace of the record"),
                        held,
                        {"rows": rows, "named": named, "note": note},
                    )
                    browser.screenshot(shots / f"{user}-5-damaged-record.png")
        finally:
            conn.execute(sql, (before, damaged))


#: The week the settle walk's own lost episodes are in: far from the seeded weeks the users walk.
SETTLE_WEEK = "2025-W10"


def settle_from_the_page(ui: UiDeployment, out: Results, shots: Path) -> None:
    """A viewer sees no control; the team's editor settles an unknown submission in the dialog, and the
    record says who, how and why; a POST from the page's own session without the CSRF header is refused."""
    with contextlib.closing(open_store(ui.store_url)) as store:
        eid = lost_episode(store, SETTLE_WEEK, ALPHA).episode_id
    url = f"{ui.page_url}episodes/{eid}"
    episode_loaded = "!document.querySelector('#episode-view').hidden || !document.querySelector('#error').hidden"
    with Browser(ui.workdir, f"{ALICE}-settle") as browser:
        _log_in(browser, ui, ALICE)
        browser.goto(url)
        browser.wait_until("the episode view", episode_loaded)
        out.expect(
            "[alice, a viewer of its DAG] the episode needs attention and offers no settle control",
            browser.evaluate("document.querySelector('#settle-open').hidden") is True
            and not browser.evaluate("document.querySelector('#episode-attention').hidden"),
            browser.text("#episode-attention"),
        )
    with Browser(ui.workdir, f"{CAROL}-settle") as browser:
        _log_in(browser, ui, CAROL)
        browser.goto(url)
        browser.wait_until("the episode view", episode_loaded)
        bare = browser.evaluate(
            f"fetch({json.dumps(f'/idempotent-jobs/api/episodes/{eid}/settle')}, {{method: 'POST', credentials:"
            " 'same-origin', headers: {'Content-Type': 'application/json'}, body: JSON.stringify({answer:"
            " 'not_submitted', comment: 'forged'})}).then(r => r.status)"
        )
        out.expect("[carol] a POST with the session's cookie but no CSRF header is refused", bare == 403, bare)
        browser.click("#settle-open")
        browser.wait_until("the settle dialog", "document.querySelector('#settle-dialog').open")
        browser.click("input[name=answer][value=not_submitted]")
        browser.type_into("#settle-comment", "no job in the provider's console for this token")
        meaning = browser.text("#settle-dialog")
        browser.screenshot(shots / f"{CAROL}-settle-dialog.png")
        out.expect(
            "[carol] the dialog says what each answer means for payment",
            "pays for nothing more" in meaning and "submits once" in meaning,
            meaning,
        )
        browser.click("#settle-confirm")
        browser.wait_until(
            "the settled episode",
            "!document.querySelector('#settle-dialog').open && document.querySelector('#settle-open').hidden",
        )
        browser.screenshot(shots / f"{CAROL}-settled.png")
    with contextlib.closing(open_store(ui.store_url)) as store:
        sub = store.get(eid).submission
    last = sub.history[-1]
    out.expect(
        "[carol, an editor of its DAG] settled it in the dialog: not submitted, by carol, via ui, with the comment",
        (sub.state.value, sub.settled_by, last.get("via"), last.get("comment"))
        == ("none", CAROL, "ui", "no job in the provider's console for this token"),
        {"state": sub.state.value, "settled_by": sub.settled_by, "last history entry": last},
    )


#: A week of BIG_WEEK_SIZE episodes for the filter, search, sort and page checks.
BIG_WEEK, BIG_WEEK_SIZE = "2025-W20", 5_000
ROWS = "[...document.querySelectorAll('#episodes tbody tr')].map(tr => [...tr.cells].map(td => td.innerText))"


def filters_search_sort_pages(ui: UiDeployment, out: Results, shots: Path) -> None:
    """A week of 5 000 episodes: one page of 100 rows, filtered, searched, sorted and paged in the browser."""
    started = time.monotonic()
    with contextlib.closing(open_store(ui.store_url)) as store:
        made = big_week(store, BIG_WEEK, BIG_WEEK_SIZE)
    say(f"seeded a week of {BIG_WEEK_SIZE} episodes in {time.monotonic() - started:.0f}s")
    week_loaded = "!document.querySelector('#week-view').hidden || !document.querySelector('#error').hidden"
    with Browser(ui.workdir, f"{ADMIN}-big-week") as browser:
        _log_in(browser, ui, ADMIN)

        def open_week(query: str) -> float:
            started = time.monotonic()
            browser.goto(f"{ui.page_url}?week={BIG_WEEK}{query}")
            browser.wait_until("the big week", week_loaded)
            return time.monotonic() - started

        seconds = open_week("")
        rows = browser.evaluate(ROWS)
        info = browser.text("#page-info")
        out.expect(
            f"[big week] {BIG_WEEK_SIZE} episodes: the first page of 100 rows in episode order ({seconds:.1f} s)",
            len(rows) == 100
            and rows[0][0] == f"{BIG_WEEK}-0"
            and rows[99][0] == f"{BIG_WEEK}-99"
            and info == f"1-100 of {BIG_WEEK_SIZE} matching ({BIG_WEEK_SIZE} this week), page 1 of 50",
            {"info": info, "first": rows[:1], "last": rows[-1:]},
        )
        browser.click("#page-next")
        browser.wait_until("page 2", "document.querySelector('#page-info').innerText.startsWith('101-200')")
        rows = browser.evaluate(ROWS)
        out.expect("[big week] the next page: rows 101-200", [r[0] for r in rows[:1]] == [f"{BIG_WEEK}-100"], rows[:1])
        open_week("")
        browser.evaluate("document.querySelector('#filters select[name=submission]').value = 'unknown'")
        browser.click("#filters button[type=submit]")
        browser.wait_until("the filter", "new URLSearchParams(location.search).get('submission') === 'unknown'")
        browser.wait_until("the filtered rows", week_loaded)
        rows = browser.evaluate(ROWS)
        out.expect(
            "[big week] submission = unknown: exactly the lost ones",
            sorted(r[0] for r in rows) == sorted(made["unknown"]) and all(r[2] == "unknown" for r in rows),
            {"rows": len(rows), "info": browser.text("#page-info")},
        )
        browser.screenshot(shots / f"{ADMIN}-6-big-week-filtered.png")
        eid, token = next(iter(made["tokens"].items()))
        open_week(f"&q={quote(token.upper())}")
        rows = browser.evaluate(ROWS)
        out.expect(
            f"[big week] a search by token (any case) finds its episode {eid}", [r[0] for r in rows] == [eid], rows
        )
        open_week("")
        browser.click("#episodes th[data-sort=cost]")  # ascending
        browser.wait_until("sorted by cost", "new URLSearchParams(location.search).get('sort') === 'cost'")
        browser.wait_until("the sorted rows", week_loaded)
        browser.click("#episodes th[data-sort=cost]")  # then descending
        browser.wait_until("descending", "new URLSearchParams(location.search).get('order') === 'desc'")
        browser.wait_until("the sorted rows", week_loaded)
        rows = browser.evaluate(ROWS)
        top = max(made["paid"], key=made["paid"].get)
        out.expect(
            "[big week] a click on Cost, then again: the dearest first",
            rows[0][0] == top
            and browser.evaluate("document.querySelector('th[data-sort=cost]').ariaSort") == "descending",
            rows[:3],
        )


def airflow_state(ui: UiDeployment, out: Results, shots: Path) -> None:
    """A real run whose paid task failed: the episode view shows the run's and the paid task's states,
    as Airflow's REST API has them for the user, and links to that try's log."""
    rest = AirflowRest(ui.api_url, ADMIN, ui.passwords[ADMIN])
    rest.login()
    run = rest._call("POST", f"/api/v2/dags/{ALPHA_PAID}/dagRuns", {"logical_date": "2020-03-11T00:00:00Z", "conf": {}})
    run_id = str(run["dag_run_id"])
    state = rest.wait_for_run(ALPHA_PAID, run_id, timeout=180)
    generate = rest.task_instance(ALPHA_PAID, run_id, "generate")
    with contextlib.closing(open_store(ui.store_url)) as store:
        (episode,) = [
            e for e in store.list("2020-W11") if e.allocation_key == f"airflow:{ALPHA_PAID}:allocate:{run_id}"
        ]
    with Browser(ui.workdir, f"{ALICE}-airflow-state") as browser:
        _log_in(browser, ui, ALICE)
        browser.goto(f"{ui.page_url}episodes/{episode.episode_id}")
        browser.wait_until("the Airflow states", "!document.querySelector('#airflow-section').hidden")
        shown = _definitions(browser, "#airflow-state")
        href = browser.evaluate("document.querySelector('#airflow-state a.try-log')?.getAttribute('href')")
        browser.screenshot(shots / f"{ALICE}-7-airflow-state.png")
        browser.goto(f"{ui.page_url}?week=2020-W11")
        cell = f"#episodes tr[data-episode-id={json.dumps(episode.episode_id)}] td.paid-state"
        browser.wait_until("the row's paid task state", f"!!document.querySelector({json.dumps(cell + ' .paid-task')})")
        row_state = browser.text(cell)
        row_href = browser.evaluate(f"document.querySelector({json.dumps(cell + ' a.try-log')})?.getAttribute('href')")
        # The task's "Episode" link opens the view inside Airflow's UI (its frame and navigation).
        link = rest._call(
            "GET", f"/api/v2/dags/{ALPHA_PAID}/dagRuns/{quote(run_id, safe='')}/taskInstances/generate/links"
        )
        framed_url = link["extra_links"]["Episode"]
        browser.goto(framed_url)

        def framed_episode() -> str | None:
            shown = browser.evaluate(
                "document.querySelector('iframe')?.contentDocument?.querySelector('#episode-id')?.textContent ?? null"
            )
            return str(shown) if shown else None

        in_frame = browser.wait_for("the episode view inside Airflow's frame", framed_episode)
        # Airflow's own app around it (its React root), not the bare page (which has neither).
        nav = browser.evaluate("!!document.querySelector('#root') && !!document.querySelector('iframe')")
        browser.screenshot(shots / f"{ALICE}-8-episode-in-airflow.png")
        out.expect(
            "[alice] the task's Episode link opens the episode view inside Airflow's UI",
            urlsplit(framed_url).path.startswith("/plugin/idempotent-jobs/") and in_frame == episode.episode_id and nav,
            {"link": framed_url, "framed view shows": in_frame, "Airflow's navigation": nav},
        )
    want_href = f"/dags/{ALPHA_PAID}/runs/{quote(run_id, safe='')}/tasks/generate?try_number={generate['try_number']}"
    out.expect(
        "[alice] the episode of a failed paid run shows the run's and the paid task's states and its try's log link",
        state == "failed"
        and shown.get("DAG run") == "failed"
        and shown.get("Paid task generate", "").startswith(f"{generate['state']} (try {generate['try_number']})")
        and href == want_href,
        {"REST": (state, generate["state"], generate["try_number"]), "shown": shown, "href": href},
    )
    out.expect(
        "[alice] the week's row shows the same paid task state and log link",
        row_state.startswith(f"generate: {generate['state']} (try {generate['try_number']})") and row_href == want_href,
        {"row": row_state, "href": row_href},
    )


def _settle_in_dialog(browser: Browser, ui: UiDeployment, eid: str, answer: str, comment: str, ref: str = "") -> None:
    """Open ``eid``'s view, settle it in the dialog with ``answer`` (and ``ref`` for "ours"), wait until done."""
    browser.goto(f"{ui.page_url}episodes/{eid}")
    browser.wait_until("the settle control", "!document.querySelector('#settle-open').hidden")
    opened = "document.querySelector('#settle-dialog').open"

    def open_dialog() -> bool | None:
        # The Airflow states load after the record and move the button: click again until it opens.
        if not browser.evaluate(opened):
            browser.click("#settle-open")
        return bool(browser.evaluate(opened)) or None

    browser.wait_for("the settle dialog", open_dialog)
    browser.click(f"input[name=answer][value={answer}]")
    if ref:
        browser.type_into("#settle-ref", ref)
    browser.type_into("#settle-comment", comment)
    browser.click("#settle-confirm")
    browser.wait_until(
        "the settled episode",
        "!document.querySelector('#settle-dialog').open && document.querySelector('#settle-open').hidden",
    )


def settle_then_retry(ui: UiDeployment, out: Results, shots: Path) -> None:
    """Two real runs of a capability (c) DAG lose their paid answers: one after the provider made the
    job, one before (a 5xx, nothing made); both fail for good. Carol settles each on the page as the
    provider's console says (ours: REF; not submitted); a clear of each run then resumes the job or
    submits once: one billed job per episode."""
    rest = AirflowRest(ui.api_url, ADMIN, ui.passwords[ADMIN])
    rest.login()
    runs: dict[str, str] = {}
    for case, fault, day in (("made", "drop_after_accept", "2020-03-16"), ("not made", "5xx", "2020-03-17")):
        ui.settle_provider("POST", "/_admin/config", {"fault": fault, "fault_times": 1})
        run = rest._call(
            "POST", f"/api/v2/dags/{ALPHA_SETTLE}/dagRuns", {"logical_date": f"{day}T00:00:00Z", "conf": {}}
        )
        runs[case] = str(run["dag_run_id"])
        state = rest.wait_for_run(ALPHA_SETTLE, runs[case], timeout=180)
        out.expect(f"[settle {case}] the lost answer fails the run for good (capability (c))", state == "failed", state)
    with contextlib.closing(open_store(ui.store_url)) as store:
        episodes = {
            case: next(e for e in store.list("2020-W12") if e.allocation_key.endswith(f":allocate:{run_id}"))
            for case, run_id in runs.items()
        }
    stats = ui.settle_provider("GET", "/_admin/stats")
    made = [job for job in stats["jobs"].values() if job["token"] == episodes["made"].submission.token]
    out.expect(
        "[settle] both submissions are unknown; the provider made one job (for the first) and none for the second",
        [e.submission.state.value for e in episodes.values()] == ["unknown", "unknown"]
        and len(stats["jobs"]) == 1
        and len(made) == 1,
        {"states": {c: e.submission.state.value for c, e in episodes.items()}, "jobs": len(stats["jobs"])},
    )
    with Browser(ui.workdir, f"{CAROL}-settle-retry") as browser:
        _log_in(browser, ui, CAROL)
        _settle_in_dialog(
            browser, ui, episodes["made"].episode_id, "ours", "the provider's console lists it", ref=made[0]["id"]
        )
        _settle_in_dialog(browser, ui, episodes["not made"].episode_id, "not_submitted", "no job in the console")
        browser.screenshot(shots / f"{CAROL}-settled-not-made.png")
    finished = {}
    for case, run_id in runs.items():
        rest.clear_run(ALPHA_SETTLE, run_id)
        finished[case] = (
            rest.wait_for_run(ALPHA_SETTLE, run_id, timeout=180),
            rest.task_instance(ALPHA_SETTLE, run_id, "generate"),
        )
    stats = ui.settle_provider("GET", "/_admin/stats")
    with contextlib.closing(open_store(ui.store_url)) as store:
        after = {case: store.get(e.episode_id).submission for case, e in episodes.items()}
    per_token = Counter(job["token"] for job in stats["jobs"].values())
    out.expect(
        "[settle, ours: REF] the clear resumes the job it names and pays nothing more",
        finished["made"][0] == "success"
        and after["made"].state.value == "succeeded"
        and after["made"].remote_ref == made[0]["id"]
        and per_token[after["made"].token] == 1,
        {"run": finished["made"][0], "state": after["made"].state.value, "ref": after["made"].remote_ref},
    )
    out.expect(
        "[settle, not submitted] the clear submits exactly once",
        finished["not made"][0] == "success"
        and after["not made"].state.value == "succeeded"
        and per_token[after["not made"].token] == 1,
        {"run": finished["not made"][0], "state": after["not made"].state.value},
    )
    out.expect(
        "[settle] one billed job per episode: the provider made 2 jobs for the 2 episodes",
        len(stats["jobs"]) == 2 and set(per_token.values()) == {1},
        {"jobs": len(stats["jobs"]), "per token": dict(per_token)},
    )


#: The computed look of a document: its background (the body's, or the root's under a transparent body),
#: text colour and font (``doc``: a JS expression for the document).
LOOK = (
    "(doc => {{ const s = getComputedStyle(doc.body), h = getComputedStyle(doc.documentElement);"
    " const bg = s.backgroundColor === 'rgba(0, 0, 0, 0)' ? h.backgroundColor : s.backgroundColor;"
    " return {{bg: bg, fg: s.color, font: s.fontFamily}}; }})({doc})"
)
FRAME_DOC = "document.querySelector('iframe').contentDocument"


def native_look(ui: UiDeployment, out: Results, shots: Path) -> None:
    """Inside Airflow's frame the page wears Airflow's own tokens (background, text colour, font),
    and follows the user's switch to dark mode in Airflow's own menu without a reload."""
    with Browser(ui.workdir, f"{ADMIN}-look") as browser:
        _log_in(browser, ui, ADMIN)
        browser.goto(f"{ui.api_url}/plugin/idempotent-jobs/idempotent-jobs/")
        browser.wait_until("the framed page", f"{FRAME_DOC}?.querySelector('#week-id')?.textContent")
        airflow, page = browser.evaluate(LOOK.format(doc="document")), browser.evaluate(LOOK.format(doc=FRAME_DOC))
        tokens = browser.evaluate(f"{FRAME_DOC}.documentElement.dataset.tokens ?? null")
        out.expect(
            "[admin] inside Airflow's frame the page takes Airflow's tokens: its background, text colour and font",
            tokens == "airflow" and page == airflow,
            {"Airflow": airflow, "page": page, "tokens": tokens},
        )
        # Airflow's own switch: the user menu, Appearance, Dark Mode.
        browser.click("button[aria-label=User]")
        browser.wait_until("the user menu", _has_text("[role=menuitem]", "Appearance"))
        browser.click_text("[role=menuitem]", "Appearance")
        browser.wait_until("the Appearance menu", _has_text("[role=menuitemradio]", "Dark Mode"))
        browser.click_text("[role=menuitemradio]", "Dark Mode")
        browser.wait_until("Airflow's dark theme", "document.documentElement.classList.contains('dark')")
        browser.wait_until("the page's dark theme", f"{FRAME_DOC}.documentElement.dataset.theme === 'dark'")
        browser.page.keyboard.press("Escape")  # close Airflow's menu before the screenshot
        browser.wait_until(
            "the menu to close", "![...document.querySelectorAll('[role=menu]')].some(m => m.offsetParent)"
        )
        dark_airflow = browser.evaluate(LOOK.format(doc="document"))
        dark_page = browser.evaluate(LOOK.format(doc=FRAME_DOC))
        browser.screenshot(shots / f"{ADMIN}-dark.png")
        out.expect(
            "[admin] Airflow's Appearance > Dark Mode turns the framed page dark at once, in Airflow's dark colours",
            dark_page == dark_airflow and dark_page["bg"] != page["bg"],
            {"Airflow": dark_airflow, "page": dark_page, "light page": page},
        )
        browser.goto(f"{ui.page_url}?week={ui.seeded.current if ui.seeded else ''}")
        browser.wait_until("the bare page", "document.querySelector('#week-id')?.textContent")
        bare = browser.evaluate(LOOK.format(doc="document"))
        out.expect(
            "[admin] the bare page (outside the frame) keeps Airflow's stored dark choice, in the same colours",
            browser.evaluate("document.documentElement.dataset.theme") == "dark" and bare == dark_airflow,
            {"bare page": bare, "Airflow": dark_airflow},
        )
        browser.evaluate("localStorage.setItem('theme', 'light')")


def _log_in(browser: Browser, ui: UiDeployment, user: str) -> None:
    browser.goto(f"{ui.api_url}/auth/login?next={quote(ui.page_url, safe='')}")
    browser.wait_until("Airflow's login form", "document.querySelector('input[name=password]')")
    browser.type_into("input[name=username]", user)
    browser.type_into("input[name=password]", ui.passwords[user])
    browser.click("button[type=submit]")
    browser.wait_until("the login to finish", "location.pathname !== '/auth/login'")


def run(ui: UiDeployment, out: Results, shots: Path) -> None:
    ui.start(say)
    seeded = ui.seeded
    assert seeded is not None
    with contextlib.closing(open_store(ui.store_url)) as store:
        records = {e.episode_id: e for e in store.list()}
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        # A second api-server with a store that refuses connections, started while the users browse.
        down: Future[str] = pool.submit(
            ui.start_api_server, store=f"postgresql://ij:{DOWN_SECRET}@127.0.0.1:{free_port()}/gone"
        )
        started = time.monotonic()
        for user in (ADMIN, ALICE, BOB):
            checks = UserChecks(ui, out, user, Expected(seeded, records, READABLE[user]), shots)
            try:
                with Browser(ui.workdir, user) as browser:
                    checks.run(browser)
            except BrowserError as exc:
                out.expect(f"[{user}] the walk ran to the end", False, exc)
        say(f"three users walked the page in {time.monotonic() - started:.0f}s")
        try:
            store_down(ui, out, down.result(timeout=180), shots)
        except (BrowserError, RuntimeError, TimeoutError) as exc:
            out.expect("[store down] the walk ran to the end", False, exc)
        try:
            damaged_record(ui, out, seeded, shots)
        except BrowserError as exc:
            out.expect("[damaged record] the walk ran to the end", False, exc)
        try:
            settle_from_the_page(ui, out, shots)
        except BrowserError as exc:
            out.expect("[settle] the walk ran to the end", False, exc)
        try:
            filters_search_sort_pages(ui, out, shots)
        except BrowserError as exc:
            out.expect("[big week] the walk ran to the end", False, exc)
        try:
            settle_then_retry(ui, out, shots)
        except (BrowserError, RuntimeError, TimeoutError) as exc:
            out.expect("[settle then retry] the walk ran to the end", False, exc)
        try:
            native_look(ui, out, shots)
        except BrowserError as exc:
            out.expect("[look] the walk ran to the end", False, exc)
        try:
            airflow_state(ui, out, shots)
        except (BrowserError, RuntimeError, TimeoutError) as exc:
            out.expect("[airflow state] the walk ran to the end", False, exc)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the work dir, logs and databases")
    parser.add_argument("--docs", action="store_true", help="copy the week and episode views to docs/img/")
    parser.add_argument("--workdir", type=Path, default=REPO / ".e2e" / "ui")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _terminate)
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    shots = args.workdir / "screenshots"
    ui = UiDeployment(args.workdir, tag=f"ui{int(time.time()) % 100000}")
    out = Results(say)
    run_deployed(ui, out, lambda: run(ui, out, shots), keep=args.keep)
    if args.docs and out.ok:
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        # The week as it opens inside Airflow's UI, for the user who sees every state.
        shutil.copyfile(shots / f"{ADMIN}-0-navigation.png", DOCS_IMG / "ui-week.png")
        shutil.copyfile(shots / f"{ALICE}-3-episode.png", DOCS_IMG / "ui-episode.png")
        shutil.copyfile(shots / f"{CAROL}-settle-dialog.png", DOCS_IMG / "ui-settle.png")
        say(f"screenshots copied to {DOCS_IMG}")
    # The screenshots are the run's record: kept even when the run passed; logs only when it failed.
    if out.ok and not args.keep:
        _clean(args.workdir, keep=shots)
    else:
        say(f"logs kept in {args.workdir}")
    if shots.exists():
        say(f"screenshots in {shots}")
    return 0 if out.ok else 1


def _clean(workdir: Path, keep: Path) -> None:
    """Remove the work dir's logs and homes, keeping the screenshots."""
    for path in workdir.iterdir():
        if path == keep:
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
