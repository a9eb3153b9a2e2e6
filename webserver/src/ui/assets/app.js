// xtimer console: hash routes over the JSON APIs. No build step.
"use strict";

const TIMER_STATUS = { 1: "disabled", 2: "enabled", 3: "deleted", 4: "completed" };
const FIRE_STATUS = { 0: "pending", 1: "running", 2: "succeeded", 3: "failed", 4: "skipped", 5: "missed" };
const TASK_STATUS = { 1: "pending", 2: "processing", 3: "success", 4: "failed" };
const PAGE_SIZE = 50;
const main = document.getElementById("main");
const flash = document.getElementById("flash");

function esc(value) {
  return String(value === null || value === undefined ? "-" : value)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
const attr = (value) => value === null || value === undefined ? "" : esc(value);
function badge(word, extra) { return `<span class="badge s-${esc(word)}">${esc(extra || word)}</span>`; }
function time(ms) { return ms === null || ms === undefined ? "-" : new Date(ms).toISOString().replace(".000Z", "Z"); }
const seconds = (ms) => time(Math.floor(ms / 1000) * 1000);
function say(text, error) { flash.textContent = text || ""; flash.className = error ? "error" : ""; }
let nextFlash = null;
// A message to show on the page the next route change renders.
function sayNext(text) { nextFlash = text; }
function dur(ms) {
  for (const [unit, n] of [["h", 3600000], ["min", 60000], ["s", 1000]]) if (ms >= n && ms % n === 0) return `${ms / n} ${unit}`;
  return `${ms} ms`;
}
function schedule(t) { return t.cron || (t.everyMs ? `every ${dur(t.everyMs)}` : "once at " + t.runAt); }
const words = (text) => text.split(/[\s,]+/).filter(Boolean);
const instant = (text) => /^\d+$/.test(text) ? Number(text) : text;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const appHref = (app, params) => `#/app/${encodeURIComponent(app)}${params && String(new URLSearchParams(params)) ? "?" + new URLSearchParams(params) : ""}`;
const timerHref = (app, id) => `#/timer/${encodeURIComponent(app)}/${id}`;

// A time in an IANA zone: "2026-11-28 09:00:00 +08:00".
function zoned(ms, zone) {
  try {
    const parts = {};
    for (const p of new Intl.DateTimeFormat("en-US", { timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "longOffset" }).formatToParts(new Date(ms))) parts[p.type] = p.value;
    const offset = parts.timeZoneName === "GMT" ? "+00:00" : parts.timeZoneName.replace("GMT", "");
    return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${offset}`;
  } catch (_) { return time(ms); }
}
// A timer's next fire: UTC, and in its own zone when that is not UTC.
function nextFire(t) {
  if (t.nextRunTimer === null || t.nextRunTimer === undefined) return "-";
  const zone = t.timezone && t.timezone !== "UTC" && t.timezone !== "Etc/UTC"
    ? ` <span class="zoned">${esc(zoned(t.nextRunTimer, t.timezone))} ${esc(t.timezone)}</span>` : "";
  return `${esc(time(t.nextRunTimer))}${zone}`;
}
function labelChips(app, labels) {
  return Object.entries(labels || {}).map(([k, v]) => `<a class="label" href="${appHref(app, { selector: `${k}=${v}` })}">${esc(k)}=${esc(v)}</a>`).join(" ");
}

class NeedsToken extends Error {}

// Calls in flight (the automation hooks wait for them).
let busy = 0;

// One API call; resolves to the reply's `result` (or the whole /v1 reply).
async function api(path, options) {
  busy++;
  try {
    const headers = { "content-type": "application/json" };
    const token = localStorage.getItem("xtimer-token");
    if (token) headers.authorization = "Bearer " + token;
    const resp = await fetch(path, Object.assign({ headers }, options || {}));
    let body = null;
    try { body = await resp.json(); } catch (_) { /* not JSON */ }
    if (resp.status === 401) throw new NeedsToken(body && body.msg || "a token is needed");
    const fail = (msg) => { const err = new Error(msg); err.status = resp.status; return err; };
    if (!body) throw fail(`${path.split("?")[0]}: HTTP ${resp.status}`);
    if (body.code !== 0) throw fail(body.msg || `HTTP ${resp.status}`);
    return path.startsWith("/v1/") ? body : body.result;
  } finally { busy--; }
}
const timerApi = (route, params, options) => api(`/api/xtimer/${route}?${new URLSearchParams(params)}`, options);
const post = (route, body) => api(`/api/xtimer/${route}`, { method: "POST", body: JSON.stringify(body) });
const v1 = (route, params) => api(`/v1/${route}${params ? "?" + new URLSearchParams(params) : ""}`);

function askToken(why) {
  const form = document.getElementById("token-form");
  form.hidden = false;
  main.innerHTML = `<p class="muted">${esc(why)}</p>`;
  document.getElementById("token").focus();
}
document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  localStorage.setItem("xtimer-token", document.getElementById("token").value.trim());
  document.getElementById("token-form").hidden = true;
  route();
});
document.getElementById("signout").addEventListener("click", () => { localStorage.removeItem("xtimer-token"); route(); });

// ---- Apps ----------------------------------------------------------------
function pauseWords(a) {
  return `${a.pausedUntil ? `until ${seconds(a.pausedUntil)}` : "until resumed"}${a.pauseReason ? `: ${a.pauseReason}` : ""}`;
}
// "30m", "2h", "1d" from now, RFC 3339 or Unix ms.
function untilValue(text) {
  const m = /^(\d+)\s*(s|m|min|h|d)$/.exec(text);
  if (!m) return instant(text);
  return Date.now() + Number(m[1]) * { s: 1000, m: 60000, min: 60000, h: 3600000, d: 86400000 }[m[2]];
}

async function appsPage(params) {
  const apps = (await timerApi("getApps", {})).list;
  const rows = apps.map((a) => `<tr><td><a href="${appHref(a.app)}">${esc(a.app)}</a></td><td>${a.timers}</td><td>${a.enabled}</td>
    <td class="paused-cell">${a.paused ? `${badge("paused")} ${esc(pauseWords(a))}` : `<span class="muted">no</span>`}</td>
    <td>${a.paused ? `<button class="plain" id="resume-${esc(a.app)}" data-resume="${esc(a.app)}">Resume</button>`
      : `<button class="plain" data-pause="${esc(a.app)}">Pause…</button>`}</td></tr>`).join("");
  main.innerHTML = `<h1>Apps</h1>
    <div class="actions"><a class="button" href="#/new">New timer</a></div>
    <table id="apps"><thead><tr><th>App</th><th>Timers</th><th>Enabled</th><th>Paused</th><th></th></tr></thead>
    <tbody>${rows || `<tr><td colspan="5" class="muted">No timer yet: <a href="#/new">create the first one</a>.</td></tr>`}</tbody></table>
    ${apps.length ? `<h2>Pause an app</h2>
    <form id="pause-form" class="bar">
      <label>App<select id="pause-app" name="app">${apps.map((a) => `<option${a.app === params.get("pause") ? " selected" : ""}>${esc(a.app)}</option>`).join("")}</select></label>
      <label>Until<input id="pause-until" name="until" placeholder="until resumed; 30m, 2h, RFC 3339 or ms"></label>
      <label>Reason<input id="pause-reason" name="reason" placeholder="maintenance"></label>
      <button id="pause-submit">Pause</button></form>
    <p class="muted">While an app is paused, each of its fires that comes due is recorded skipped (output <code>app paused: reason</code>) and not sent.</p>` : ""}`;
  for (const button of main.querySelectorAll("[data-resume]")) {
    button.addEventListener("click", async () => {
      try {
        await post("resumeApp", { app: button.dataset.resume });
        sayNext(`App ${button.dataset.resume} resumed: its fires go out again.`);
        await rerender();
      } catch (err) { say(err.message, true); }
    });
  }
  const form = document.getElementById("pause-form");
  if (!form) return;
  if (params.get("pause")) form.elements.reason.focus();
  for (const button of main.querySelectorAll("[data-pause]")) {
    button.addEventListener("click", () => { form.elements.app.value = button.dataset.pause; form.elements.reason.focus(); });
  }
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const app = form.elements.app.value, until = form.elements.until.value.trim(), reason = form.elements.reason.value.trim();
    const body = { app };
    if (until) body.until = untilValue(until);
    if (reason) body.reason = reason;
    try {
      const r = await post("pauseApp", body);
      sayNext(`App ${app} paused ${pauseWords({ pausedUntil: r.pausedUntil, pauseReason: r.reason })}.`);
      await rerender();
    } catch (err) { say(err.message, true); }
  });
}

// ---- An app's timers -------------------------------------------------------
const VERB = { enable: "Enable", disable: "Disable", trigger: "Run now", delete: "Delete" };
const DONE = { enable: "Enabled", disable: "Disabled", trigger: "Ran", delete: "Deleted" };

async function appPage(app, params) {
  const q = params.get("q") || "", status = params.get("status") || "", selector = params.get("selector") || "";
  const page = Math.max(1, Number(params.get("page") || 1));
  const filter = {};
  if (selector) filter.selector = selector;
  if (q) filter.q = q;
  if (status) filter.status = Number(status);
  localStorage.setItem("xtimer-app", app);
  main.innerHTML = `<p class="crumbs"><a href="#/apps">Apps</a> /</p>
    <h1>${esc(app)} <span id="app-state"></span></h1>
    <div id="pause-banner"></div>
    <form class="bar" id="search">
      <label>Name contains<input name="q" value="${attr(q)}"></label>
      <label>Status<select name="status">
        <option value="">any</option>${[1, 2, 4].map((s) => `<option value="${s}" ${String(s) === status ? "selected" : ""}>${TIMER_STATUS[s]}</option>`).join("")}
      </select></label>
      <label class="grow" data-field="selector">Labels<input id="selector" name="selector" value="${attr(selector)}" placeholder="team=billing, tier in (gold,silver), !legacy">
        <span class="field-error" id="selector-error"></span></label>
      <button>Search</button>
      <a class="button plain" href="#/new?${new URLSearchParams({ app })}">New timer</a>
    </form>
    <div id="bulk"></div>
    <div id="list"><p class="muted">Loading…</p></div>
    <h2>Flows</h2><div id="flows-box"><p class="muted">Loading…</p></div>
    <h2>Fires to be sent, next 10 minutes</h2><div id="forecast"><p class="muted">Loading…</p></div>
    <h2>Calendars</h2><div id="calendars-box"><p class="muted">Loading…</p></div>`;
  document.getElementById("search").addEventListener("submit", (e) => {
    e.preventDefault();
    const form = new URLSearchParams();
    for (const [k, v] of new FormData(e.target)) if (String(v).trim()) form.set(k, String(v).trim());
    location.hash = appHref(app, form);
  });
  const failed = (id, err) => { const box = document.getElementById(id); if (box) box.innerHTML = `<p class="muted">${esc(err.message)}</p>`; };
  await Promise.all([
    pauseBanner(app).catch(() => {}),
    timerList(app, filter, page).then((total) => bulkBar(app, filter, page, total)),
    forecastSection(app).catch((err) => failed("forecast", err)),
    calendarsSection(app).catch((err) => failed("calendars-box", err)),
    flowsSection(app).catch((err) => failed("flows-box", err)),
  ]);
}

async function pauseBanner(app) {
  const a = (await timerApi("getApps", {})).list.find((x) => x.app === app);
  if (!a || !a.paused) {
    document.getElementById("app-state").innerHTML = a ? `${badge("active", "running")} <a class="small" id="pause-link" href="#/apps?${new URLSearchParams({ pause: app })}">pause…</a>` : "";
    return;
  }
  document.getElementById("app-state").innerHTML = badge("paused");
  const box = document.getElementById("pause-banner");
  box.innerHTML = `<p class="banner" id="paused">Paused ${esc(pauseWords(a))}: its fires are recorded skipped, not sent.
    <button class="plain" id="resume-${esc(app)}">Resume</button></p>`;
  document.getElementById(`resume-${app}`).addEventListener("click", async () => {
    try { await post("resumeApp", { app }); sayNext(`App ${app} resumed.`); await rerender(); } catch (err) { say(err.message, true); }
  });
}

// The search's page of timers; resolves to the number of matches (null
// when the search was refused).
async function timerList(app, filter, page) {
  const box = document.getElementById("list");
  let result;
  try {
    result = await timerApi("getAppTimers", Object.assign({ app, pageIndex: page, pageSize: PAGE_SIZE }, filter));
  } catch (err) {
    if (err instanceof NeedsToken || !/^(selector|q|status)\b/.test(err.message)) throw err;
    // A selector's problem is said once, under its field (which keeps its
    // place: the message does not move the form); any other's, here.
    if (err.message.startsWith("selector")) {
      document.getElementById("selector-error").textContent = err.message;
      document.querySelector('[data-field="selector"]').classList.add("invalid");
      box.innerHTML = `<p class="muted" id="search-error">No timers listed: the label selector above was refused.</p>`;
    } else {
      box.innerHTML = `<p class="error" id="search-error">The search was refused: ${esc(err.message)}</p>`;
    }
    return null;
  }
  // The timers whose fires failed in the last hour, to mark them.
  const failing = new Map();
  try {
    for (const f of (await api("/ui/api/overview?" + new URLSearchParams({ app }))).failing) failing.set(f.timerId, f);
  } catch (err) { if (err instanceof NeedsToken) throw err; }
  const health = (t) => {
    const f = failing.get(t.id);
    if (!f) return "";
    const words = `${f.failed} of ${plural(f.fires, "fire")} failed in the last hour; last: ${f.lastOutput}`;
    return f.lastFailed ? ` <span class="badge s-failed" title="${esc(words)}">failing</span> <span class="muted small">${f.failed}/${f.fires} failed (1 h)</span>`
      : ` <span class="badge s-warn" title="${esc(words)}">${f.failed}/${f.fires} failed (1 h)</span>`;
  };
  const rows = result.list.map((t) => `<tr${failing.has(t.id) && failing.get(t.id).lastFailed ? ` class="row-failing"` : ""}>
      <td><a href="${timerHref(t.app, t.id)}">${t.id}</a></td>
      <td><a href="${timerHref(t.app, t.id)}">${esc(t.name)}</a></td>
      <td>${badge(TIMER_STATUS[t.status])}${health(t)}</td>
      <td><code>${esc(schedule(t))}</code></td><td>${esc(t.timezone)}</td>
      <td>${nextFire(t)}</td><td class="labels">${labelChips(app, t.labels)}</td></tr>`).join("");
  const pages = Math.max(1, Math.ceil(result.total / PAGE_SIZE));
  const link = (n) => appHref(app, Object.assign({}, filter, { page: n }));
  const searched = Object.keys(filter).length;
  box.innerHTML = `<table id="timers">
      <thead><tr><th>ID</th><th>Name</th><th>Status</th><th>Schedule</th><th>Time zone</th><th>Next fire</th><th>Labels</th></tr></thead>
      <tbody>${rows || `<tr><td colspan="7" class="muted">No timer matches.</td></tr>`}</tbody></table>
    <p class="muted" id="list-count">${plural(result.total, "timer")} ${searched ? (result.total === 1 ? "matches the search" : "match the search") : "in all"}; page ${page} of ${pages}.
    ${page > 1 ? `<a href="${link(page - 1)}">previous</a>` : ""}
    ${page < pages ? `<a href="${link(page + 1)}">next</a>` : ""}</p>`;
  return result.total;
}

function describe(filter) {
  const parts = [];
  if (filter.selector) parts.push(`labels ${filter.selector}`);
  if (filter.q) parts.push(`name containing “${filter.q}”`);
  if (filter.status) parts.push(`status ${TIMER_STATUS[filter.status]}`);
  return parts.join(", ");
}

// Bulk actions on the current search: a dry run shows the count, then a
// second button acts on exactly the timers counted.
function bulkBar(app, filter, page, total) {
  const box = document.getElementById("bulk");
  if (total === null) return;
  if (!Object.keys(filter).length) {
    box.innerHTML = `<p class="muted">Bulk actions act on a search: narrow it by name, status or labels first.</p>`;
    return;
  }
  box.innerHTML = `<div class="bulk"><span>On the ${plural(total, "timer")} of this search:</span>
    ${Object.keys(VERB).map((a) => `<button class="${a === "delete" ? "danger" : "plain"}" id="bulk-${a}" data-bulk="${a}">${VERB[a]}…</button>`).join("")}</div>
    <div id="bulk-preview"></div>`;
  const preview = document.getElementById("bulk-preview");
  for (const button of box.querySelectorAll("[data-bulk]")) {
    button.addEventListener("click", async () => {
      const action = button.dataset.bulk;
      try {
        const dry = await post("bulkTimers", Object.assign({ app, action, dryRun: true }, filter));
        if (!dry.matched) { preview.innerHTML = `<p class="confirm" id="bulk-count">No timer matches: nothing to do.</p>`; return; }
        preview.innerHTML = `<div class="confirm"><p id="bulk-count">${VERB[action]} <b>${plural(dry.matched, "timer")}</b> of ${esc(app)} matching ${esc(describe(filter))}?
          <span class="muted">(ids ${esc(dry.ids.slice(0, 20).join(", "))}${dry.ids.length > 20 ? ", …" : ""})</span></p>
          <button class="${action === "delete" ? "danger" : ""}" id="bulk-confirm">${VERB[action]} ${plural(dry.matched, "timer")}</button>
          <button class="plain" id="bulk-cancel">Cancel</button></div>`;
        document.getElementById("bulk-cancel").addEventListener("click", () => { preview.innerHTML = ""; });
        document.getElementById("bulk-confirm").addEventListener("click", async () => {
          // Exactly the timers counted, when the dry run listed them all.
          const body = Object.assign({ app, action }, filter);
          if (dry.ids.length === dry.matched) body.ids = dry.ids;
          try {
            const r = await post("bulkTimers", body);
            preview.innerHTML = `<p class="confirm" id="bulk-result">${DONE[action]} ${plural(r.changed, "timer")} of the ${r.matched} matched${r.changed < r.matched ? " (the others needed no change)" : ""}.</p>`;
            const newTotal = await timerList(app, filter, page);
            box.querySelector(".bulk span").textContent = `On the ${plural(newTotal || 0, "timer")} of this search:`;
          } catch (err) { preview.innerHTML = `<p class="error" id="bulk-result">${esc(err.message)}</p>`; }
        });
      } catch (err) { preview.innerHTML = `<p class="error" id="bulk-count">${esc(err.message)}</p>`; }
    });
  }
}

// ---- The timer form: every field, with its validation messages --------------
// [field, label, kind, hint]. Kinds: text, int, time (RFC 3339 or ms), zone,
// list, labels, headers, statuses, area, select, check.
const METHODS = ["POST", "GET", "PUT", "PATCH", "DELETE"];
const CHOICES = { "notifyHTTPParam.method": METHODS, misfire: ["fire_once", "skip", "fire_all"], overlap: ["allow", "skip", "buffer_one"] };
const WHEN = [["cron", "Cron", "text", "5, 6 or 7 fields: 0 30 2 * * ?"], ["runAt", "Once at", "time", "RFC 3339 or Unix ms"],
  ["everyMs", "Every (ms)", "int", "1000 or more"], ["anchorAt", "Anchor at", "time", "the interval counts from"],
  ["timezone", "Time zone", "zone", "IANA name; UTC when blank"], ["startAt", "Start at", "time", "no fire before"],
  ["endAt", "End before", "time", "no fire at or after"], ["maxFires", "Max fires", "int", "only the first N"],
  ["spreadMs", "Spread (ms)", "int", "0 to 3600000"], ["excludeCalendars", "Exclude calendars", "list", "calendar names"],
  ["misfireThresholdMs", "Catch-up window (ms)", "int", "1000 to 604800000"]];
const FORM_GROUPS = [
  ["Timer", [["name", "Name", "text", "unique in its app"], ["labels", "Labels", "labels", "team=billing, tier=gold"],
    ["status", "Enabled at once", "check"], ["description", "Description", "area", "what it is for (search finds it)"]]],
  ["When (one of cron, once at, every)", WHEN],
  ["Callback", [["notifyHTTPParam.url", "URL", "text", "http:// or https://"], ["notifyHTTPParam.method", "Method", "select"],
    ["notifyHTTPParam.header", "Headers", "headers", "one per line: Name: value"], ["notifyHTTPParam.body", "Body", "area", "sent as stored"],
    ["notifyHTTPParam.template", "Fill {{placeholders}} per fire", "check"],
    ["notifyAsyncflowParam.taskType", "Task type", "text", "registered with /v1/register_task"],
    ["notifyAsyncflowParam.taskStage", "First stage", "text"], ["notifyAsyncflowParam.context", "Context", "area"]]],
  ["Retries and failures", [["retry.maxAttempts", "Attempts", "int", "1 to 20"], ["retry.backoffMs", "First backoff (ms)", "int", "0 to 600000"],
    ["retry.noRetryStatuses", "Fail at once on", "statuses", "blank: 400 401 403 405 410 413 422; none: retry all"],
    ["misfire", "Misfire", "select"], ["overlap", "Overlap", "select"], ["callbackTimeoutMs", "Callback timeout (ms)", "int", "100 to 30000"],
    ["pauseAfterFailures", "Disable after N failures in a row", "int", "1 to 1000"], ["deleteAfterRun", "Delete after its run (one-shot)", "check"],
    ["onFailure.url", "On a failed fire, POST to", "text", "http:// or https://"]]],
];
const RANGES = { everyMs: [1000, Infinity], maxFires: [1, Infinity], spreadMs: [0, 3600000], misfireThresholdMs: [1000, 604800000],
  "retry.maxAttempts": [1, 20], "retry.backoffMs": [0, 600000], callbackTimeoutMs: [100, 30000], pauseAfterFailures: [1, 1000] };
const GROUPED = ["notifyHTTPParam", "notifyAsyncflowParam", "retry", "onFailure"];
// What an edit sends for a cleared field (updateTimer removes these with
// null or their empty value; the others keep their value).
const CLEARED = { description: null, spreadMs: 0, excludeCalendars: [], labels: {}, deleteAfterRun: false, startAt: null, endAt: null, maxFires: null, misfireThresholdMs: null };
// Clearing one of these only makes way for another kind of schedule.
const WHEN_KINDS = ["cron", "runAt", "everyMs", "anchorAt"];
let zoneNames = null;
function zoneList() {
  if (zoneNames === null) { try { zoneNames = Intl.supportedValuesOf("timeZone"); } catch (_) { zoneNames = []; } }
  return zoneNames;
}

function fieldValue(t, path, kind) {
  const v = path.split(".").reduce((o, k) => o === null || o === undefined ? undefined : o[k], t);
  if (v === null || v === undefined) return kind === "check" ? false : "";
  if (kind === "time") return typeof v === "number" ? time(v) : v;
  if (kind === "list") return v.join(", ");
  if (kind === "statuses") return v.length ? v.join(" ") : "none";
  if (kind === "labels") return Object.entries(v).map(([k, x]) => `${k}=${x}`).join(", ");
  if (kind === "headers") return Object.entries(v).map(([k, x]) => `${k}: ${x}`).join("\n");
  if (kind === "check") return path === "status" ? v === 2 : Boolean(v);
  return v;
}

function fieldHtml(prefix, [path, label, kind, hint], value) {
  const id = `${prefix}-${path.replace(/\./g, "-")}`;
  let input;
  if (kind === "check") input = `<input type="checkbox" id="${id}" name="${path}"${value ? " checked" : ""}>`;
  else if (kind === "select") input = `<select id="${id}" name="${path}">${CHOICES[path].map((o) => `<option${o === value ? " selected" : ""}>${o}</option>`).join("")}</select>`;
  else if (kind === "area" || kind === "headers") input = `<textarea id="${id}" name="${path}" rows="3" placeholder="${attr(hint)}">${attr(value)}</textarea>`;
  else input = `<input id="${id}" name="${path}" value="${attr(value)}"${kind === "zone" ? ` list="zones"` : ""} placeholder="${attr(hint)}">`;
  const callback = path.startsWith("notifyHTTPParam.") ? ` data-cb="http"` : path.startsWith("notifyAsyncflowParam.") ? ` data-cb="task"` : "";
  return `<label class="field${kind === "check" ? " check" : ""}${kind === "area" || kind === "headers" ? " wide" : ""}" data-field="${path}"${callback}>
    <span>${esc(label)}</span>${input}<span class="field-error"></span></label>`;
}

// The form's fields, filled from `t` (a timer, or defaults for a new one).
function timerFields(prefix, t, editing) {
  const task = Boolean(t.notifyAsyncflowParam);
  return FORM_GROUPS.map(([title, fields]) => `<fieldset><legend>${esc(title)}</legend>
      ${title === "Callback" ? `<label class="field"><span>Kind</span><select id="${prefix}-callback" name="callback">
        <option value="http"${task ? "" : " selected"}>HTTP request</option><option value="task"${task ? " selected" : ""}>asyncflow task</option></select></label>` : ""}
      ${fields.filter(([path]) => !(editing && path === "status")).map((f) => fieldHtml(prefix, f, fieldValue(t, f[0], f[2]))).join("")}</fieldset>`).join("")
    + `<fieldset><legend>More (JSON, merged into the timer)</legend><label class="field wide" data-field="extra"><span>Other fields</span>
      <textarea id="${prefix}-extra" name="extra" rows="2" placeholder='{"onFailure": {"url": "https://…", "header": {"X-Token": "t"}}}'></textarea>
      <span class="field-error"></span></label></fieldset>
    <datalist id="zones">${zoneList().map((z) => `<option value="${esc(z)}">`).join("")}</datalist>`;
}

// Shows the HTTP or the asyncflow fields as the callback kind says.
function wireCallbackKind(form) {
  const kind = form.elements.callback;
  const show = () => { for (const el of form.querySelectorAll("[data-cb]")) el.hidden = el.dataset.cb !== kind.value; };
  kind.addEventListener("change", show);
  show();
}

const changed = (el) => el.type === "checkbox" ? el.checked !== el.defaultChecked
  : el.tagName === "SELECT" ? !(el.selectedOptions[0] && el.selectedOptions[0].defaultSelected) : el.value !== el.defaultValue;

// One field's value from its input: `undefined` when blank; a problem
// (a string) pushed to `problems` when the input is not valid.
function parseField([path, , kind], el, problems) {
  const bad = (text) => { problems.push([path, text]); return undefined; };
  if (kind === "check") return el.checked;
  const raw = el.value.trim();
  if (kind === "select") return el.value;
  if (!raw) return undefined;
  switch (kind) {
    case "int": {
      if (!/^-?\d+$/.test(raw)) return bad(`must be a whole number, not “${raw}”`);
      const n = Number(raw), [lo, hi] = RANGES[path] || [-Infinity, Infinity];
      if (n < lo || n > hi) return bad(hi === Infinity ? `must be ${lo} or more` : `must be ${lo} to ${hi}`);
      return n;
    }
    case "time":
      if (/^\d+$/.test(raw)) return Number(raw);
      if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)$/i.test(raw) || Number.isNaN(Date.parse(raw))) {
        return bad("must be an RFC 3339 time with an offset (2026-12-01T09:00:00Z) or Unix ms");
      }
      return raw;
    case "zone":
      try { new Intl.DateTimeFormat("en-US", { timeZone: raw }); } catch (_) { return bad(`unknown time zone “${raw}” (an IANA name: Europe/Berlin)`); }
      return raw;
    case "list": return words(raw);
    case "labels": {
      const labels = {};
      for (const pair of raw.split(",").map((s) => s.trim()).filter(Boolean)) {
        const at = pair.indexOf("="), key = at < 0 ? pair : pair.slice(0, at).trim(), value = at < 0 ? "" : pair.slice(at + 1).trim();
        if (at < 0) return bad(`“${pair}” is not key=value`);
        if (!/^[a-z0-9._/-]{1,63}$/.test(key)) return bad(`key “${key}”: 1 to 63 of a-z 0-9 . _ / -`);
        if (value.length > 128) return bad(`${key}: a value is at most 128 characters`);
        labels[key] = value;
      }
      if (Object.keys(labels).length > 16) return bad("at most 16 labels");
      return labels;
    }
    case "headers": {
      const headers = {};
      const lines = el.value.split("\n").map((s) => s.trim());
      for (const [i, line] of lines.entries()) {
        if (!line) continue;
        const at = line.indexOf(":");
        if (at < 1) return bad(`line ${i + 1} is not Name: value`);
        headers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
      }
      return headers;
    }
    case "statuses": {
      if (raw === "none") return [];
      const list = words(raw).map(Number);
      const wrong = words(raw).find((w, i) => !/^\d+$/.test(w) || list[i] < 300 || list[i] > 599 || list[i] === 409);
      if (wrong !== undefined) return bad(`“${wrong}”: each is an HTTP status 300 to 599, not 409`);
      return list;
    }
    case "area": return el.value;
    default: {
      if (path === "name" && raw.length > 256) return bad("at most 256 characters");
      if (path.endsWith(".url") && !/^https?:\/\/[^\s/?#]+/i.test(raw)) return bad("must be an http:// or https:// URL with a host");
      return raw;
    }
  }
}

// The timer the form describes: for a new one, every filled field; when
// editing, only what changed (a cleared field is sent as null). Returns
// {fields, problems: [[field, text]]}.
function readTimerForm(form, editing) {
  const problems = [], fields = {}, groups = {};
  const kind = form.elements.callback.value;
  const kindChanged = editing && changed(form.elements.callback);
  for (const [, specs] of FORM_GROUPS) {
    for (const spec of specs) {
      const [path] = spec;
      const el = form.elements[path];
      if (!el) continue;
      if ((path.startsWith("notifyHTTPParam.") && kind !== "http") || (path.startsWith("notifyAsyncflowParam.") && kind !== "task")) continue;
      const value = parseField(spec, el, problems);
      const [head, tail] = path.split(".");
      if (tail) {
        const g = groups[head] || (groups[head] = { value: {}, changed: false });
        if (value !== undefined && value !== false) g.value[tail] = value;
        g.changed = g.changed || (editing && changed(el));
      } else if (path === "status") {
        if (!editing) fields.status = value ? 2 : 1;
      } else if (!editing) {
        if (value !== undefined && value !== false) fields[path] = value;
      } else if (changed(el)) {
        if (value !== undefined) fields[path] = value;
        else if (path in CLEARED) fields[path] = CLEARED[path];
        else if (!WHEN_KINDS.includes(path)) problems.push([path, "cannot be removed once set: give another value"]);
      }
    }
  }
  for (const head of GROUPED) {
    const g = groups[head];
    if (!g) continue;
    const filled = Object.keys(g.value).some((k) => k !== "method");
    if (editing && !g.changed && !(kindChanged && head.startsWith("notify"))) continue;
    if (filled) fields[head] = g.value;
    else if (editing && head === "onFailure") problems.push(["onFailure.url", "cannot be removed once set: give another URL"]);
  }
  // A callback of the other kind replaces the old one.
  if (kindChanged) fields[kind === "http" ? "notifyAsyncflowParam" : "notifyHTTPParam"] = null;
  if (kind === "http" && !(groups.notifyHTTPParam && groups.notifyHTTPParam.value.url) && !problems.some(([p]) => p === "notifyHTTPParam.url")) {
    problems.push(["notifyHTTPParam.url", "required: where each fire is sent"]);
  }
  if (kind === "task" && !(groups.notifyAsyncflowParam && groups.notifyAsyncflowParam.value.taskType)) {
    problems.push(["notifyAsyncflowParam.taskType", "required: the task type each fire creates"]);
  }
  if (!form.elements.name.value.trim()) problems.push(["name", "required"]);
  const when = WHEN_KINDS.slice(0, 3).filter((k) => form.elements[k].value.trim());
  if (!when.length) problems.push(["cron", "give one of cron, once at or every"]);
  if (when.length > 1) problems.push([when[1], `only one of cron, once at and every (${when.join(" and ")} are filled)`]);
  const extra = form.elements.extra.value.trim();
  if (extra) {
    try {
      const more = JSON.parse(extra);
      if (typeof more !== "object" || Array.isArray(more) || more === null) throw new Error("a JSON object is needed");
      Object.assign(fields, more);
    } catch (err) { problems.push(["extra", err.message]); }
  }
  return { fields, problems };
}

// "retry.maxAttempts: must be 1 to 20; cron `61 * * * *` is invalid: ..."
// -> [["retry.maxAttempts", "must be 1 to 20"], ["cron", "cron `61 * * * *` is invalid: ..."]].
function parseProblems(message) {
  return message.split("; ").map((part) => {
    const named = /^([A-Za-z][\w.[\]]*)(?:, [A-Za-z][\w.]*)*: (.+)$/s.exec(part);
    if (named) return [named[1], named[2]];
    const lead = /^([A-Za-z][\w.[\]]*) `/.exec(part);
    return [lead ? lead[1] : "", part];
  });
}

