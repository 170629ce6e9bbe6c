// The Idempotent Jobs page: reads only the plugin's JSON API and renders it with textContent
// (never innerHTML), so nothing stored in an episode can become markup or script.
"use strict";

// What Python's str.isprintable() refuses: controls, format characters (bidi overrides such as
// U+202E, zero-width ones), unassigned, surrogates, line/paragraph separators and every space but
// " ". Stored text shows them as escapes, as `idempotent-jobs` prints them, so it cannot reorder,
// hide or fake what is next to it.
const HIDDEN = /[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Cs}\p{Zl}\p{Zp}]|(?! )\p{Zs}/gu;
const NAMED = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function hex(code, width) {
  return code.toString(16).padStart(width, "0");
}

// Text as shown: each hidden character as \n, \xNN, \uNNNN or \UNNNNNNNN.
function shown(text) {
  return String(text).replace(HIDDEN, (ch) => {
    const code = ch.codePointAt(0);
    if (NAMED[ch]) return NAMED[ch];
    if (code < 0x100) return `\\x${hex(code, 2)}`;
    return code < 0x10000 ? `\\u${hex(code, 4)}` : `\\U${hex(code, 8)}`;
  });
}

// JSON as shown: the same characters as JSON's \u escapes, so the text still parses to the record.
// Outside its strings JSON.stringify writes only printable ASCII and the layout's line breaks.
function shownJson(value) {
  return JSON.stringify(value, null, 2).replace(HIDDEN, (ch) => {
    if (ch === "\n") return ch;
    let out = "";
    for (let i = 0; i < ch.length; i++) out += `\\u${hex(ch.charCodeAt(i), 4)}`;
    return out;
  });
}

const ROOT = document.querySelector('meta[name="ij-root"]').content;
// Airflow's own UI lives one level up from the plugin's mount point.
const AIRFLOW_ROOT = ROOT.replace(/\/idempotent-jobs$/, "");
const $ = (selector) => document.querySelector(selector);

function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = shown(text);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  return node;
}

function link(text, href, attrs) {
  return el("a", text, Object.assign({ href }, attrs || {}));
}

function cell(row, content) {
  const td = document.createElement("td");
  if (content instanceof Node) td.appendChild(content);
  else td.textContent = content === null || content === undefined ? "" : shown(content);
  row.appendChild(td);
  return td;
}

