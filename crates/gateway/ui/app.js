// mote's live dashboard. Reads `GET /v1/dashboard/events` (a snapshot a second, as server-sent
// events) with fetch() rather than EventSource, which cannot send an Authorization header; keeps
// the last five minutes of snapshots for the charts; draws tables and SVG charts by hand. Every
// request is a path on the page's own origin, the dashboard's listener (`mote up --ui-listen`):
// nothing is loaded from, or sent to, anywhere else.
"use strict";

const TOKEN_KEY = "mote.token";
const HISTORY_MS = 5 * 60 * 1000;
// A keep-alive comes every 15 s: a stream silent for longer than this is dead.
const SILENCE_MS = 25 * 1000;
const MAX_BACKOFF_MS = 15 * 1000;
const MAX_SERIES = 8;
const PALETTE = [
  "#4e9af1", "#f5a623", "#3ecf8e", "#e5534b", "#b48ef7", "#40c4d8",
  "#e88bc4", "#c9c957", "#ff8a65", "#7986cb", "#a1887f", "#9ccc65",
];

const $ = (sel) => document.querySelector(sel);

const state = {
  token: "",
  stream: null, // the AbortController of the stream being read
  backoff: 1000,
  retry: null,
  lastByte: 0,
  updates: 0,
  history: [],
  colors: new Map(),
};

// ---- the token -------------------------------------------------------------------------

// The token is kept in this origin's localStorage, and that is safe because the origin is the
// dashboard's alone: the node serves this page on a listener of its own (its own port), where
// nothing else is served, and never tenants' components, which the API's port serves. Storage
// is per origin, port included, so no script a tenant serves can read it. Never a cookie: a
// cookie ignores the port, so the API's origin, and every component on it, would be sent it and
// could read it.

// `#token=...` signs the page in once (the CLI or a test opens it so); it leaves the address bar
// at once so that it is not bookmarked or shared. A page already signed in with another token
// does not switch on a link alone, which anyone could send: it asks, and switches on a click.
// Says whether the page took the token.
let offered = "";

function tokenFromAddress() {
  const m = location.hash.match(/^#token=(.+)$/);
  if (!m) return false;
  history.replaceState(null, "", location.pathname + location.search);
  const token = decodeURIComponent(m[1]);
  if (state.token && state.token !== token) {
    offered = token;
    $("#switch").hidden = false;
    return false;
  }
  saveToken(token);
  return true;
}

function loadToken() {
  try {
    state.token = localStorage.getItem(TOKEN_KEY) || "";
  } catch (_) {
    state.token = "";
  }
  tokenFromAddress();
}

function saveToken(token) {
  state.token = token;
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch (_) {
    // Storage may be off (a private window): the token lasts as long as the page.
  }
  $("#sign-out").hidden = !token;
}

function authHeaders() {
  return state.token ? { Authorization: `Bearer ${state.token}` } : {};
}

function askForToken(message) {
  setConn("signed-out", "token needed");
  $("#token-error").textContent = message;
  $("#signin").hidden = false;
  $("#content").classList.add("dimmed");
  $("#token-input").focus();
}

function signedIn(token) {
  saveToken(token);
  $("#signin").hidden = true;
  $("#token-input").value = "";
  $("#content").classList.remove("dimmed");
  restart();
}

// ---- the stream ------------------------------------------------------------------------

function setConn(kind, text) {
  const el = $("#conn");
  el.dataset.state = kind;
  el.textContent = text;
}

function restart() {
  if (state.stream) state.stream.abort();
  clearTimeout(state.retry);
  state.backoff = 1000;
  connect();
}

async function connect() {
  const controller = new AbortController();
  state.stream = controller;
  setConn("connecting", "connecting…");
  let response;
  try {
    response = await fetch("/v1/dashboard/events", {
      headers: { Accept: "text/event-stream", ...authHeaders() },
      signal: controller.signal,
      cache: "no-store",
    });
  } catch (e) {
    return ended(controller, `cannot reach the node (${e.message})`);
  }
  if (response.status === 401 || response.status === 403) {
    const body = await response.json().catch(() => ({}));
    const message = body.error || `the node answered ${response.status}`;
    if (state.stream === controller) {
      state.stream = null;
      askForToken(message);
    }
    return;
  }
  if (!response.ok || !response.body) {
    const body = await response.json().catch(() => ({}));
    return ended(controller, body.error || `the node answered ${response.status}`);
  }
  state.lastByte = Date.now();
  try {
    await readEvents(response.body, controller);
    ended(controller, "the stream ended");
  } catch (e) {
    ended(controller, controller.signal.aborted ? "the stream went silent" : e.message);
  }
}

// Reads server-sent events (`event:` and `data:` lines, blank-line separated; `:` lines are
// keep-alives) from `body` until it ends.
async function readEvents(body, controller) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    if (state.stream !== controller) return;
    state.lastByte = Date.now();
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") type = val;
        else if (field === "data") data.push(val);
      }
      if (type === "snapshot" && data.length) update(JSON.parse(data.join("\n")));
    }
  }
}

