// xtimer console: hash routes over the JSON APIs. No build step.
"use strict";

const TIMER_STATUS = { 1: "disabled", 2: "enabled", 3: "deleted", 4: "completed" };
const FIRE_STATUS = { 0: "pending", 1: "running", 2: "succeeded", 3: "failed", 4: "skipped", 5: "missed" };
const main = document.getElementById("main");
const flash = document.getElementById("flash");

function esc(value) {
  return String(value === null || value === undefined ? "-" : value)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
function badge(word) { return `<span class="badge s-${esc(word)}">${esc(word)}</span>`; }
function time(ms) { return ms === null || ms === undefined ? "-" : new Date(ms).toISOString().replace(".000Z", "Z"); }
function say(text, error) { flash.textContent = text || ""; flash.className = error ? "error" : ""; }
function dur(ms) {
  for (const [unit, n] of [["h", 3600000], ["min", 60000], ["s", 1000]]) if (ms >= n && ms % n === 0) return `${ms / n} ${unit}`;
  return `${ms} ms`;
}
function schedule(t) { return t.cron || (t.everyMs ? `every ${dur(t.everyMs)}` : "once at " + t.runAt); }
const words = (text) => text.split(/[\s,]+/).filter(Boolean);
const instant = (text) => /^\d+$/.test(text) ? Number(text) : text;

class NeedsToken extends Error {}

// One API call; resolves to the reply's `result` (or the whole /v1 reply).
async function api(path, options) {
  const headers = { "content-type": "application/json" };
  const token = localStorage.getItem("xtimer-token");
  if (token) headers.authorization = "Bearer " + token;
  const resp = await fetch(path, Object.assign({ headers }, options || {}));
  let body = null;
  try { body = await resp.json(); } catch (_) { /* not JSON */ }
  if (resp.status === 401) throw new NeedsToken(body && body.msg || "a token is needed");
  if (!body) throw new Error(`${path}: HTTP ${resp.status}`);
  if (body.code !== 0) throw new Error(body.msg || `HTTP ${resp.status}`);
  return path.startsWith("/v1/") ? body : body.result;
}
const timerApi = (route, params, options) => api(`/api/xtimer/${route}?${new URLSearchParams(params)}`, options);

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

// ---- Timers of an app --------------------------------------------------
async function timersPage(params) {
  const app = params.get("app") || localStorage.getItem("xtimer-app") || "";
  const q = params.get("q") || "";
  const status = params.get("status") || "";
  const page = Math.max(1, Number(params.get("page") || 1));
  main.innerHTML = `<h1>Timers</h1>
    <form class="bar" id="search">
      <label>App<input name="app" value="${esc(app)}" placeholder="app" required></label>
      <label>Name contains<input name="q" value="${esc(q)}"></label>
      <label>Status<select name="status">
        <option value="">any</option>${[1, 2, 4].map((s) => `<option value="${s}" ${String(s) === status ? "selected" : ""}>${TIMER_STATUS[s]}</option>`).join("")}
      </select></label>
      <button>Search</button>${app ? `<button type="button" class="plain" id="new-timer">New timer</button>` : ""}
    </form>${app ? timerForm("creator", {}, { name: "", status: 1, notifyHTTPParam: { url: "https://", method: "POST" }, retry: { maxAttempts: 3, backoffMs: 1000 } }) : ""}
    <div id="list"></div>${app ? `<h2>Fires to be sent, next 10 minutes</h2><div id="forecast"><p class="muted">Loading…</p></div>
    <h2>Calendars</h2><div id="calendars-box"><p class="muted">Loading…</p></div>` : ""}`;
  document.getElementById("search").addEventListener("submit", (e) => {
    e.preventDefault();
    const form = new URLSearchParams(new FormData(e.target));
    location.hash = "#/timers?" + form;
  });
  if (!app) { document.getElementById("list").innerHTML = `<p class="muted">Name an app to list its timers.</p>`; return; }
  localStorage.setItem("xtimer-app", app);
  const creator = document.getElementById("creator");
  document.getElementById("new-timer").addEventListener("click", () => { creator.hidden = !creator.hidden; });
  creator.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const result = await api("/api/xtimer/createTimer", { method: "POST", body: JSON.stringify(Object.assign(readTimerForm(creator, false), { app })) });
      location.hash = `#/timer/${encodeURIComponent(app)}/${result.id}`;
    } catch (err) { say(err.message, true); }
  });
  const failed = (id, err) => { const box = document.getElementById(id); if (box) box.innerHTML = `<p class="muted">${esc(err.message)}</p>`; };
  await Promise.all([
    timerList(app, q, status, page),
    forecastSection(app).catch((err) => failed("forecast", err)),
    calendarsSection(app).catch((err) => failed("calendars-box", err)),
  ]);
}