// Times in the zone the user picked in Airflow's UI (its localStorage "timezone", shared by this
// same-origin page), short ("Mon 12-01 19:10"); the stored value in full on hover.
function userTimeZone() {
  let zone = null;
  try {
    const stored = localStorage.getItem("timezone");
    zone = stored === null ? null : JSON.parse(stored);
  } catch (_) {
    zone = null;
  }
  try {
    if (typeof zone === "string" && zone) {
      new Intl.DateTimeFormat("en-GB", { timeZone: zone });
      return zone;
    }
  } catch (_) {
    /* an unknown zone name: the browser's own below */
  }
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

const TIME_ZONE = userTimeZone();

function when(iso) {
  if (iso === null || iso === undefined || iso === "") return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return el("span", iso);
  const parts = {};
  const format = new Intl.DateTimeFormat("en-GB", {
    timeZone: TIME_ZONE, weekday: "short", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23",
  });
  for (const part of format.formatToParts(date)) parts[part.type] = part.value;
  return el("time", `${parts.weekday} ${parts.month}-${parts.day} ${parts.hour}:${parts.minute}`, {
    datetime: iso, title: `${iso} (shown in ${TIME_ZONE})`, class: "when",
  });
}

// Airflow's look. Inside Airflow's frame (same origin) the page takes Airflow's live design tokens
// (Chakra's CSS variables on its document) for its own, and follows when the user switches
// Airflow's theme; on the bare page, Airflow's stored choice (localStorage "theme": light, dark or
// system) picks style.css's copy of them.
const TOKENS = {
  "--ij-font": "--chakra-fonts-body",
  "--ij-mono": "--chakra-fonts-mono",
  "--ij-bg": "--chakra-colors-bg",
  "--ij-bg-subtle": "--chakra-colors-bg-subtle",
  "--ij-bg-muted": "--chakra-colors-bg-muted",
  "--ij-fg": "--chakra-colors-fg",
  "--ij-fg-muted": "--chakra-colors-fg-muted",
  "--ij-border": "--chakra-colors-border",
  "--ij-border-emphasized": "--chakra-colors-border-emphasized",
  "--ij-link": "--chakra-colors-fg-info",
  "--ij-error-fg": "--chakra-colors-fg-error",
  "--ij-error-bg": "--chakra-colors-bg-error",
  "--ij-warning-fg": "--chakra-colors-fg-warning",
  "--ij-warning-bg": "--chakra-colors-bg-warning",
  "--ij-success-fg": "--chakra-colors-fg-success",
  "--ij-button": "--chakra-colors-button-solid",
  "--ij-button-contrast": "--chakra-colors-button-contrast",
  "--ij-chart": "--chakra-colors-blue-solid",
};
const STATES = ["success", "failed", "running", "queued", "scheduled", "deferred", "up_for_retry",
  "up_for_reschedule", "upstream_failed", "skipped", "restarting", "removed", "none"];
for (const state of STATES) TOKENS[`--ij-state-${state}`] = `--chakra-colors-${state.replaceAll("_", "-")}-solid`;

function airflowDocument() {
  try {
    const parent = window.parent;
    if (parent === window || !parent.document || !parent.document.body) return null;
    return parent.document;  // throws for a cross-origin parent: then not Airflow's frame
  } catch (_) {
    return null;
  }
}

function storedTheme() {
  let theme = "system";
  try {
    theme = localStorage.getItem("theme") || "system";
  } catch (_) {
    theme = "system";
  }
  return theme === "dark" || (theme !== "light" && matchMedia("(prefers-color-scheme: dark)").matches);
}

// Copies Airflow's tokens as its body resolves them (the dark ones apply under html.dark); true if
// the parent is Airflow's UI (it defines them).
function adoptAirflowTokens(airflow) {
  const computed = getComputedStyle(airflow.body);
  if (!computed.getPropertyValue("--chakra-colors-bg").trim()) return false;
  const root = document.documentElement;
  for (const [ours, theirs] of Object.entries(TOKENS)) {
    const value = computed.getPropertyValue(theirs).trim();
    if (value) root.style.setProperty(ours, value);
    else root.style.removeProperty(ours);
  }
  root.dataset.theme = airflow.documentElement.classList.contains("dark") ? "dark" : "light";
  root.dataset.tokens = "airflow";
  return true;
}

function applyTheme() {
  const airflow = airflowDocument();
  if (airflow && adoptAirflowTokens(airflow)) {
    new MutationObserver(() => adoptAirflowTokens(airflow)).observe(airflow.documentElement, {
      attributes: true, attributeFilter: ["class", "style"],
    });
    return;
  }
  document.documentElement.dataset.theme = storedTheme() ? "dark" : "light";
  addEventListener("storage", (event) => {
    if (event.key === "theme") document.documentElement.dataset.theme = storedTheme() ? "dark" : "light";
  });
}

// Costs in the unit of [idempotent_jobs] currency, which every answer of the API carries (null: none shown).
let CURRENCY = null;

function money(value) {
  if (value === null || value === undefined) return "";
  return CURRENCY ? `${Number(value).toFixed(2)} ${CURRENCY}` : Number(value).toFixed(2);
}

function useCurrency(answer) {
  CURRENCY = answer && typeof answer.currency === "string" && answer.currency ? answer.currency : null;
}

function weekUrl(week) {
  return `${ROOT}/?week=${encodeURIComponent(week)}`;
}

// The week view's rows are chosen by the page's own query string (shareable, kept on reload):
// these names are passed to the API as they are.
const ROW_PARAMS = ["status", "submission", "decision", "dag", "q", "sort", "order", "page"];
const CHOICES = {
  status: ["allocated", "running", "succeeded", "failed", "cancelled", "rejected"],
  submission: ["none", "submitting", "accepted", "succeeded", "failed", "unknown"],
  decision: ["approved", "rejected", "asked", "none"],
};

function rowParams() {
  const here = new URLSearchParams(location.search);
  const out = new URLSearchParams();
  for (const name of ROW_PARAMS) if (here.get(name)) out.set(name, here.get(name));
  return out;
}

function withRows(changes) {
  const here = new URLSearchParams(location.search);
  for (const [name, value] of Object.entries(changes)) {
    if (value === null || value === undefined || value === "") here.delete(name);
    else here.set(name, String(value));
  }
  return `${ROOT}/?${here.toString()}`;
}

function fillSelect(select, values, chosen) {
  select.length = 1; // keeps "any"
  for (const value of values) {
    const option = el("option", value, { value });
    if (value === chosen) option.selected = true;
    select.appendChild(option);
  }
}

function renderRows(rows) {
  const params = rowParams();
  const form = $("#filters");
  for (const name of Object.keys(CHOICES)) fillSelect(form.elements[name], CHOICES[name], params.get(name));
  fillSelect(form.elements.dag, rows ? rows.dags : [], params.get("dag"));
  form.elements.q.value = params.get("q") || "";
  for (const th of document.querySelectorAll("#episodes th[data-sort]")) {
    const column = th.dataset.sort;
    const active = rows && rows.sort === column;
    th.setAttribute("aria-sort", active ? (rows.order === "desc" ? "descending" : "ascending") : "none");
    th.classList.toggle("sorted", Boolean(active));
    th.title = "Sort by this column";
  }
  if (!rows) return;
  const first = rows.matching ? (rows.page - 1) * rows.per_page + 1 : 0;
  const last = Math.min(rows.page * rows.per_page, rows.matching);
  $("#page-info").textContent = `${first}-${last} of ${rows.matching} matching (${rows.total} this week), page ${rows.page} of ${rows.pages}`;
  $("#page-previous").hidden = rows.page <= 1;
  $("#page-previous").href = withRows({ page: rows.page - 1 });
  $("#page-next").hidden = rows.page >= rows.pages;
  $("#page-next").href = withRows({ page: rows.page + 1 });
}

function wireRows() {
  const form = $("#filters");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const changes = { page: null };
    for (const name of ["status", "submission", "decision", "dag", "q"]) changes[name] = form.elements[name].value.trim();
    location.href = withRows(changes);
  });
  $("#filters-clear").addEventListener("click", () => {
    location.href = withRows({ status: null, submission: null, decision: null, dag: null, q: null, page: null });
  });
  for (const th of document.querySelectorAll("#episodes th[data-sort]")) {
    th.addEventListener("click", () => {
      const here = new URLSearchParams(location.search);
      const same = (here.get("sort") || "episode_id") === th.dataset.sort;
      const order = same && (here.get("order") || "asc") === "asc" ? "desc" : "asc";
      location.href = withRows({ sort: th.dataset.sort, order, page: null });
    });
  }
}