// Puts each problem under its field; those without one on top.
function showProblems(form, problems, intro) {
  for (const el of form.querySelectorAll(".field-error")) el.textContent = "";
  for (const el of form.querySelectorAll(".invalid")) el.classList.remove("invalid");
  const box = form.querySelector(".form-errors");
  const loose = [];
  for (const [path, text] of problems) {
    let field = path, label = null;
    while (field && !(label = form.querySelector(`[data-field="${CSS.escape(field)}"]`))) {
      const shorter = field.replace(/(\.|\[)[^.[]*$/, "");
      field = shorter === field ? "" : shorter;
    }
    if (label && !label.hidden) {
      const slot = label.querySelector(".field-error");
      slot.textContent = slot.textContent ? `${slot.textContent}; ${text}` : text;
      label.classList.add("invalid");
    } else loose.push(path ? `${path}: ${text}` : text);
  }
  box.hidden = !problems.length;
  box.innerHTML = problems.length ? `<p><b>${esc(intro)}</b> ${plural(problems.length, "problem")}${loose.length < problems.length ? ", shown by the fields" : ""}.</p>
    ${loose.length ? `<ul>${loose.map((l) => `<li>${esc(l)}</li>`).join("")}</ul>` : ""}` : "";
  if (problems.length) box.scrollIntoView({ block: "nearest" });
}

async function newTimerPage(params) {
  const app = params.get("app") || localStorage.getItem("xtimer-app") || "";
  const defaults = { status: 2, notifyHTTPParam: { method: "POST" }, retry: { maxAttempts: 3, backoffMs: 1000 }, misfire: "fire_once", overlap: "allow" };
  main.innerHTML = `<p class="crumbs"><a href="#/apps">Apps</a> /${app ? ` <a href="${appHref(app)}">${esc(app)}</a> /` : ""}</p>
    <h1>New timer</h1>
    <form id="creator" class="timer-form" novalidate>
      <div class="form-errors" id="creator-errors" hidden></div>
      <fieldset><legend>App</legend><label class="field" data-field="app"><span>App</span>
        <input id="f-app" name="app" value="${attr(app)}" list="app-names" placeholder="e.g. billing"><span class="field-error"></span></label>
        <datalist id="app-names"></datalist></fieldset>
      ${timerFields("f", defaults, false)}
      <div class="actions"><button id="create-submit">Create timer</button></div>
    </form>`;
  const form = document.getElementById("creator");
  wireCallbackKind(form);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const { fields, problems } = readTimerForm(form, false);
    const appName = form.elements.app.value.trim();
    if (!appName) problems.unshift(["app", "required: the app the timer belongs to"]);
    else if (appName.length > 128) problems.unshift(["app", "at most 128 characters"]);
    if (problems.length) { showProblems(form, problems, "Not created:"); return; }
    fields.app = appName;
    try {
      const r = await post("createTimer", fields);
      localStorage.setItem("xtimer-app", appName);
      sayNext(`Timer ${fields.name} created (#${r.id}).`);
      location.hash = timerHref(appName, r.id);
    } catch (err) {
      if (err instanceof NeedsToken) throw err;
      showProblems(form, parseProblems(err.message), "The server refused it:");
    }
  });
  timerApi("getApps", {}).then((r) => {
    document.getElementById("app-names").innerHTML = r.list.map((a) => `<option value="${esc(a.app)}">`).join("");
  }, () => {});
}