async function timerList(app, q, status, page) {
  const result = await timerApi("getAppTimers", { app, pageIndex: page, pageSize: 500 });
  const shown = result.list.filter((t) => (!q || t.name.includes(q)) && (!status || String(t.status) === status));
  const rows = shown.map((t) => `<tr>
      <td><a href="#/timer/${encodeURIComponent(t.app)}/${t.id}">${t.id}</a></td>
      <td><a href="#/timer/${encodeURIComponent(t.app)}/${t.id}">${esc(t.name)}</a></td>
      <td>${badge(TIMER_STATUS[t.status])}</td>
      <td><code>${esc(schedule(t))}</code></td><td>${esc(t.timezone)}</td>
      <td>${esc(t.nextRunTime)}</td></tr>`).join("");
  const pages = Math.max(1, Math.ceil(result.total / 500));
  document.getElementById("list").innerHTML = `<table id="timers">
      <thead><tr><th>ID</th><th>Name</th><th>Status</th><th>Schedule</th><th>Time zone</th><th>Next fire</th></tr></thead>
      <tbody>${rows || `<tr><td colspan="6" class="muted">No timer matches.</td></tr>`}</tbody></table>
    <p class="muted">${shown.length} shown of ${result.total} timers in <b>${esc(app)}</b> (page ${page} of ${pages}).
    ${page > 1 ? `<a href="#/timers?${new URLSearchParams({ app, q, status, page: page - 1 })}">previous</a>` : ""}
    ${page < pages ? `<a href="#/timers?${new URLSearchParams({ app, q, status, page: page + 1 })}">next</a>` : ""}</p>`;
}

// The create and edit form: the fields saying when as inputs ([field, label,
// kind]: "n" a number, "t" RFC 3339 or Unix ms, "l" a list), the rest as JSON.
const WHEN = [["cron", "Cron"], ["runAt", "Once at", "t"], ["everyMs", "Every (ms)", "n"], ["anchorAt", "Anchor at", "t"],
  ["timezone", "Time zone"], ["startAt", "Start at", "t"], ["endAt", "End before", "t"], ["maxFires", "Max fires", "n"],
  ["spreadMs", "Spread (ms)", "n"], ["excludeCalendars", "Exclude calendars", "l"], ["misfireThresholdMs", "Catch-up window (ms)", "n"]];
function timerForm(id, t, rest) {
  const value = (v, kind) => v === undefined || v === null ? "" : kind === "l" ? v.join(", ") : kind === "t" && typeof v === "number" ? time(v) : v;
  return `<form id="${id}" class="timer-form" hidden>
    <p class="muted">One of cron, once at or every; times in RFC 3339 or Unix ms${t.id ? "; fields left as they are keep their value" : ""}.</p>
    <div class="when">${WHEN.map(([k, label, kind]) => `<label>${label}<input name="${k}" value="${esc(value(t[k], kind))}"></label>`).join("")}</div>
    <label>Other fields (JSON)<textarea name="rest">${esc(JSON.stringify(rest, null, 2))}</textarea></label>
    <div class="actions"><button>${t.id ? "Save" : "Create"}</button></div></form>`;
}
function readTimerForm(form, editing) {
  const fields = JSON.parse(form.elements.rest.value || "{}");
  for (const [k, , kind] of WHEN) {
    const input = form.elements[k], v = input.value.trim();
    if (editing && input.value === input.defaultValue) continue;
    if (kind === "l") { if (v || editing) fields[k] = words(v); }
    else if (v) fields[k] = kind === "n" ? Number(v) : kind === "t" ? instant(v) : v;
    else if (editing && k === "spreadMs") fields[k] = 0;
  }
  return fields;
}

async function forecastSection(app) {
  const f = await timerApi("getForecast", { app, seconds: 600 });
  document.getElementById("forecast").innerHTML = `<div class="chart">${bars(f)}</div>
    <dl id="forecast-summary"><dt>Peak</dt><dd>${f.peak.fires ? `${f.peak.fires} fires in one second, at ${time(f.peak.runTimer)}` : "none"}</dd>
    <dt>Total</dt><dd>${f.total} fires in ${f.perSecond.length / 60} minutes from ${time(f.from)}</dd></dl>`;
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
      await api("/api/xtimer/putCalendar", { method: "POST", body: JSON.stringify(body) });
      say(`Calendar ${body.name} saved.`);
      await calendarsSection(app);
    } catch (err) { say(err.message, true); }
  });
}