function episodeUrl(id) {
  return `${ROOT}/episodes/${encodeURIComponent(id)}`;
}

// Airflow's task instance page for an owner; its DAG run, or the DAG, when less is known.
function ownerUrl(owner) {
  const dag = `${AIRFLOW_ROOT}/dags/${encodeURIComponent(owner.dag_id)}`;
  if (owner.run_id === null || owner.run_id === undefined) return dag;
  let url = `${dag}/runs/${encodeURIComponent(owner.run_id)}/tasks/${encodeURIComponent(owner.task_id)}`;
  if (owner.map_index !== null && owner.map_index !== undefined) url += `/mapped/${owner.map_index}`;
  return url;
}

// The owner as a link to its task instance; one read from the allocation key (no owner was recorded
// at allocation) is marked: any DAG's author may write any key.
function ownerNode(owner, source) {
  const span = el("span", null, { class: "owner-cell" });
  span.appendChild(link(ownerText(owner), ownerUrl(owner), { class: "owner" }));
  if (source === "key") span.appendChild(el("span", " (from the allocation key, not recorded)", { class: "owner-source" }));
  return span;
}

function ownerText(owner) {
  let text = owner.run_id ? `${owner.dag_id} / ${owner.run_id} / ${owner.task_id}` : `${owner.dag_id} / ${owner.task_id}`;
  if (owner.map_index !== null && owner.map_index !== undefined) text += ` [${owner.map_index}]`;
  return text;
}

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path) {
  const answer = await fetch(`${ROOT}/api/${path}`, { credentials: "same-origin", headers: { Accept: "application/json" } });
  let body = null;
  try {
    body = await answer.json();
  } catch (_) {
    body = null;
  }
  if (!answer.ok) {
    const detail = body && typeof body.detail === "string" ? body.detail : answer.statusText;
    throw new ApiError(answer.status, detail);
  }
  return body;
}