// ---- An app's forecast and calendars -----------------------------------------
async function forecastSection(app) {
  const f = await timerApi("getForecast", { app, seconds: 600 });
  document.getElementById("forecast").innerHTML = `<div class="chart">${bars(f)}</div>
    <dl id="forecast-summary"><dt>Peak</dt><dd>${f.peak.fires ? `${plural(f.peak.fires, "fire")} in one second, at ${time(f.peak.runTimer)}` : "none"}</dd>
    <dt>Total</dt><dd>${plural(f.total, "fire")} in ${plural(f.perSecond.length / 60, "minute")} from ${time(f.from)}</dd></dl>`;
}

function bars(f) {
  const W = 1000, H = 120, T = 14, B = 18, n = f.perSecond.length, w = W / n, max = Math.max(1, ...f.perSecond);
  const rects = f.perSecond.map((v, i) => v ? `<rect x="${(i * w).toFixed(1)}" width="${Math.max(w, 1).toFixed(1)}" y="${(H - B - (v / max) * (H - T - B)).toFixed(1)}"
    height="${((v / max) * (H - T - B)).toFixed(1)}" fill="${f.from + i * 1000 === f.peak.runTimer ? "#c6362f" : "#2f6fde"}"><title>${time(f.from + i * 1000)}: ${v}</title></rect>` : "").join("");
  const xt = [0, 0.5, 1].map((p) => `<text x="${p * W}" y="${H - 4}" text-anchor="${["start", "middle", "end"][p * 2]}" font-size="11" fill="#6b7383">${time(f.from + p * n * 1000).slice(11)}</text>`).join("");
  const label = f.total ? `<text x="2" y="11" font-size="11" fill="#6b7383">${max} a second</text>`
    : `<text x="${W / 2}" y="${H / 2}" text-anchor="middle" fill="#6b7383">No fire planned.</text>`;
  return `<svg class="bars" viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="img" aria-label="fires per second">${label}${rects}${xt}</svg>`;
}