// ---- One timer ------------------------------------------------------------
async function timerPage(app, id) {
  const t = await timerApi("getTimer", { id, app });
  const ref = { id, app };
  const editable = { name: t.name, retry: t.retry, misfire: t.misfire };
  if (t.notifyHTTPParam) editable.notifyHTTPParam = t.notifyHTTPParam;
  const notify = t.notifyHTTPParam
    ? `${esc(t.notifyHTTPParam.method)} ${esc(t.notifyHTTPParam.url)}`
    : `asyncflow task ${esc(t.notifyAsyncflowParam && t.notifyAsyncflowParam.taskType)}`;
  main.innerHTML = `<h1>${esc(t.name)} <span class="muted">#${t.id} in ${esc(t.app)}</span> ${badge(TIMER_STATUS[t.status])}</h1>
    <div class="actions">
      ${t.status === 2 ? `<button class="plain" data-act="unableTimer">Disable</button>` : `<button data-act="enableTimer">Enable</button>`}
      <button class="plain" data-act="triggerTimer">Run now</button>
      <button class="plain" id="edit">Edit</button>
      <button class="danger" data-act="delTimer">Delete</button>
    </div>
    ${timerForm("editor", t, editable)}
    <div class="cols"><div><h2>Definition</h2><dl id="definition">
      <dt>Schedule</dt><dd><code>${esc(schedule(t))}</code>${t.everyMs ? ` <span class="muted">(${t.everyMs} ms from ${time(t.anchorAt)})</span>` : ""}</dd>
      <dt>Time zone</dt><dd>${esc(t.timezone)}</dd>
      <dt>Starts</dt><dd>${t.startAt ? time(t.startAt) : "at creation"}</dd>
      <dt>Ends before</dt><dd>${t.endAt ? time(t.endAt) : "no end"}</dd>
      <dt>Max fires</dt><dd>${t.maxFires ? `${t.maxFires} (${esc(t.firesLeft)} left)` : "no limit"}</dd>
      <dt>Spread</dt><dd>${t.spreadMs ? `each fire sent within ${dur(t.spreadMs)} of its scheduled time` : "none"}</dd>
      <dt>Excluded calendars</dt><dd>${esc((t.excludeCalendars || []).join(", ") || "none")}</dd>
      <dt>Catch-up window</dt><dd>${t.misfireThresholdMs ? dur(t.misfireThresholdMs) : "the node's default"}</dd>
      <dt>Callback</dt><dd>${notify}</dd>
      <dt>Retry</dt><dd>${esc(t.retry.maxAttempts)} attempts, ${esc(t.retry.backoffMs)} ms backoff</dd>
      <dt>Misfire</dt><dd>${esc(t.misfire)}</dd>
      <dt>Next fire</dt><dd>${esc(t.nextRunTime)}</dd>
      <dt>Created</dt><dd>${esc(t.createTime)}</dd><dt>Modified</dt><dd>${esc(t.modifyTime)}</dd>
    </dl></div><div><h2>Next fires</h2><div id="next"><p class="muted">Loading…</p></div></div></div>
    <h2>History</h2><div id="history"><p class="muted">Loading…</p></div>`;
  for (const button of main.querySelectorAll("[data-act]")) {
    button.addEventListener("click", async () => {
      const act = button.dataset.act;
      if (act === "delTimer" && !confirm(`Delete timer ${t.name}?`)) return;
      const method = act === "delTimer" ? "DELETE" : act === "triggerTimer" ? "POST" : "GET";
      try {
        const result = await timerApi(act, ref, { method });
        if (act === "delTimer") { say(`Timer ${t.name} deleted.`); location.hash = "#/timers?app=" + encodeURIComponent(app); return; }
        say(act === "triggerTimer" ? `Fired now (run time ${time(result.runTimer)}).` : "Done.");
        route();
      } catch (err) { say(err.message, true); }
    });
  }
  const editor = document.getElementById("editor");
  document.getElementById("edit").addEventListener("click", () => { editor.hidden = !editor.hidden; });
  editor.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const fields = Object.assign(readTimerForm(editor, true), { id: Number(id), app });
      await api("/api/xtimer/updateTimer", { method: "POST", body: JSON.stringify(fields) });
      say("Saved."); route();
    } catch (err) { say(err.message, true); }
  });
  nextFires(t).catch((err) => { document.getElementById("next").innerHTML = `<p class="muted">${esc(err.message)}</p>`; });
  const history = await timerApi("getTimerTasks", { id, app, pageSize: 50 });
  document.getElementById("history").innerHTML = fireTable(history.list, history.total);
}