function showError(error) {
  const box = $("#error");
  box.textContent = "";
  const status = error instanceof ApiError ? error.status : 0;
  box.dataset.status = String(status);
  box.appendChild(el("span", status ? `Error ${status}: ${error.message}` : `Error: ${error.message}`, { class: "message" }));
  if (status === 401) {
    box.appendChild(el("span", " "));
    box.appendChild(link("Log in", `${AIRFLOW_ROOT}/auth/login?next=${encodeURIComponent(location.href)}`));
  }
  box.hidden = false;
}

function commandLine(parent, command, kind) {
  parent.appendChild(el("code", command, { class: kind }));
  const copy = el("button", "Copy", { type: "button", class: "copy", "data-copies": kind });
  copy.addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText(command));
  parent.appendChild(copy);
}

function attentionItem(item, withEpisodeLink) {
  const li = el("li", null, { "data-episode-id": item.episode_id });
  if (withEpisodeLink) li.appendChild(link(item.episode_id, episodeUrl(item.episode_id)));
  li.appendChild(el("span", ` ${item.reason} `, { class: "reason" }));
  if (item.command) commandLine(li, item.command, "command");
  if (item.lookup_command) {
    // The token a lookup at the provider asks for, and the command that does it on the store's host.
    const lookup = el("div", null, { class: "lookup" });
    lookup.appendChild(el("span", "Look its token "));
    lookup.appendChild(el("code", item.token === null ? "(none recorded)" : item.token, { class: "token" }));
    lookup.appendChild(el("span", " up at the provider (PROVIDER_URL: its job API; the credential in $IDEMPOTENT_JOBS_PROVIDER_TOKEN): "));
    commandLine(lookup, item.lookup_command, "lookup-command");
    li.appendChild(lookup);
  }
  return li;
}

function renderCounts(counts) {
  const box = $("#counts");
  box.textContent = "";
  for (const [kind, byState] of Object.entries(counts || {})) {
    const p = el("p", null, { class: "count-line", "data-kind": kind });
    p.appendChild(el("strong", `${kind}: `));
    // Zero counts are folded away: the line names only the states something is in.
    const parts = Object.entries(byState)
      .filter(([, n]) => n !== 0)
      .map(([state, n]) => `${state} ${n}`);
    p.appendChild(el("span", parts.length ? parts.join(", ") : "none"));
    box.appendChild(p);
  }
}

// Records of the week that could not be read (listed to store-wide users only): left out of every figure.
function renderDamaged(damaged) {
  const box = $("#damaged");
  const list = $("#damaged-list");
  list.textContent = "";
  const noun = damaged.length === 1 ? "record" : "records";
  $("#damaged-note").textContent = damaged.length
    ? `Totals, counts and rows leave out ${damaged.length} damaged ${noun} (run idempotent-jobs check):`
    : "";
  for (const item of damaged) {
    const li = el("li", null, { "data-episode-id": item.episode_id || "" });
    li.appendChild(el("strong", item.episode_id || "(no episode)"));
    li.appendChild(el("span", ` ${item.where}: ${item.problem}`, { class: "problem" }));
    list.appendChild(li);
  }
  box.hidden = damaged.length === 0;
}