async function calendarsSection(app) {
  const box = document.getElementById("calendars-box");
  const list = (await timerApi("getAppCalendars", { app })).list;
  const events = (n) => `${n} event${n === 1 ? "" : "s"}`;
  const ranges = (c) => c.ranges.map((r) => `${time(r.from)}/${time(r.to)}`).join(" ");
  const rows = list.map((c) => `<tr><td><a href="" data-cal="${esc(c.name)}">${esc(c.name)}</a></td><td>${esc(c.weekdays.join(" ")) || "-"}</td>
    <td>${esc(c.dates.join(" ")) || "-"}</td><td class="out">${esc(ranges(c)) || "-"}</td><td>${c.ics ? events(c.ics.split("BEGIN:VEVENT").length - 1) : "-"}</td>
    <td>${esc(c.modifyTime)}</td><td><button class="plain" data-del="${esc(c.name)}">Delete</button></td></tr>`).join("");
  box.innerHTML = `<table id="calendars"><thead><tr><th>Name</th><th>Weekdays</th><th>Dates</th><th>Ranges</th><th>ICS</th><th>Modified</th><th></th></tr></thead>
    <tbody>${rows || `<tr><td colspan="7" class="muted">No calendar in ${esc(app)}.</td></tr>`}</tbody></table>
    <form id="calendar-form" class="bar"><label>Name<input name="name" required></label>
      <label>Weekdays<input name="weekdays" placeholder="SAT SUN"></label><label>Dates<input name="dates" placeholder="2026-12-25 2026-12-26"></label>
      <label>Ranges<input name="ranges" placeholder="from/to (RFC 3339 or ms)"></label>
      <label class="wide">ICS text<textarea name="ics" placeholder="BEGIN:VCALENDAR…"></textarea></label>
      <button>Put calendar</button><span class="muted">A calendar of the same name is replaced; click a name to edit it.</span></form>`;
  const form = document.getElementById("calendar-form");
  for (const a of box.querySelectorAll("[data-cal]")) {
    a.addEventListener("click", (e) => {
      e.preventDefault();
      const c = list.find((c) => c.name === a.dataset.cal);
      form.elements.name.value = c.name;
      form.elements.weekdays.value = c.weekdays.join(" ");
      form.elements.dates.value = c.dates.join(" ");
      form.elements.ranges.value = ranges(c);
      form.elements.ics.value = c.ics || "";
    });
  }
  for (const button of box.querySelectorAll("[data-del]")) {
    button.addEventListener("click", async () => {
      if (!confirm(`Delete calendar ${button.dataset.del}?`)) return;
      try {
        await timerApi("delCalendar", { app, name: button.dataset.del }, { method: "DELETE" });
        say(`Calendar ${button.dataset.del} deleted.`);
        await calendarsSection(app);
      } catch (err) { say(err.message, true); }
    });
  }
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const v = (k) => form.elements[k].value;
    const body = { app, name: v("name").trim(), weekdays: words(v("weekdays").toUpperCase()), dates: words(v("dates")),
      ranges: words(v("ranges")).map((r) => { const [from, to] = r.split("/"); return { from: instant(from), to: instant(to || "") }; }) };
    if (v("ics").trim()) body.ics = v("ics");
    try {
      await post("putCalendar", body);
      say(`Calendar ${body.name} saved.`);
      await calendarsSection(app);
    } catch (err) { say(err.message, true); }
  });
}