function ended(controller, why) {
  if (state.stream !== controller) return; // replaced by a newer stream
  state.stream = null;
  const wait = state.backoff;
  state.backoff = Math.min(state.backoff * 2, MAX_BACKOFF_MS);
  setConn("disconnected", `disconnected: ${why}; retrying in ${Math.round(wait / 1000)} s`);
  document.body.dataset.connected = "false";
  state.retry = setTimeout(connect, wait);
}

setInterval(() => {
  if (state.stream && state.lastByte && Date.now() - state.lastByte > SILENCE_MS) {
    state.stream.abort();
  }
}, 5000);

// ---- a snapshot ------------------------------------------------------------------------

function update(snap) {
  state.backoff = 1000;
  state.updates += 1;
  document.body.dataset.updates = String(state.updates);
  document.body.dataset.connected = "true";
  setConn("live", "live");
  $("#updated").textContent = `updated ${new Date(snap.at_ms).toLocaleTimeString()}`;
  $("#node-name").textContent = snap.node;
  document.title = `mote · ${snap.node}`;
  for (const el of document.querySelectorAll(".window")) el.textContent = Math.round(snap.window_s);

  record(snap);
  renderStats(snap);
  renderFunctions(snap);
  renderExecutors(snap);
  renderClasses(snap);
  renderNodes(snap);
  renderStore(snap);
  renderJobs(snap);
  renderCharts();
}

function record(snap) {
  const point = {
    t: snap.at_ms,
    calls: {},
    p99: {},
    busy: snap.busy_cores,
    cores: snap.cores,
    queue: snap.queue_length,
    waiting: snap.classes.reduce((n, c) => n + c.waiting, 0),
  };
  for (const f of snap.functions) {
    point.calls[f.name] = f.calls_per_s;
    point.p99[f.name] = f.p99_ms;
  }
  state.history.push(point);
  while (state.history.length && state.history[0].t < snap.at_ms - HISTORY_MS) state.history.shift();
}

// ---- formatting ------------------------------------------------------------------------

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function fmtMs(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1) return `${(ms * 1000).toFixed(ms < 0.01 ? 1 : 0)} µs`;
  if (ms < 1000) return `${ms < 10 ? ms.toFixed(2) : ms.toFixed(1)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

function fmtRate(r) {
  if (r == null) return "–";
  if (r >= 100) return r.toFixed(0);
  if (r >= 10) return r.toFixed(1);
  return r.toFixed(2);
}

function fmtAgo(ms) {
  if (ms === null || ms === undefined) return "never";
  if (ms < 1000) return `${ms} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

function colorOf(name) {
  if (!state.colors.has(name)) state.colors.set(name, PALETTE[state.colors.size % PALETTE.length]);
  return state.colors.get(name);
}

// Functions get a colour when first called, so idle ones do not use up the palette.
function swatch(name, called) {
  if (!called && !state.colors.has(name)) return `<svg class="swatch" width="10" height="10" aria-hidden="true"></svg>`;
  return `<svg class="swatch" width="10" height="10" aria-hidden="true"><rect width="10" height="10" rx="2" fill="${colorOf(name)}"/></svg>`;
}