const NOTES = { gap: "DST gap: moved past the skipped hour", overlap: "DST overlap: first occurrence" };
async function nextFires(t) {
  const box = document.getElementById("next");
  if (!t.cron && !t.everyMs) { box.innerHTML = `<p>Once, at ${esc(t.runAt)}.</p>`; return; }
  if (t.maxFires && !t.firesLeft) { box.innerHTML = `<p>No scheduled time left (${t.maxFires} fires used).</p>`; return; }
  const q = { timezone: t.timezone, count: 10 };
  if (t.cron) q.cron = t.cron; else Object.assign(q, { everyMs: t.everyMs, anchorAt: t.anchorAt });
  if (t.startAt > Date.now()) q.startAt = t.startAt;
  if (t.endAt) q.endAt = t.endAt;
  if (t.maxFires) q.maxFires = t.firesLeft; // counted from now on
  if (t.excludeCalendars) Object.assign(q, { app: t.app, excludeCalendars: t.excludeCalendars.join(",") });
  let list;
  try {
    list = (await timerApi("previewCron", q)).list;
  } catch (err) {
    // A server without previewCron: the planned fires, without DST notes.
    const upcoming = await timerApi("getTimerTasks", { id: t.id, app: t.app, upcoming: true, pageSize: 10 });
    list = upcoming.list.map((f) => ({ runTimer: f.runTimer, runTime: time(f.runTimer), note: null }));
  }
  const rows = list.map((f) => `<tr><td>${esc(f.runTime)}</td><td>${f.note ? `<span class="note">${esc(NOTES[f.note] || f.note.replace(/^excluded:/, "not fired: excluded by calendar "))}</span>` : ""}</td></tr>`).join("");
  box.innerHTML = `<table id="next-fires"><thead><tr><th>Run time (${esc(t.timezone)})</th><th>Note</th></tr></thead><tbody>${rows || `<tr><td colspan="2" class="muted">None planned.</td></tr>`}</tbody></table>`;
}