// ---- An app's flows (API 1g) --------------------------------------------------
// A limit from its field: undefined when blank (kept), null for "none"
// (removed), else a number above 0 (a whole one for `whole`).
function flowLimit(name, text, whole) {
  if (!text) return undefined;
  if (text.toLowerCase() === "none") return null;
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0 || (whole && !Number.isInteger(n))) {
    throw new Error(`${name} must be ${whole ? "a whole number, 1 or more" : "a number above 0"}, or none (“${text}”)`);
  }
  return n;
}

async function flowsSection(app) {
  const box = document.getElementById("flows-box");
  const list = (await timerApi("getFlows", { app })).list;
  const rows = list.map((f) => `<tr><td><a href="" data-flow="${esc(f.key)}">${esc(f.key)}</a></td>
    <td>${f.ratePerSec === null ? "-" : `${esc(f.ratePerSec)}/s`}</td><td>${esc(f.parallelism)}</td>
    <td>${f.paused ? badge("paused") : badge("active", "running")}</td><td>${esc(f.waiting)}</td><td>${esc(f.inFlight)}</td>
    <td>${f.paused ? `<button class="plain" id="flow-resume-${esc(f.key)}" data-flow-paused="false" data-key="${esc(f.key)}">Resume</button>`
      : `<button class="plain" id="flow-pause-${esc(f.key)}" data-flow-paused="true" data-key="${esc(f.key)}">Pause</button>`}
      <button class="plain" id="flow-del-${esc(f.key)}" data-flow-del="${esc(f.key)}">Remove…</button></td></tr>`).join("");
  box.innerHTML = `<table id="flows"><thead><tr><th>Flow</th><th>Rate</th><th>Parallelism</th><th>Paused</th><th>Waiting</th><th>In flight</th><th></th></tr></thead>
    <tbody>${rows || `<tr><td colspan="7" class="muted">No flow of ${esc(app)} has limits.</td></tr>`}</tbody></table>
    <div id="flow-confirm"></div>
    <form id="flow-form" class="bar"><label>Flow key<input id="flow-key" name="key" required placeholder="flowKey, else host:port"></label>
      <label>Rate per second<input id="flow-rate" name="rate" placeholder="0.5; none removes"></label>
      <label>Parallelism<input id="flow-parallelism" name="parallelism" placeholder="4; none removes"></label>
      <button id="flow-submit">Set limits</button>
      <span class="muted">A blank field keeps the flow's value. Fires over a flow's limits, or while it is paused, wait (late, not failed).</span></form>`;
  const form = document.getElementById("flow-form");
  for (const a of box.querySelectorAll("[data-flow]")) {
    a.addEventListener("click", (e) => {
      e.preventDefault();
      const f = list.find((f) => f.key === a.dataset.flow);
      form.elements.key.value = f.key;
      form.elements.rate.value = f.ratePerSec === null ? "" : f.ratePerSec;
      form.elements.parallelism.value = f.parallelism === null ? "" : f.parallelism;
    });
  }
  for (const button of box.querySelectorAll("[data-flow-paused]")) {
    button.addEventListener("click", async () => {
      const key = button.dataset.key, paused = button.dataset.flowPaused === "true";
      try {
        await post("setFlowLimit", { app, key, paused });
        say(paused ? `Flow ${key} paused: its fires wait.` : `Flow ${key} resumed.`);
        await flowsSection(app);
      } catch (err) { say(err.message, true); }
    });
  }
  // Removing asks first, in the page (its waiting fires then go out unheld).
  const ask = document.getElementById("flow-confirm");
  for (const button of box.querySelectorAll("[data-flow-del]")) {
    button.addEventListener("click", () => {
      const f = list.find((f) => f.key === button.dataset.flowDel);
      ask.innerHTML = `<div class="confirm"><p>Remove the limits of flow <b>${esc(f.key)}</b>? Its waiting fires (${esc(f.waiting)}) then go out unheld.</p>
        <button class="danger" id="flow-del-confirm">Remove limits</button> <button class="plain" id="flow-del-cancel">Cancel</button></div>`;
      document.getElementById("flow-del-cancel").addEventListener("click", () => { ask.innerHTML = ""; });
      document.getElementById("flow-del-confirm").addEventListener("click", async () => {
        try {
          await timerApi("delFlowLimit", { app, key: f.key }, { method: "DELETE" });
          say(`Flow ${f.key}: limits removed.`);
          await flowsSection(app);
        } catch (err) { say(err.message, true); }
      });
    });
  }
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const v = (k) => form.elements[k].value.trim();
    try {
      const body = { app, key: v("key") };
      const rate = flowLimit("Rate per second", v("rate"), false), parallelism = flowLimit("Parallelism", v("parallelism"), true);
      if (rate !== undefined) body.ratePerSec = rate;
      if (parallelism !== undefined) body.parallelism = parallelism;
      const f = await post("setFlowLimit", body);
      say(`Flow ${f.key}: rate ${f.ratePerSec === null ? "none" : `${f.ratePerSec}/s`}, parallelism ${f.parallelism === null ? "none" : f.parallelism}.`);
      await flowsSection(app);
    } catch (err) { say(err.message, true); }
  });
}

// ---- One timer ------------------------------------------------------------
// How the timer's recent fires went (newest first): failing when the
// newest that ended failed.
function fireHealth(list) {
  const ended = list.filter((f) => f.status === 2 || f.status === 3);
  const failed = ended.filter((f) => f.status === 3).length;
  return { failing: ended.length > 0 && ended[0].status === 3, failed, of: ended.length };
}