function emptyRow(cols, text) {
  return `<tr class="empty"><td colspan="${cols}">${esc(text)}</td></tr>`;
}

function setBody(table, html) {
  $(`#${table} tbody`).innerHTML = html;
}

// ---- tables ----------------------------------------------------------------------------

function renderStats(snap) {
  $("#stat-calls").textContent = fmtRate(snap.calls_per_s);
  $("#stat-busy").textContent = `${snap.busy_cores.toFixed(1)} / ${snap.cores}`;
  $("#stat-queue").textContent = String(snap.queue_length + snap.classes.reduce((n, c) => n + c.waiting, 0));
  $("#stat-policy").textContent = snap.policy;
  $("#stat-nodes").textContent = String(snap.nodes.length);
  const store = $("#stat-store");
  store.textContent = snap.store.reachable ? "ok" : "unreachable";
  store.dataset.ok = String(snap.store.reachable);
}

function renderFunctions(snap) {
  const rows = snap.functions.map((f) => {
    const outcomes = Object.entries(f.outcomes)
      .map(([o, n]) => `<span class="badge" data-outcome="${esc(o)}">${esc(o)} ${n}</span>`)
      .join(" ");
    const flags = [
      f.quarantined ? `<span class="badge" data-outcome="quarantined">quarantined</span>` : "",
      f.resident ? "" : `<span class="badge cold" title="not resident: its next call is a cold start">cold</span>`,
    ].join("");
    return `<tr data-function="${esc(f.name)}">
      <th scope="row">${swatch(f.name, f.calls > 0)} ${esc(f.name)}</th>
      <td data-field="kind">${esc(f.kind)}</td>
      <td class="num" data-field="calls" data-value="${f.calls}">${f.calls}</td>
      <td class="num" data-field="calls_per_s" data-value="${f.calls_per_s}">${fmtRate(f.calls_per_s)}</td>
      <td class="num" data-field="p50">${fmtMs(f.p50_ms)}</td>
      <td class="num" data-field="p99">${fmtMs(f.p99_ms)}</td>
      <td class="num" data-field="stretch">${f.stretch === null ? "–" : f.stretch.toFixed(2)}</td>
      <td class="num" data-field="expected">${f.expected_ms ? fmtMs(f.expected_ms) : "–"}</td>
      <td data-field="outcomes">${outcomes}${flags}</td>
    </tr>`;
  });
  setBody("functions", rows.join("") || emptyRow(9, "no functions deployed"));
}

function renderExecutors(snap) {
  $("#cores-count").textContent = `(${snap.cores} cores, ${snap.executor_threads} threads)`;
  $("#executors").dataset.cores = String(snap.cores);
  // One row per core: what ran on it, whether on an executor or on the reader that read it.
  const rows = snap.executors.map((e) => {
    const pct = Math.round(e.busy_share * 100);
    return `<tr data-core="${e.index}">
      <th scope="row">${e.index}</th>
      <td data-field="state"><span class="dot" data-on="${e.running}"></span>${e.running ? "running" : "idle"}</td>
      <td class="num" data-field="calls">${e.calls}</td>
      <td class="num" data-field="calls_per_s">${fmtRate(e.calls_per_s)}</td>
      <td data-field="busy"><meter min="0" max="1" value="${e.busy_share}" aria-label="busy share of core ${e.index}">${pct}%</meter> ${pct}%</td>
    </tr>`;
  });
  setBody("executors", rows.join("") || emptyRow(5, "no executors"));
}

function renderClasses(snap) {
  $("#microtasks-mode").textContent = `(microtasks ${snap.microtasks})`;
  const rows = snap.classes.map((c) => `<tr data-class="${c.permille}">
      <th scope="row">${(c.permille / 10).toFixed(c.permille % 10 ? 1 : 0)}%</th>
      <td class="num">${c.cores}</td><td class="num">${c.capacity}</td>
      <td class="num">${c.running}</td><td class="num" data-field="waiting">${c.waiting}</td>
    </tr>`);
  setBody("classes", rows.join("") || emptyRow(5, "no share classes"));
}