function renderWeek(week) {
  useCurrency(week);
  $("#week-id").textContent = week.week_id;
  $("#previous-week").href = weekUrl(week.previous);
  $("#next-week").href = weekUrl(week.next);
  $("#current-week").href = weekUrl(week.current);
  $("#week-input").value = week.week_id;
  $("#week-nav").hidden = false;
  document.title = `Idempotent Jobs ${week.week_id}`;

  $("#spend").textContent = money(week.spend);
  $("#budget").textContent = week.budget === null ? "(no weekly budget configured)" : `of ${money(week.budget)} budget`;
  const unknown = week.spend_unknown || [];
  $("#spend-unknown").hidden = unknown.length === 0;
  $("#spend-unknown").textContent = unknown.length ? shown(`Spend not knowable yet for: ${unknown.join(", ")}`) : "";
  renderCounts(week.counts);
  renderDamaged(week.damaged || []);

  const list = $("#attention-list");
  list.textContent = "";
  for (const item of week.attention) list.appendChild(attentionItem(item, true));
  $("#attention-none").hidden = week.attention.length > 0;

  const body = $("#episodes tbody");
  body.textContent = "";
  for (const row of week.episodes) {
    const tr = el("tr", null, { "data-episode-id": row.episode_id });
    cell(tr, link(row.episode_id, episodeUrl(row.episode_id), { class: "episode" }));
    cell(tr, row.status).className = `status ${row.status}`;
    cell(tr, row.submission_state).className = `submission ${row.submission_state}`;
    cell(tr, row.remote_ref);
    cell(tr, money(row.cost));
    cell(tr, row.decision);
    cell(tr, when(row.created_at));
    cell(tr, when(row.updated_at));
    cell(tr, row.owner ? ownerNode(row.owner, row.owner_source) : row.allocation_key);
    cell(tr, "").className = "paid-state";
    body.appendChild(tr);
  }
  $("#episodes-none").hidden = week.episodes.length > 0;
  renderRows(week.rows);
  renderByDag(week.spend_by_dag);
  showPaidStates(week.episodes).catch(() => undefined); // Airflow's answer is extra: the rows stand without it
  $("#week-view").hidden = false;
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

// Weekly spend of the weeks that had episodes, oldest first, against the budget (a line): drawn with
// SVG attributes only (the page's Content-Security-Policy allows no inline style).
function renderChart(weeks, budget) {
  const shown = weeks.filter((week) => week.episodes > 0).reverse();
  const chart = $("#spend-chart");
  chart.textContent = "";
  $("#spend-chart-figure").hidden = shown.length === 0;
  if (!shown.length) return;
  const width = 720, height = 180, left = 48, bottom = 24, top = 8;
  const highest = Math.max(budget || 0, ...shown.map((week) => week.spend), 1);
  const scale = (height - bottom - top) / highest;
  const slot = (width - left) / shown.length;
  chart.appendChild(svg("text", { x: 0, y: top + 10, class: "axis" }, money(highest)));
  chart.appendChild(svg("text", { x: 0, y: height - bottom, class: "axis" }, "0"));
  shown.forEach((week, i) => {
    const bar = Math.max(week.spend * scale, week.spend > 0 ? 1 : 0);
    const x = left + i * slot + slot * 0.15;
    const over = budget !== null && budget !== undefined && week.spend > budget;
    const rect = svg("rect", { x, y: height - bottom - bar, width: slot * 0.7, height: bar, class: over ? "bar over" : "bar" });
    rect.appendChild(svg("title", {}, `${week.week_id}: ${money(week.spend)} (${week.episodes} episodes)`));
    chart.appendChild(rect);
    chart.appendChild(svg("text", { x: x, y: height - 6, class: "axis" }, week.week_id.slice(5)));
  });
  if (budget !== null && budget !== undefined) {
    const y = height - bottom - budget * scale;
    chart.appendChild(svg("line", { x1: left, x2: width, y1: y, y2: y, class: "budget" }));
  }
  $("#spend-chart-caption").textContent =
    `Spend per week with episodes, oldest first${budget === null || budget === undefined ? "" : `; the line is the weekly budget, ${money(budget)}`}.`;
}

function renderByDag(byDag) {
  const body = $("#by-dag tbody");
  body.textContent = "";
  for (const item of byDag || []) {
    const tr = el("tr", null, { "data-dag-id": item.dag_id || "" });
    cell(tr, item.dag_id || "(no owning DAG)");
    cell(tr, item.episodes);
    cell(tr, item.spend_unknown ? `${money(item.spend)} (+${item.spend_unknown} unknown)` : money(item.spend));
    body.appendChild(tr);
  }
  $("#by-dag-section").hidden = !(byDag || []).length;
}

function renderWeeks(weeks, budget) {
  renderChart(weeks.weeks, budget);
  const body = $("#weeks tbody");
  body.textContent = "";
  for (const week of weeks.weeks.filter((w) => w.episodes > 0 || w.damaged > 0)) {
    const tr = el("tr", null, { "data-week-id": week.week_id });
    cell(tr, link(week.week_id, weekUrl(week.week_id)));
    cell(tr, week.damaged ? `${week.episodes} (+${week.damaged} damaged)` : week.episodes);
    cell(tr, money(week.spend));
    cell(tr, week.attention);
    body.appendChild(tr);
  }
}

function definition(list, term, value) {
  list.appendChild(el("dt", term));
  const dd = el("dd");
  if (value instanceof Node) dd.appendChild(value);
  else dd.textContent = value === null || value === undefined ? "" : shown(value);
  list.appendChild(dd);
}

function renderEpisode(view) {
  useCurrency(view);
  const episode = view.episode;
  const submission = episode.submission || {};
  const approval = episode.approval || {};
  $("#episode-id").textContent = episode.episode_id;
  $("#episode-week").href = weekUrl(episode.week_id);
  document.title = `Idempotent Jobs ${episode.episode_id}`;

  const summary = $("#episode-summary");
  summary.textContent = "";
  definition(summary, "Status", episode.status);
  definition(summary, "Submission", submission.state);
  definition(summary, "Remote ref", submission.remote_ref);
  definition(summary, "Cost", money(submission.cost));
  definition(summary, "Estimated cost", money(submission.estimated_cost));
  if (submission.cost_anomaly) definition(summary, "Cost anomaly", submission.cost_anomaly);
  definition(summary, "Attempts", submission.attempts);
  // The error of the state it is in; an earlier attempt's error stays in the history below.
  if (submission.error && ["failed", "unknown"].includes(submission.state)) definition(summary, "Error", submission.error);
  definition(summary, "Allocation key", episode.allocation_key);
  definition(summary, "Owner", view.owner ? ownerNode(view.owner, view.owner_source) : "none (none recorded, no DAG named by the key)");
  definition(summary, "Created", when(episode.created_at));
  definition(summary, "Updated", when(episode.updated_at));

  const attention = $("#episode-attention-list");
  attention.textContent = "";
  for (const item of view.attention) attention.appendChild(attentionItem(item, false));
  $("#episode-attention").hidden = view.attention.length === 0;
  offerSettle(episode.episode_id, view.settle);
  showAirflowState(view).catch(() => {
    $("#airflow-section").hidden = true;
  });

  const history = $("#submission-history tbody");
  history.textContent = "";
  for (const entry of submission.history || []) {
    const tr = el("tr");
    cell(tr, when(entry.at));
    for (const name of ["from", "to", "note", "by", "via", "comment"]) cell(tr, entry[name]);
    history.appendChild(tr);
  }

  const effects = $("#effects tbody");
  effects.textContent = "";
  const named = Object.entries(episode.effects || {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [name, effect] of named) {
    const tr = el("tr", null, { "data-effect": name });
    cell(tr, name);
    cell(tr, effect.state).className = `effect ${effect.state}`;
    cell(tr, effect.attempts);
    cell(tr, effect.result === null || effect.result === undefined ? "" : JSON.stringify(effect.result));
    cell(tr, effect.error);
    cell(tr, when(effect.updated_at));
    effects.appendChild(tr);
  }
  $("#effects-section").hidden = named.length === 0;

  const gate = $("#approval");
  gate.textContent = "";
  definition(gate, "Decision", approval.decision || "none");
  definition(gate, "By", approval.by);
  definition(gate, "At", when(approval.at));
  definition(gate, "Via", approval.via);
  definition(gate, "Comment", approval.comment);
  const events = $("#approval-history tbody");
  events.textContent = "";
  for (const entry of approval.history || []) {
    const tr = el("tr");
    cell(tr, when(entry.at));
    for (const name of ["event", "by", "via", "comment"]) cell(tr, entry[name]);
    events.appendChild(tr);
  }
  // Empty sections are hidden: no approval asked or decided, no migration record or metadata.
  $("#approval-section").hidden = !approval.decision && !(approval.history || []).length;
  $("#metadata-section").hidden = Object.keys(episode.metadata || {}).length === 0;

  $("#metadata").textContent = shownJson(episode.metadata || {});
  $("#record").textContent = shownJson(episode);
  $("#episode-view").hidden = false;
}

// The owning DAG run's state and its paid task's, from Airflow's own REST API with this user's
// session (same origin: Airflow's cookie), so the user's own rights decide what is shown.
const PAID_OPERATORS = ["PaidGenerationOperator", "@task.paid_generation", "_PaidGenerationDecoratedOperator"];

async function airflowGet(path) {
  const answer = await fetch(`${AIRFLOW_ROOT}/api/v2/${path}`, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!answer.ok) throw new ApiError(answer.status, answer.statusText);
  return answer.json();
}

function tryLogUrl(owner, ti) {
  let url = `${AIRFLOW_ROOT}/dags/${encodeURIComponent(owner.dag_id)}/runs/${encodeURIComponent(owner.run_id)}`;
  url += `/tasks/${encodeURIComponent(ti.task_id)}`;
  if (ti.map_index !== null && ti.map_index !== undefined && ti.map_index >= 0) url += `/mapped/${ti.map_index}`;
  return `${url}?try_number=${ti.try_number}`;
}

// The paid task of each listed row's DAG run, from Airflow's batch task-instance list (a few calls for a
// page of rows, the user's own rights): its state and try, linking to that try's log.
async function showPaidStates(rows) {
  const owned = rows.filter((row) => row.owner && row.owner_source === "recorded" && row.owner.run_id);
  if (!owned.length) return;
  const body = {
    dag_ids: [...new Set(owned.map((row) => row.owner.dag_id))],
    dag_run_ids: [...new Set(owned.map((row) => row.owner.run_id))],
    page_limit: 100,
    page_offset: 0,
  };
  const found = new Map();
  for (let page = 0; page < 10; page += 1) {
    const answer = await fetch(`${AIRFLOW_ROOT}/api/v2/dags/~/dagRuns/~/taskInstances/list`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    });
    if (!answer.ok) return;
    const batch = await answer.json();
    for (const ti of batch.task_instances || []) {
      if (!PAID_OPERATORS.includes(ti.operator_name) && !PAID_OPERATORS.includes(ti.operator)) continue;
      const key = `${ti.dag_id}\u0000${ti.dag_run_id}`;
      found.set(key, [...(found.get(key) || []), ti]);
    }
    body.page_offset += (batch.task_instances || []).length;
    if (!(batch.task_instances || []).length || body.page_offset >= batch.total_entries) break;
  }
  for (const row of owned) {
    const td = document.querySelector(`#episodes tr[data-episode-id="${CSS.escape(row.episode_id)}"] td.paid-state`);
    if (!td) continue;
    for (const ti of found.get(`${row.owner.dag_id}\u0000${row.owner.run_id}`) || []) {
      const span = el("span", null, { class: "paid-task", "data-task-id": ti.task_id });
      span.appendChild(el("span", `${ti.task_id}: ${ti.state || "no state"} (try ${ti.try_number}) `, { class: `ti-state ${ti.state || ""}` }));
      if (ti.try_number > 0) span.appendChild(link("log", tryLogUrl(row.owner, ti), { class: "try-log", target: "_top" }));
      td.appendChild(span);
    }
  }
}

async function showAirflowState(view) {
  const section = $("#airflow-section");
  const owner = view.owner;
  section.hidden = true;
  if (!owner || view.owner_source !== "recorded" || !owner.run_id) return;
  const base = `dags/${encodeURIComponent(owner.dag_id)}/dagRuns/${encodeURIComponent(owner.run_id)}`;
  const [run, tis] = await Promise.all([airflowGet(base), airflowGet(`${base}/taskInstances?limit=1000`)]);
  const list = $("#airflow-state");
  list.textContent = "";
  const state = el("span", run.state || "unknown", { class: `run-state ${run.state || ""}` });
  definition(list, "DAG run", state);
  const paid = (tis.task_instances || []).filter((ti) => PAID_OPERATORS.includes(ti.operator_name) || PAID_OPERATORS.includes(ti.operator));
  for (const ti of paid) {
    const span = el("span", null, { class: "paid-task", "data-task-id": ti.task_id });
    span.appendChild(el("span", `${ti.state || "no state"} (try ${ti.try_number}) `, { class: `ti-state ${ti.state || ""}` }));
    if (ti.try_number > 0) span.appendChild(link("log of that try", tryLogUrl(owner, ti), { class: "try-log", target: "_top" }));
    definition(list, `Paid task ${ti.task_id}`, span);
  }
  if (!paid.length) definition(list, "Paid task", "none in this run");
  section.hidden = false;
}

// Settling an unknown paid submission: offered only when the API says this user may (view.settle).
// The POST carries the session's CSRF token in a header (GET /api/session); the browser adds Origin.
let settling = null;

function offerSettle(episodeId, offer) {
  settling = offer ? { episodeId, seen: offer.seen_updated_at } : null;
  $("#settle-open").hidden = !offer;
}

async function settle(form) {
  const data = new FormData(form);
  const answer = data.get("answer");
  const body = { answer, comment: String(data.get("comment") || ""), seen_updated_at: settling.seen };
  if (answer === "ours") body.remote_ref = String(data.get("remote_ref") || "").trim();
  const session = await api("session");
  const reply = await fetch(`${ROOT}/api/episodes/${encodeURIComponent(settling.episodeId)}/settle`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRF-Token": session.csrf_token },
    body: JSON.stringify(body),
  });
  const result = await reply.json().catch(() => null);
  if (!reply.ok) throw new ApiError(reply.status, result && typeof result.detail === "string" ? result.detail : reply.statusText);
  return result;
}