async function timerPage(app, id) {
  const [t, fires] = await Promise.all([timerApi("getTimer", { id, app }), timerApi("getTimerTasks", { id, app, pageSize: 50 })]);
  const ref = { id, app };
  const health = fireHealth(fires.list);
  const healthBadge = health.failing ? `<span class="badge s-failed" id="health">failing: ${health.failed} of the last ${plural(health.of, "fire")} failed</span>`
    : health.failed ? `<span class="badge s-warn" id="health">${health.failed} of the last ${plural(health.of, "fire")} failed</span>` : "";
  const h = t.notifyHTTPParam;
  const notify = h ? `${esc(h.method)} ${esc(h.url)}${h.template ? ` <span class="muted">(templated)</span>` : ""}`
    : `asyncflow task ${esc(t.notifyAsyncflowParam && t.notifyAsyncflowParam.taskType)}`;
  const retry = `${plural(t.retry.maxAttempts, "attempt")}, ${t.retry.backoffMs} ms backoff${t.retry.noRetryStatuses
    ? (t.retry.noRetryStatuses.length ? `; fails at once on ${t.retry.noRetryStatuses.join(" ")}` : "; retries every answer") : ""}`;
  const now = Date.now();
  main.innerHTML = `<p class="crumbs"><a href="#/apps">Apps</a> / <a href="${appHref(app)}">${esc(app)}</a> /</p>
    <h1>${esc(t.name)} <span class="muted">#${t.id} in ${esc(t.app)}</span> ${badge(TIMER_STATUS[t.status])} ${healthBadge}</h1>
    <div class="actions">
      ${t.status === 2 ? `<button class="plain" id="disable" data-act="unableTimer">Disable</button>` : `<button id="enable" data-act="enableTimer">Enable</button>`}
      <button class="plain" id="run-now" data-act="triggerTimer">Run now</button>
      <button class="plain" id="edit">Edit</button>
      <button class="danger" id="delete" data-act="delTimer">Delete</button>
    </div>
    <form id="editor" class="timer-form" novalidate hidden>
      <div class="form-errors" id="editor-errors" hidden></div>
      <p class="muted">Fields left as they are keep their value; a cleared field is removed.</p>
      ${timerFields("e", t, true)}
      <div class="actions"><button id="save-submit">Save</button></div></form>
    <div class="cols"><div><h2>Definition</h2><dl id="definition">
      <dt>Schedule</dt><dd><code>${esc(schedule(t))}</code>${t.everyMs ? ` <span class="muted">(${t.everyMs} ms from ${time(t.anchorAt)})</span>` : ""}</dd>
      <dt>Time zone</dt><dd>${esc(t.timezone)}</dd>
      <dt>Next fire</dt><dd id="next-fire">${t.status === 1 ? `<span class="muted">none while disabled</span>` : nextFire(t)}</dd>
      <dt>Labels</dt><dd>${labelChips(app, t.labels) || "none"}</dd>
      ${t.description ? `<dt>Description</dt><dd>${esc(t.description)}</dd>` : ""}
      ${t.dedupeKey ? `<dt>Dedupe key</dt><dd><code>${esc(t.dedupeKey)}</code> <span class="muted">(the app's one live timer of this key)</span></dd>` : ""}
      <dt>Starts</dt><dd>${t.startAt ? time(t.startAt) : "at creation"}</dd>
      <dt>Ends before</dt><dd>${t.endAt ? time(t.endAt) : "no end"}</dd>
      <dt>Max fires</dt><dd>${t.maxFires ? `${t.maxFires} (${esc(t.firesLeft)} left)` : "no limit"}</dd>
      <dt>Spread</dt><dd>${t.spreadMs ? `each fire sent within ${dur(t.spreadMs)} of its scheduled time` : "none"}</dd>
      <dt>Excluded calendars</dt><dd>${esc((t.excludeCalendars || []).join(", ") || "none")}</dd>
      <dt>Catch-up window</dt><dd>${t.misfireThresholdMs ? dur(t.misfireThresholdMs) : "the node's default"}</dd>
      <dt>Callback</dt><dd>${notify}</dd>
      <dt>Retry</dt><dd>${esc(retry)}</dd>
      <dt>Misfire</dt><dd>${esc(t.misfire)}</dd>
      <dt>Overlap</dt><dd>${esc(t.overlap || "allow")}</dd>
      ${t.callbackTimeoutMs ? `<dt>Callback timeout</dt><dd>${dur(t.callbackTimeoutMs)}</dd>` : ""}
      ${t.pauseAfterFailures ? `<dt>Disable after</dt><dd>${plural(t.pauseAfterFailures, "failed fire")} in a row</dd>` : ""}
      ${t.onFailure ? `<dt>On failure</dt><dd>${esc(t.onFailure.method)} ${esc(t.onFailure.url)}</dd>` : ""}
      ${t.onMissed ? `<dt>On missed</dt><dd>${esc(t.onMissed.method)} ${esc(t.onMissed.url)}</dd>` : ""}
      ${t.onLate ? `<dt>On late</dt><dd>past ${esc(t.onLate.thresholdMs)} ms: ${esc(t.onLate.notify.method)} ${esc(t.onLate.notify.url)}</dd>` : ""}
      ${t.deleteAfterRun ? `<dt>After its run</dt><dd>deleted</dd>` : ""}
      ${t.pauseReason ? `<dt>Paused by receiver</dt><dd class="note">${esc(t.pauseReason)}</dd>` : ""}
      <dt>Recent fires</dt><dd>${health.of ? `${health.failed} of the last ${plural(health.of, "fire")} failed` : "none ended yet"}</dd>
      <dt>Last 24 h</dt><dd id="stats">${statsWords(t.stats)}</dd>
      <dt>Created</dt><dd>${esc(t.createTime)}</dd><dt>Modified</dt><dd>${esc(t.modifyTime)}</dd>
    </dl></div><div><h2>Next fires</h2><div id="next"><p class="muted">Loading…</p></div></div></div>
    <h2>Fires</h2><p class="muted">Click a fire to see why it went as it did.</p><div id="history">${fireTable(fires.list, fires.total)}</div>
    <form id="explain-form" class="bar"><label>Why (not) at<input id="explain-at" name="at" placeholder="Unix ms or RFC 3339"></label>
      <button class="plain" id="explain-submit">Explain</button></form>
    <div id="explain"></div>
    <div class="cols">
      <form id="backfill-form" class="panel"><h2>Backfill</h2>
        <p class="muted">Fires every scheduled time of the window that has no fire record (the timer was disabled, or every node was down), oldest first.</p>
        <div class="bar"><label>From<input id="backfill-from" name="from" value="${seconds(now - 3600000)}"></label>
          <label>To<input id="backfill-to" name="to" value="${seconds(now)}"></label>
          <label>Max fires<input id="backfill-max" name="maxFires" size="6" placeholder="limit"></label>
          <button id="backfill-submit">Backfill</button></div>
        <p id="backfill-result" class="result"></p></form>
      <form id="replay-form" class="panel"><h2>Replay failed fires</h2>
        <p class="muted">Sends each failed or missed fire of the window again, with its original Idempotency-Key.</p>
        <div class="bar"><label>From<input id="replay-from" name="from" value="${seconds(now - 3600000)}"></label>
          <label>To<input id="replay-to" name="to" value="${seconds(now)}"></label>
          <button id="replay-submit">Replay failed fires</button></div>
        <p id="replay-result" class="result"></p></form>
    </div>
    <h2>Change history</h2><div id="changes"><p class="muted">Loading…</p></div>`;
  for (const button of main.querySelectorAll("[data-act]")) {
    button.addEventListener("click", async () => {
      const act = button.dataset.act;
      if (act === "delTimer" && !confirm(`Delete timer ${t.name}?`)) return;
      const method = act === "delTimer" ? "DELETE" : act === "triggerTimer" ? "POST" : "GET";
      try {
        const result = await timerApi(act, ref, { method });
        if (act === "delTimer") { sayNext(`Timer ${t.name} deleted.`); location.hash = appHref(app); return; }
        sayNext(act === "triggerTimer" ? `Fired now (run time ${time(result.runTimer)}).` : act === "enableTimer" ? "Enabled." : "Disabled.");
        await rerender();
      } catch (err) { say(err.message, true); }
    });
  }
  const editor = document.getElementById("editor");
  wireCallbackKind(editor);
  document.getElementById("edit").addEventListener("click", () => { editor.hidden = !editor.hidden; });
  editor.addEventListener("submit", async (e) => {
    e.preventDefault();
    const { fields, problems } = readTimerForm(editor, true);
    if (problems.length) { showProblems(editor, problems, "Not saved:"); return; }
    try {
      await post("updateTimer", Object.assign(fields, { id: Number(id), app }));
      sayNext("Saved."); await rerender();
    } catch (err) {
      if (err instanceof NeedsToken) throw err;
      showProblems(editor, parseProblems(err.message), "The server refused it:");
    }
  });
  const refresh = async () => {
    const fresh = await timerApi("getTimerTasks", { id, app, pageSize: 50 });
    document.getElementById("history").innerHTML = fireTable(fresh.list, fresh.total);
    await changeHistory(app, id);
  };
  windowAction("backfill", async (form) => {
    const body = { id: Number(id), app, from: instant(form.elements.from.value.trim()), to: instant(form.elements.to.value.trim()) };
    if (form.elements.maxFires.value.trim()) body.maxFires = Number(form.elements.maxFires.value.trim());
    const r = await post("backfillTimer", body);
    return `Backfilled: ${plural(r.count, "fire")} made, sent oldest first.`;
  }, "Backfill refused", refresh);
  windowAction("replay", async (form) => {
    const r = await post("replayFires", { app, id: Number(id), from: instant(form.elements.from.value.trim()), to: instant(form.elements.to.value.trim()) });
    return `Replayed: ${plural(r.count, "failed or missed fire")} sent again.`;
  }, "Replay failed", refresh);
  document.getElementById("history").addEventListener("click", (e) => {
    const row = e.target.closest("tr[data-run]");
    if (row) explainFire(app, id, row.dataset.run).catch((err) => say(err.message, true));
  });
  document.getElementById("explain-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = document.getElementById("explain-at").value.trim();
    const ms = /^\d+$/.test(text) ? text : String(Date.parse(text));
    explainFire(app, id, ms).catch((err) => say(err.message, true));
  });
  nextFires(t).catch((err) => { document.getElementById("next").innerHTML = `<p class="muted">${esc(err.message)}</p>`; });
  await changeHistory(app, id);
}

// `stats` of getTimer in words: the last 24 hours of fires.
function statsWords(st) {
  if (!st) return "-";
  if (!st.fires) return "no fire";
  const late = st.lateP50Ms === null ? "" : `; late p50 ${esc(st.lateP50Ms)} ms, p99 ${esc(st.lateP99Ms)} ms`;
  return `${plural(st.fires, "fire")}: ${esc(st.succeeded)} succeeded, ${esc(st.failed)} failed, ${esc(st.missed)} missed${late}`;
}

// explainFire for the scheduled time `run` (ms), shown under the fires.
async function explainFire(app, id, run) {
  const box = document.getElementById("explain");
  let r;
  try {
    r = await timerApi("explainFire", { id, app, runTimer: run });
  } catch (err) {
    if (err instanceof NeedsToken) throw err;
    box.innerHTML = `<p class="error" id="explain-verdict">${esc(err.message)}</p>`;
    return;
  }
  const rows = r.timeline.map((m) => `<tr><td>${esc(m.at)}</td><td>${esc(m.event)}</td><td>${esc(m.node || "")}</td><td class="out">${esc(m.detail || "")}</td></tr>`).join("");
  box.innerHTML = `<div class="panel"><h3>Fire at ${esc(time(Number(run)))}</h3><p id="explain-verdict"><b>${esc(r.verdict)}</b></p>
    <table id="explain-timeline"><thead><tr><th>At</th><th>Event</th><th>Node</th><th>Detail</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

// A form acting on a window of time; its result or error shown under it,
// then `after` (the fires and the history shown again).
function windowAction(name, run, failure, after) {
  const form = document.getElementById(`${name}-form`), out = document.getElementById(`${name}-result`);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    out.className = "result";
    out.textContent = "…";
    try {
      out.textContent = await run(form);
      await after().catch(() => {});
    } catch (err) {
      if (err instanceof NeedsToken) { askToken(err.message); return; }
      out.className = "result error";
      out.textContent = `${failure}: ${err.message}`;
    }
  });
}