function renderNodes(snap) {
  const rows = snap.nodes.map((n) => {
    const calls = n.me ? n.ran_here : n.forwarded ? n.forwarded.answered : 0;
    const title = n.me ? "calls this node ran" : "calls this node sent there";
    return `<tr data-node="${esc(n.name)}" data-me="${n.me}">
      <th scope="row">${esc(n.name)}${n.me ? ' <span class="muted">(this node)</span>' : ""}</th>
      <td data-field="state"><span class="dot" data-on="${n.state === "up"}"></span>${esc(n.state)}</td>
      <td class="num">${n.cores}</td><td class="num">${n.running}</td><td class="num">${n.queued}</td>
      <td class="num" data-field="calls" title="${title}">${calls}</td>
      <td class="num">${n.me ? "–" : fmtAgo(n.heard_ms_ago)}</td>
    </tr>`;
  });
  setBody("nodes", rows.join("") || emptyRow(7, "no nodes"));
}

function renderStore(snap) {
  const s = snap.store;
  $("#store-summary").innerHTML = s.reachable
    ? `<span class="dot" data-on="true"></span>${esc(s.endpoints)} answers`
    : `<span class="dot" data-on="false"></span>${esc(s.endpoints)} has not answered for ${fmtAgo(s.unreachable_for_ms)}: ${esc(s.error || "")}`;
  const rows = s.replicas.map((r) => `<tr data-replica="${esc(r.name)}">
      <th scope="row">${esc(r.name)}</th><td>${esc(r.url)}</td>
      <td class="num">${r.merged_revision}</td>
      <td class="num" data-field="behind">${fmtAgo(r.behind_ms)}</td>
      <td>${r.error ? `<span class="error">failing for ${fmtAgo(r.failing_ms)}: ${esc(r.error)}</span>` : "pulling"}</td>
    </tr>`);
  setBody("replicas", rows.join("") || emptyRow(5, "this node's store replica pulls from no other (not an edge set-up)"));
}

function renderJobs(snap) {
  const rows = snap.jobs
    .slice()
    .reverse()
    .map((j) => {
      const map = j.workers
        .map((w) => `<li><span class="dot" data-on="${w.live}"></span>${esc(w.name)}: ${esc(w.holds)} <span class="muted">(${w.partitions}, ${fmtRate(w.tasks_per_s)} tasks/s)</span></li>`)
        .join("");
      return `<tr data-job="${esc(j.id)}">
        <th scope="row">${esc(j.id)}</th><td>${esc(j.function)}</td>
        <td data-field="state">${esc(j.state)}${j.error ? ` <span class="error">${esc(j.error)}</span>` : ""}</td>
        <td class="num">${j.iteration}</td><td class="num" data-field="tasks_per_s">${fmtRate(j.tasks_per_s)}</td>
        <td class="num">${j.tasks}</td><td><ul class="map">${map}</ul></td>
      </tr>`;
    });
  setBody("jobs", rows.join("") || emptyRow(7, "no jobs on this node"));
}

// ---- charts ----------------------------------------------------------------------------

function renderCharts() {
  const names = new Set();
  for (const p of state.history) for (const n of Object.keys(p.calls)) names.add(n);
  // The busiest functions of the last five minutes get a line each.
  const busiest = [...names]
    .map((n) => [n, state.history.reduce((s, p) => s + (p.calls[n] || 0), 0)])
    .filter(([, total]) => total > 0)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, MAX_SERIES)
    .map(([n]) => n);
  drawChart("chart-calls", busiest.map((n) => ({ name: n, color: colorOf(n), value: (p) => p.calls[n] ?? null })));
  drawChart("chart-p99", busiest.map((n) => ({ name: n, color: colorOf(n), value: (p) => p.p99[n] ?? null })));
  drawChart("chart-busy", [
    { name: "busy", color: PALETTE[0], value: (p) => p.busy },
    { name: "cores", color: "#6b7685", value: (p) => p.cores, dashed: true },
  ]);
  drawChart("chart-queue", [
    { name: "executor queue", color: PALETTE[1], value: (p) => p.queue },
    { name: "microtask classes", color: PALETTE[4], value: (p) => p.waiting },
  ]);
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const pow = 10 ** Math.floor(Math.log10(v));
  // Four intervals, so each step is a round number too.
  for (const m of [1, 2, 4, 6, 8, 10]) if (m * pow >= v) return m * pow;
  return 10 * pow;
}