function wireSettle() {
  const dialog = $("#settle-dialog");
  const form = $("#settle-form");
  const error = $("#settle-error");
  $("#settle-open").addEventListener("click", () => {
    form.reset();
    error.hidden = true;
    $("#settle-episode").textContent = settling ? settling.episodeId : "";
    dialog.showModal();
  });
  $("#settle-cancel").addEventListener("click", () => dialog.close());
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const answer = new FormData(form).get("answer");
    if (answer === "ours" && !$("#settle-ref").value.trim()) {
      error.textContent = "Give the provider's job id.";
      error.hidden = false;
      return;
    }
    try {
      const view = await settle(form);
      dialog.close();
      renderEpisode(view);
    } catch (failure) {
      error.textContent = failure instanceof ApiError ? `Refused (${failure.status}): ${failure.message}` : String(failure);
      error.hidden = false;
    }
  });
}

async function main() {
  applyTheme();
  wireRows();
  $("#time-zone").textContent = `Times in ${TIME_ZONE} (as chosen in Airflow's UI).`;
  wireSettle();
  $("#week-picker").addEventListener("submit", (event) => {
    event.preventDefault();
    location.href = weekUrl($("#week-input").value);
  });
  const path = location.pathname.slice(ROOT.length);
  try {
    if (path.startsWith("/episodes/")) {
      const id = decodeURIComponent(path.slice("/episodes/".length));
      renderEpisode(await api(`episodes/${encodeURIComponent(id)}`));
    } else {
      const weeks = await api("weeks");
      $("#time-zone").textContent = `ISO weeks in ${weeks.week_zone} (the deployment's [idempotent_jobs] timezone); times shown in ${TIME_ZONE} (as chosen in Airflow's UI).`;
      const wanted = new URLSearchParams(location.search).get("week") || weeks.current;
      const query = rowParams().toString();
      const week = await api(`weeks/${encodeURIComponent(wanted)}${query ? `?${query}` : ""}`);
      renderWeek(week);
      renderWeeks(weeks, week.budget);
    }
  } catch (error) {
    showError(error);
  } finally {
    $("#loading").hidden = true;
  }
}

main();