async function changeHistory(app, id) {
  const box = document.getElementById("changes");
  let list;
  try {
    list = (await timerApi("getTimerHistory", { id, app })).list;
  } catch (err) {
    if (err instanceof NeedsToken) throw err;
    box.innerHTML = `<p class="muted" id="history-missing">History not available (${esc(err.message)}).</p>`;
    return;
  }
  const short = (v) => {
    const text = v === null || v === undefined ? "–" : typeof v === "string" ? v : JSON.stringify(v);
    return text.length > 120 ? text.slice(0, 119) + "…" : text;
  };
  // A time (a backfill's or replay's `window`, `startAt`, `runAt`...) as a
  // time, not as Unix ms.
  const isMs = (v) => typeof v === "number" && v > 1e11 && v < 1e14;
  const timed = (field) => field === "window" || /^(runAt|startAt|endAt|anchorAt|until|pausedUntil)/.test(field);
  const value = (field, v) => {
    if (timed(field) && isMs(v)) return time(v);
    if (timed(field) && Array.isArray(v) && v.length === 2 && v.every(isMs)) return `${time(v[0])} to ${time(v[1])}`;
    return short(v);
  };
  const changes = (c) => Object.entries(c || {}).map(([field, pair]) => Array.isArray(pair) && pair.length === 2
    ? `<div><b>${esc(field)}</b>: ${esc(value(field, pair[0]))} → ${esc(value(field, pair[1]))}</div>` : `<div><b>${esc(field)}</b>: ${esc(value(field, pair))}</div>`).join("");
  const rows = list.map((e) => `<tr><td>${esc(typeof e.at === "number" ? time(e.at) : e.at)}</td><td>${esc(e.action)}</td><td>${esc(e.by)}</td>
    <td class="out">${changes(e.changes) || "-"}</td></tr>`).join("");
  box.innerHTML = `<table id="change-history"><thead><tr><th>At</th><th>Action</th><th>By</th><th>Changes</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="4" class="muted">No change recorded.</td></tr>`}</tbody></table>`;
}

const NOTES = { gap: "DST gap: moved past the skipped hour", overlap: "DST overlap: first occurrence" };
async function nextFires(t) {
  const box = document.getElementById("next");
  if (!t.cron && !t.everyMs) { box.innerHTML = `<p>Once, at ${esc(t.runAt)}.</p>`; return; }
  if (t.maxFires && !t.firesLeft) { box.innerHTML = `<p>No scheduled time left (${plural(t.maxFires, "fire")} used).</p>`; return; }
  const q = { timezone: t.timezone, count: 10 };
  if (t.cron) q.cron = t.cron; else Object.assign(q, { everyMs: t.everyMs, anchorAt: t.anchorAt });
  if (t.startAt > Date.now()) q.startAt = t.startAt;
  if (t.endAt) q.endAt = t.endAt;
  if (t.maxFires) q.maxFires = t.firesLeft; // counted from now on
  if (t.excludeCalendars && t.excludeCalendars.length) Object.assign(q, { app: t.app, excludeCalendars: t.excludeCalendars.join(",") });
  let list;
  try {
    list = (await timerApi("previewCron", q)).list;
  } catch (err) {
    // A server without previewCron: the planned fires, without DST notes.
    const upcoming = await timerApi("getTimerTasks", { id: t.id, app: t.app, upcoming: true, pageSize: 10 });
    list = upcoming.list.map((f) => ({ runTimer: f.runTimer, runTime: time(f.runTimer), note: null }));
  }
  const rows = list.map((f) => `<tr><td>${esc(f.runTime)}</td><td>${f.note ? `<span class="note">${esc(NOTES[f.note] || f.note.replace(/^excluded:/, "not fired: excluded by calendar "))}</span>` : ""}</td></tr>`).join("");
  // A disabled timer's schedule still has times; none of them goes out.
  const disabled = t.status === 1 && list.length
    ? `<p class="note" id="next-disabled">The timer is disabled: these times will not go out unless it is enabled first.</p>` : "";
  box.innerHTML = `${disabled}<table id="next-fires"><thead><tr><th>Run time (${esc(t.timezone)})</th><th>Note</th></tr></thead><tbody>${rows || `<tr><td colspan="2" class="muted">None planned.</td></tr>`}</tbody></table>`;
}

function fireTable(list, total) {
  const rows = list.map((f) => `<tr class="explainable" data-run="${esc(f.scheduledTimer !== undefined ? f.scheduledTimer : f.runTimer)}"><td>${time(f.runTimer)}${f.manual ? " <span class=\"muted\">(manual)</span>" : ""}${f.replayed ? " <span class=\"muted\">(replayed)</span>" : ""}${f.scheduledTimer !== undefined && f.scheduledTimer !== f.runTimer
    ? ` <span class="muted">(scheduled ${time(f.scheduledTimer)}, spread +${dur(f.runTimer - f.scheduledTimer)})</span>` : ""}</td>
    <td>${badge(FIRE_STATUS[f.status])}</td><td>${esc(f.attempt)}</td><td>${esc(f.costTime)}</td><td class="out">${esc(f.output)}</td></tr>`).join("");
  return `<table id="fires"><thead><tr><th>Run time</th><th>Status</th><th>Attempts</th><th>Late (ms)</th><th>Output</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="5" class="muted">No fire yet.</td></tr>`}</tbody></table>
    <p class="muted">${list.length} of ${plural(total, "fire")}, newest first.</p>`;
}

// ---- Lateness and failing timers -------------------------------------------
async function latenessPage() {
  const o = await api("/ui/api/overview");
  const failing = o.failing.map((f) => `<tr><td><a href="${timerHref(f.app, f.timerId)}">${esc(f.name || f.timerId)}</a>
    ${f.lastFailed ? badge("failed", "failing") : ""}</td>
    <td>${esc(f.app)}</td><td>${f.failed} of ${f.fires}</td><td>${esc(f.lastFailedAt)}</td><td class="out">${esc(f.lastOutput)}</td></tr>`).join("");
  const fires = o.minutes.reduce((n, m) => n + m.fires, 0);
  main.innerHTML = `<h1>Lateness, last hour</h1>
    <div class="chart" id="chart">${chart(o)}<div class="legend"><span><i style="background:#2f6fde"></i>p50</span>
    <span><i style="background:#c6362f"></i>p99</span><span class="muted">${plural(fires, "fire")}${o.sampled ? " (the newest 50,000)" : ""}; lateness = callback leaving minus its scheduled time${o.paced ? `; ${o.paced} backfilled or replayed ${o.paced === 1 ? "fire" : "fires"} left out (late by design)` : ""}</span></div></div>
    <h2>Timers whose recent fires failed</h2>
    <table id="failing"><thead><tr><th>Timer</th><th>App</th><th>Failed</th><th>Last failure</th><th>Last output</th></tr></thead>
    <tbody>${failing || `<tr><td colspan="5" class="muted">No failed fire in the last hour.</td></tr>`}</tbody></table>`;
}