function fmtAxis(v) {
  if (v >= 1000) return `${(v / 1000).toFixed(v % 1000 ? 1 : 0)}k`;
  if (v >= 10 || Number.isInteger(v)) return v.toFixed(0);
  return v.toPrecision(2);
}

function drawChart(id, series) {
  const fig = document.getElementById(id);
  const plot = fig.querySelector(".plot");
  const width = Math.max(plot.clientWidth, 240);
  const height = 150;
  const left = 40, right = 8, top = 8, bottom = 20;
  const w = width - left - right, h = height - top - bottom;
  const now = state.history.length ? state.history[state.history.length - 1].t : Date.now();
  const t0 = now - HISTORY_MS;
  let max = 0;
  for (const p of state.history) for (const s of series) max = Math.max(max, s.value(p) || 0);
  const ymax = niceMax(max);
  const x = (t) => left + ((t - t0) / HISTORY_MS) * w;
  const y = (v) => top + h - (v / ymax) * h;

  let svg = `<svg width="${width}" height="${height}" role="img" aria-label="${esc(fig.querySelector("figcaption").textContent)}">`;
  for (let i = 0; i <= 4; i++) {
    const v = (ymax * i) / 4;
    svg += `<line class="grid" x1="${left}" x2="${left + w}" y1="${y(v)}" y2="${y(v)}"/>`;
    svg += `<text class="tick" x="${left - 4}" y="${y(v) + 3}" text-anchor="end">${fmtAxis(v)}</text>`;
  }
  for (let m = 0; m <= 5; m++) {
    const t = t0 + m * 60000;
    svg += `<text class="tick" x="${x(t)}" y="${height - 4}" text-anchor="${m === 0 ? "start" : m === 5 ? "end" : "middle"}">${m === 5 ? "now" : `-${5 - m}m`}</text>`;
  }
  let drawn = 0;
  for (const s of series) {
    // A gap of more than 5 s (the page was disconnected) breaks the line.
    let d = "";
    let last = null;
    for (const p of state.history) {
      const v = s.value(p);
      if (v === null || v === undefined) {
        last = null;
        continue;
      }
      d += `${last === null || p.t - last > 5000 ? "M" : "L"}${x(p.t).toFixed(1)},${y(v).toFixed(1)}`;
      last = p.t;
    }
    if (d) {
      drawn += 1;
      svg += `<path class="line${s.dashed ? " dashed" : ""}" d="${d}" stroke="${s.color}"><title>${esc(s.name)}</title></path>`;
    }
  }
  svg += "</svg>";
  const legend = series
    .map((s) => `<li><svg class="swatch" width="10" height="10" aria-hidden="true"><rect width="10" height="10" rx="2" fill="${s.color}"/></svg>${esc(s.name)}</li>`)
    .join("");
  plot.innerHTML = `${svg}<ul class="legend">${legend}</ul>`;
  fig.dataset.lines = String(drawn);
  fig.dataset.points = String(state.history.length);
}

// ---- start -----------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  loadToken();
  $("#sign-out").hidden = !state.token;
  $("#token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const token = $("#token-input").value.trim();
    if (token) signedIn(token);
  });
  $("#sign-out").addEventListener("click", () => {
    saveToken("");
    restart();
  });
  window.addEventListener("hashchange", () => {
    if (tokenFromAddress()) signedIn(state.token);
  });
  $("#switch-use").addEventListener("click", () => {
    const token = offered;
    offered = "";
    $("#switch").hidden = true;
    if (token) signedIn(token);
  });
  $("#switch-keep").addEventListener("click", () => {
    offered = "";
    $("#switch").hidden = true;
  });
  let resize = null;
  window.addEventListener("resize", () => {
    clearTimeout(resize);
    resize = setTimeout(renderCharts, 100);
  });
  connect();
});