function fireTable(list, total) {
  const rows = list.map((f) => `<tr><td>${time(f.runTimer)}${f.manual ? " <span class=\"muted\">(manual)</span>" : ""}${f.scheduledTimer !== undefined && f.scheduledTimer !== f.runTimer
    ? ` <span class="muted">(scheduled ${time(f.scheduledTimer)}, spread +${dur(f.runTimer - f.scheduledTimer)})</span>` : ""}</td>
    <td>${badge(FIRE_STATUS[f.status])}</td><td>${esc(f.attempt)}</td><td>${esc(f.costTime)}</td><td class="out">${esc(f.output)}</td></tr>`).join("");
  return `<table id="fires"><thead><tr><th>Run time</th><th>Status</th><th>Attempts</th><th>Late (ms)</th><th>Output</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="5" class="muted">No fire yet.</td></tr>`}</tbody></table>
    <p class="muted">${list.length} of ${total} fires, newest first.</p>`;
}

// ---- Lateness and failing timers -------------------------------------------
async function latenessPage() {
  const o = await api("/ui/api/overview");
  const failing = o.failing.map((f) => `<tr><td><a href="#/timer/${encodeURIComponent(f.app)}/${f.timerId}">${esc(f.name || f.timerId)}</a></td>
    <td>${esc(f.app)}</td><td>${f.failed} of ${f.fires}</td><td>${esc(f.lastFailedAt)}</td><td class="out">${esc(f.lastOutput)}</td></tr>`).join("");
  const fires = o.minutes.reduce((n, m) => n + m.fires, 0);
  main.innerHTML = `<h1>Lateness, last hour</h1>
    <div class="chart" id="chart">${chart(o)}<div class="legend"><span><i style="background:#2f6fde"></i>p50</span>
    <span><i style="background:#c6362f"></i>p99</span><span class="muted">${fires} fires${o.sampled ? " (the newest 50,000)" : ""}; lateness = callback leaving minus its scheduled time</span></div></div>
    <h2>Timers whose recent fires failed</h2>
    <table id="failing"><thead><tr><th>Timer</th><th>App</th><th>Failed</th><th>Last failure</th><th>Last output</th></tr></thead>
    <tbody>${failing || `<tr><td colspan="5" class="muted">No failed fire in the last hour.</td></tr>`}</tbody></table>`;
}

function chart(o) {
  const W = 1000, H = 240, L = 60, B = 30, T = 10;
  const from = o.fromMs - (o.fromMs % 60000), span = 61 * 60000;
  const max = Math.max(1, ...o.minutes.map((m) => m.p99Ms));
  const x = (ms) => L + ((ms - from) / span) * (W - L - 10);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const line = (key, color) => o.minutes.length
    ? `<polyline fill="none" stroke="${color}" stroke-width="2" points="${o.minutes.map((m) => `${x(m.minuteMs).toFixed(1)},${y(m[key]).toFixed(1)}`).join(" ")}"/>` +
      o.minutes.map((m) => `<circle cx="${x(m.minuteMs).toFixed(1)}" cy="${y(m[key]).toFixed(1)}" r="2.5" fill="${color}"><title>${time(m.minuteMs)}: ${key === "p50Ms" ? "p50" : "p99"} ${m[key]} ms (${m.fires} fires)</title></circle>`).join("")
    : "";
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => `<line x1="${L}" x2="${W - 10}" y1="${y(max * f)}" y2="${y(max * f)}" stroke="#eceff3"/>
    <text x="${L - 6}" y="${y(max * f) + 4}" text-anchor="end" font-size="11" fill="#6b7383">${Math.round(max * f)} ms</text>`).join("");
  const xt = [0, 15, 30, 45, 60].map((m) => { const ms = from + m * 60000; return `<text x="${x(ms)}" y="${H - 8}" text-anchor="middle" font-size="11" fill="#6b7383">${new Date(ms).toISOString().slice(11, 16)}</text>`; }).join("");
  const empty = o.minutes.length ? "" : `<text x="${W / 2}" y="${H / 2}" text-anchor="middle" fill="#6b7383">No fire in the last hour.</text>`;
  return `<svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="img" aria-label="lateness p50 and p99 per minute">${ticks}${xt}${line("p50Ms", "#2f6fde")}${line("p99Ms", "#c6362f")}${empty}</svg>`;
}

// ---- Nodes, shards, task types -------------------------------------------
async function clusterPage() {
  const nodes = await timerApi("nodes", {});
  const rows = nodes.list.map((n) => `<tr><td>${esc(n.id)}</td><td>${esc(n.host)}</td><td>${esc(n.listen)}</td><td>${esc(n.startedAt)}</td>
    <td>${esc(n.heartbeatAgeMs)} ms ago</td><td>${n.shardsHeld}</td><td class="out">${esc(n.shards.join(", ")) || "-"}</td></tr>`).join("");
  main.innerHTML = `<h1>Cluster</h1><h2>Nodes</h2>
    <table id="nodes"><thead><tr><th>Node</th><th>Host</th><th>Listen</th><th>Started</th><th>Heartbeat</th><th>Shards held</th><th>Shards</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="7" class="muted">No node has reported.</td></tr>`}</tbody></table>
    <h2>Task types</h2><div id="types"><p class="muted">Loading…</p></div>`;
  const cfgs = (await api("/v1/get_task_schedule_cfg_list")).task_schedule_cfg_list || [];
  const counts = await Promise.all(cfgs.map((c) => api("/v1/get_task_counts_by_type?" + new URLSearchParams({ task_type: c.task_type })).then((r) => r.counts, () => "-")));
  const typeRows = cfgs.map((c, i) => `<tr><td>${esc(c.task_type)}</td><td>${esc(counts[i])}</td><td>${esc(c.schedule_limit)}</td>
    <td>${esc(c.max_processing_time)} s</td><td>${esc(c.max_retry_num)}</td></tr>`).join("");
  document.getElementById("types").innerHTML = `<table id="task-types"><thead><tr><th>Task type</th><th>Tasks</th><th>Schedule limit</th>
    <th>Max processing</th><th>Max retries</th></tr></thead><tbody>${typeRows || `<tr><td colspan="5" class="muted">No task type registered.</td></tr>`}</tbody></table>`;
}

// ---- Routing ---------------------------------------------------------------
async function route() {
  const hash = location.hash.slice(1) || "/timers";
  const [path, query] = hash.split("?");
  const parts = path.split("/").filter(Boolean);
  const page = parts[0] === "timer" ? "timers" : parts[0];
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === page);
  document.getElementById("signout").hidden = !localStorage.getItem("xtimer-token");
  try {
    if (parts[0] === "timer" && parts.length === 3) await timerPage(decodeURIComponent(parts[1]), parts[2]);
    else if (parts[0] === "lateness") await latenessPage();
    else if (parts[0] === "cluster") await clusterPage();
    else await timersPage(new URLSearchParams(query || ""));
    document.body.dataset.ready = page;
  } catch (err) {
    if (err instanceof NeedsToken) askToken(err.message);
    else main.insertAdjacentHTML("beforeend", `<p class="error" id="error">${esc(err.message)}</p>`);
    document.body.dataset.ready = "error";
  }
}
window.addEventListener("hashchange", () => { say(""); route(); });
route();