// The gridline step: the smallest of 1, 2, 2.5 or 5 times a power of ten
// that puts `max` under four steps, so every label is the exact value of
// its line (never rounded).
function gridStep(max) {
  const target = max / 4, power = Math.pow(10, Math.floor(Math.log10(target)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * power >= target * (1 - 1e-9)) return m * power;
  return 10 * power;
}
const tickLabel = (v) => Number(v.toPrecision(6)).toLocaleString("en-US", { maximumFractionDigits: 6 });

function chart(o) {
  const W = 1000, H = 240, B = 30, T = 10;
  const from = o.fromMs - (o.fromMs % 60000), span = 61 * 60000;
  const step = gridStep(Math.max(1, ...o.minutes.map((m) => m.p99Ms))), max = step * 4;
  // The left margin holds the longest y label whole ("100,000 ms": at 11
  // px, under 7 units a character).
  const L = Math.max(60, 12 + 7 * Math.max(...[0, 1, 2, 3, 4].map((i) => `${tickLabel(step * i)} ms`.length)));
  const x = (ms) => L + ((ms - from) / span) * (W - L - 10);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const line = (key, color) => o.minutes.length
    ? `<polyline fill="none" stroke="${color}" stroke-width="2" points="${o.minutes.map((m) => `${x(m.minuteMs).toFixed(1)},${y(m[key]).toFixed(1)}`).join(" ")}"/>` +
      o.minutes.map((m) => `<circle cx="${x(m.minuteMs).toFixed(1)}" cy="${y(m[key]).toFixed(1)}" r="2.5" fill="${color}"><title>${time(m.minuteMs)}: ${key === "p50Ms" ? "p50" : "p99"} ${m[key]} ms (${plural(m.fires, "fire")})</title></circle>`).join("")
    : "";
  const ticks = [0, 1, 2, 3, 4].map((i) => { const v = step * i, at = y(v).toFixed(1); return `<line class="grid" x1="${L}" x2="${W - 10}" y1="${at}" y2="${at}" stroke="#eceff3"/>
    <text class="ytick" x="${L - 6}" y="${at}" dy="4" text-anchor="end" font-size="11" fill="#6b7383">${tickLabel(v)} ms</text>`; }).join("");
  const xt = [0, 15, 30, 45, 60].map((m) => { const ms = from + m * 60000; return `<text x="${x(ms)}" y="${H - 8}" text-anchor="middle" font-size="11" fill="#6b7383">${new Date(ms).toISOString().slice(11, 16)}</text>`; }).join("");
  const empty = o.minutes.length ? "" : `<text x="${W / 2}" y="${H / 2}" text-anchor="middle" fill="#6b7383">No fire in the last hour.</text>`;
  return `<svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="img" aria-label="lateness p50 and p99 per minute">${ticks}${xt}${line("p50Ms", "#2f6fde")}${line("p99Ms", "#c6362f")}${empty}</svg>`;
}

// ---- Nodes and shards --------------------------------------------------------
// "2026-11-27 11:37#0" ... "#15" -> "2026-11-27 11:37 #0–15 (16)".
function shardRanges(shards) {
  const groups = new Map(), other = [];
  for (const s of shards) {
    const at = s.lastIndexOf("#"), n = Number(s.slice(at + 1));
    if (at < 0 || !/^\d+$/.test(s.slice(at + 1))) { other.push(s); continue; }
    const key = s.slice(0, at);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(n);
  }
  const spans = (nums) => {
    nums.sort((a, b) => a - b);
    const out = [];
    for (const n of nums) {
      const last = out[out.length - 1];
      if (last && n === last[1] + 1) last[1] = n; else out.push([n, n]);
    }
    return out.map(([a, b]) => a === b ? `#${a}` : `#${a}–${b}`).join(", ");
  };
  return [...groups].map(([key, nums]) => `<div class="shard-group"><span class="muted">${esc(key)}</span> ${spans(nums)} <span class="muted">(${nums.length})</span></div>`).join("")
    + (other.length ? `<div class="shard-group">${esc(other.join(", "))}</div>` : "");
}

async function clusterPage() {
  const nodes = await timerApi("nodes", {});
  const rows = nodes.list.map((n) => `<tr><td>${esc(n.id)}</td><td>${esc(n.host)}</td><td>${esc(n.listen)}</td><td>${esc(n.startedAt)}</td>
    <td>${esc(n.heartbeatAgeMs)} ms ago</td><td>${n.shardsHeld}</td><td class="shards">${shardRanges(n.shards) || "-"}</td></tr>`).join("");
  main.innerHTML = `<h1>Cluster</h1><h2>Nodes</h2>
    <table id="nodes"><thead><tr><th>Node</th><th>Host</th><th>Listen</th><th>Started</th><th>Heartbeat</th><th>Shards held</th><th>Shards (minute, buckets)</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="7" class="muted">No node has reported.</td></tr>`}</tbody></table>
    <p class="muted">The asyncflow task types are on the <a href="#/tasks">Tasks</a> page.</p>`;
}

// ---- asyncflow tasks -----------------------------------------------------------
const taskHref = (id) => `#/task/${encodeURIComponent(id)}`;
const typeHref = (type, status) => `#/tasks/${encodeURIComponent(type)}${status ? `?status=${status}` : ""}`;
const unix = (s) => s ? time(s * 1000) : "-";

async function tasksPage() {
  const cfgs = (await v1("get_task_schedule_cfg_list")).task_schedule_cfg_list || [];
  const counts = await Promise.all(cfgs.map((c) => v1("get_task_counts_by_type", { task_type: c.task_type }).then((r) => r.counts, () => "-")));
  const rows = cfgs.map((c, i) => `<tr><td><a href="${typeHref(c.task_type)}">${esc(c.task_type)}</a></td><td>${esc(counts[i])}</td>
    <td>${esc(c.schedule_limit)}</td><td>${esc(c.schedule_interval)} s</td><td>${esc(c.max_processing_time)} s</td><td>${esc(c.max_retry_num)}</td>
    <td>${esc(c.retry_interval)} s</td></tr>`).join("");
  main.innerHTML = `<h1>asyncflow task types</h1>
    <table id="task-types"><thead><tr><th>Task type</th><th>Tasks</th><th>Schedule limit</th><th>Interval</th><th>Max processing</th>
    <th>Max retries</th><th>Retry interval</th></tr></thead><tbody>${rows || `<tr><td colspan="7" class="muted">No task type registered.</td></tr>`}</tbody></table>`;
}

async function taskTypePage(type, params) {
  const status = Number(params.get("status") || 0);
  const limit = 200;
  const [reply, count] = await Promise.all([v1("get_task_list", { task_type: type, status, limit }),
    v1("get_task_counts_by_type", { task_type: type }).then((r) => r.counts, () => "-")]);
  const list = reply.task_list || [];
  const tabs = [0, 1, 2, 3, 4].map((s) => `<a class="tab${s === status ? " active" : ""}" id="tab-${s ? TASK_STATUS[s] : "any"}" href="${typeHref(type, s)}">${s ? TASK_STATUS[s] : "any status"}</a>`).join("");
  const rows = list.map((d) => `<tr><td><a href="${taskHref(d.task_id)}">${esc(d.task_id)}</a></td><td>${esc(d.user_id)}</td><td>${esc(d.task_stage)}</td>
    <td>${badge(TASK_STATUS[d.status] || d.status)}</td><td>${d.crt_retry_num} of ${d.max_retry_num}</td><td>${unix(d.order_time)}</td><td>${esc(d.modify_time)}</td></tr>`).join("");
  main.innerHTML = `<p class="crumbs"><a href="#/tasks">Task types</a> /</p><h1>${esc(type)} <span class="muted">${esc(count)} tasks</span></h1>
    <nav class="tabs">${tabs}</nav>
    <table id="tasks"><thead><tr><th>Task</th><th>User</th><th>Stage</th><th>Status</th><th>Retries</th><th>Order time</th><th>Modified</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="7" class="muted">No ${status ? TASK_STATUS[status] + " " : ""}task due.</td></tr>`}</tbody></table>
    <p class="muted">${plural(list.length, "task")}${list.length >= limit ? ` (the first ${limit})` : ""}, oldest order time first; a task waiting for a retry is listed once its order time has come.</p>`;
}

async function taskPage(taskId) {
  const d = (await v1("get_task", { task_id: taskId })).task_data;
  const pretty = (text) => { try { return JSON.stringify(JSON.parse(text), null, 2); } catch (_) { return text; } };
  let log = null;
  try { log = d.schedule_log ? JSON.parse(d.schedule_log) : null; } catch (_) { /* another worker's format */ }
  const attempts = log && log.LastData ? [log.LastData, ...(log.HistoryDatas || [])].filter((a) => a && (a.TraceId || a.Stage || a.ErrMsg || a.StartTime)) : [];
  const logRows = attempts.map((a, i) => `<tr><td>${i === 0 ? "last" : i + 1}</td><td>${esc(a.Stage)}</td><td>${a.Outcome ? badge(a.Outcome) : "-"}</td>
    <td>${esc(a.StartTime)}</td><td>${esc(a.EndTime)}</td><td>${esc(a.Cost)}</td><td class="out">${esc(a.ErrMsg || "")}</td><td class="out">${esc(a.TraceId)}</td></tr>`).join("");
  const interval = d.max_retry_interval < 0 ? `${-d.max_retry_interval} s, fixed` : `${d.max_retry_interval} s, doubling`;
  main.innerHTML = `<p class="crumbs"><a href="#/tasks">Task types</a> / <a href="${typeHref(d.task_type)}">${esc(d.task_type)}</a> /</p>
    <h1>${esc(d.task_id)} ${badge(TASK_STATUS[d.status] || d.status)}</h1>
    <div class="cols"><div><h2>Task</h2><dl id="task">
      <dt>Type</dt><dd><a href="${typeHref(d.task_type)}">${esc(d.task_type)}</a></dd>
      <dt>Stage</dt><dd>${esc(d.task_stage || "-")}</dd><dt>User</dt><dd>${esc(d.user_id || "-")}</dd>
      <dt>Status</dt><dd>${esc(TASK_STATUS[d.status] || d.status)}</dd>
      <dt>Priority</dt><dd>${d.priority === null ? "none" : `${esc(d.priority)} s head start`}</dd>
      <dt>Retries</dt><dd>${d.crt_retry_num} of ${d.max_retry_num} used</dd>
      <dt>Retry interval</dt><dd>${esc(interval)}</dd>
      <dt>Order time</dt><dd>${unix(d.order_time)}${d.status === 1 && d.order_time * 1000 > Date.now() ? " (next attempt not before)" : ""}</dd>
      <dt>Created</dt><dd>${esc(d.create_time)}</dd><dt>Modified</dt><dd>${esc(d.modify_time)}</dd>
    </dl></div><div><h2>Context</h2><pre id="task-context">${esc(pretty(d.context) || "(empty)")}</pre></div></div>
    <h2>Schedule log</h2>
    ${attempts.length ? `<table id="schedule-log"><thead><tr><th>Attempt</th><th>Stage</th><th>Outcome</th><th>Started</th><th>Ended</th><th>Cost</th><th>Error</th><th>Trace</th></tr></thead>
      <tbody>${logRows}</tbody></table>` : `<p class="muted" id="schedule-log-empty">${d.schedule_log ? "" : "No attempt logged yet."}</p>`}
    ${d.schedule_log ? `<details><summary>Raw schedule_log</summary><pre>${esc(pretty(d.schedule_log))}</pre></details>` : ""}`;
}

// ---- Routing ---------------------------------------------------------------
const NAV = { apps: "apps", app: "apps", timers: "apps", timer: "apps", new: "new", lateness: "lateness", cluster: "cluster", tasks: "tasks", task: "tasks" };

async function render() {
  const hash = location.hash.slice(1) || "/apps";
  const at = hash.indexOf("?");
  const path = at < 0 ? hash : hash.slice(0, at), params = new URLSearchParams(at < 0 ? "" : hash.slice(at + 1));
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const page = NAV[parts[0]] || "apps";
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.page === page);
  document.getElementById("signout").hidden = !localStorage.getItem("xtimer-token");
  if (nextFlash !== null) { say(nextFlash); nextFlash = null; }
  try {
    if (parts[0] === "timer" && parts.length === 3) await timerPage(parts[1], parts[2]);
    else if (parts[0] === "app" && parts[1]) await appPage(parts[1], params);
    else if (parts[0] === "timers" && params.get("app")) await appPage(params.get("app"), params);
    else if (parts[0] === "new") await newTimerPage(params);
    else if (parts[0] === "lateness") await latenessPage();
    else if (parts[0] === "cluster") await clusterPage();
    else if (parts[0] === "tasks" && parts[1]) await taskTypePage(parts[1], params);
    else if (parts[0] === "tasks") await tasksPage();
    else if (parts[0] === "task" && parts[1]) await taskPage(parts[1]);
    else await appsPage(params);
    document.body.dataset.ready = parts[0] || "apps";
  } catch (err) {
    if (err instanceof NeedsToken) askToken(err.message);
    else main.insertAdjacentHTML("beforeend", `<p class="error" id="error">${esc(err.message)}</p>`);
    document.body.dataset.ready = "error";
  }
  return params;
}

// Re-renders the page (after an action), counted as busy for the hooks.
async function rerender() {
  busy++;
  try { await render(); } finally { busy--; }
}

async function route() {
  busy++;
  let params;
  try { params = await render(); } finally { busy--; }
  await automate(params);
}

// Automation hooks, honoured only in a browser under automation
// (navigator.webdriver: headless Chromium with --enable-automation, as the
// tests run it), never from a link a person opens: `set.<element id>=value`
// fills inputs, then `click=<id>,<id>` clicks buttons in order, each once
// it exists and the calls of the one before have ended; `measure=<id>,...`
// then records where those elements stand.
let automated = false;
async function automate(params) {
  if (automated || !navigator.webdriver || !params) return;
  const sets = [...params].filter(([k]) => k.startsWith("set."));
  const clicks = (params.get("click") || "").split(",").filter(Boolean);
  const measures = (params.get("measure") || "").split(",").filter(Boolean);
  if (!sets.length && !clicks.length && !measures.length) return;
  automated = true;
  const element = async (id) => {
    for (let i = 0; i < 100; i++) {
      const el = document.getElementById(id);
      if (el && !el.disabled) return el;
      await sleep(30);
    }
    return null;
  };
  const settle = async () => { await sleep(50); for (let i = 0; i < 300 && busy > 0; i++) await sleep(20); };
  for (const [k, value] of sets) {
    const el = await element(k.slice(4));
    if (!el) { document.body.dataset.automation = `missing ${k.slice(4)}`; return; }
    if (el.type === "checkbox") el.checked = value === "true"; else el.value = value;
    el.dispatchEvent(new Event("input", { bubbles: true }));
    el.dispatchEvent(new Event("change", { bubbles: true }));
  }
  for (const id of clicks) {
    const el = await element(id);
    if (!el) { document.body.dataset.automation = `missing ${id}`; return; }
    el.click();
    await settle();
  }
  // `measure=<id>,<id>`: where each element stands once the page settled
  // (`top,left,width,height` in CSS pixels), for layout checks.
  await settle();
  const boxes = {};
  for (const id of measures) {
    const el = document.getElementById(id);
    if (el) { const r = el.getBoundingClientRect(); boxes[id] = [r.top, r.left, r.width, r.height].map(Math.round).join(","); }
  }
  if (measures.length) document.body.dataset.measured = JSON.stringify(boxes);
  document.body.dataset.automation = "done";
}

window.addEventListener("hashchange", () => { if (nextFlash === null) say(""); route(); });
route();
