// A tenant's hostile page: served by a component the tenant mounted on the node (at the API's
// origin), in the browser of an admin whose dashboard is signed in, it tries every way a script
// has to obtain the dashboard's token or to use it. tests/ui/dashboard.mjs serves it with
// `window.TARGETS` = { dashboard: the dashboard's origin, api: the API's origin, own: a path of
// this component that answers text } and drives it: `gather()` on load, then `openDashboard()`
// twice (each as a click would) and, once the windows it opened show the signed-in dashboard,
// `probeWindows()`. Everything it gets is kept in `window.report`; the title says when a step is
// done.
"use strict";

const T = window.TARGETS;
const report = { own: {}, frames: [], windows: [], fetches: [], control: {} };
window.report = report;

function dump(storage) {
  const out = {};
  for (let i = 0; i < storage.length; i++) {
    const key = storage.key(i);
    out[key] = storage.getItem(key);
  }
  return out;
}

// Everything a script could take from another window or frame: its storage, its cookies, its
// document, the dashboard script's state (a top-level `const`, so reachable only through the
// window's own eval), and where it is. Each is a value, or the error that refused it.
function probe(win) {
  const got = {};
  const reads = {
    localStorage: () => dump(win.localStorage),
    sessionStorage: () => dump(win.sessionStorage),
    cookie: () => win.document.cookie,
    document: () => win.document.documentElement.outerHTML,
    token: () => win.eval("state.token"),
    location: () => win.location.href,
  };
  for (const [what, read] of Object.entries(reads)) {
    try {
      got[what] = { value: read() ?? null };
    } catch (e) {
      got[what] = { error: `${e.name}: ${e.message}` };
    }
  }
  return got;
}

// Frames `url` and probes it once it has loaded (or failed to).
async function frame(url) {
  const f = document.createElement("iframe");
  const loaded = new Promise((resolve) => {
    f.addEventListener("load", () => resolve("load"), { once: true });
    setTimeout(() => resolve("no load event in 10 s"), 10000);
  });
  f.src = url;
  document.body.append(f);
  const how = await loaded;
  return { url, how, ...probe(f.contentWindow) };
}

// Fetches `url` with `init`; keeps the status, the response type and the start of the body.
async function tryFetch(url, init) {
  const entry = { url, mode: init.mode || "cors" };
  try {
    const response = await fetch(url, { credentials: "include", cache: "no-store", ...init });
    entry.status = response.status;
    entry.type = response.type;
    if (response.body) {
      // One read: a stream that were let in would never end.
      const reader = response.body.getReader();
      const { value } = await reader.read();
      reader.cancel();
      entry.body = value ? new TextDecoder().decode(value).slice(0, 300) : "";
    }
  } catch (e) {
    entry.error = `${e.name}: ${e.message}`;
  }
  return entry;
}

window.gather = async () => {
  // This origin's own storage and cookies.
  report.own = {
    localStorage: dump(localStorage),
    sessionStorage: dump(sessionStorage),
    cookie: document.cookie,
  };
  // The dashboard's data, with whatever credentials the browser would add: from the dashboard's
  // origin (cross-origin, readable and opaque) and from this one.
  for (const [url, init] of [
    [`${T.dashboard}/v1/dashboard`, {}],
    [`${T.dashboard}/v1/dashboard/events`, {}],
    [`${T.dashboard}/v1/dashboard`, { mode: "no-cors" }],
    [`${T.dashboard}/ui`, {}],
    [`${T.api}/v1/dashboard`, {}],
    [`${T.api}/v1/dashboard/events`, {}],
    [`${T.api}/ui`, {}],
  ]) {
    report.fetches.push(await tryFetch(url, init));
  }
  // The dashboard in a frame: at its own address, and through the API's redirect.
  for (const url of [`${T.dashboard}/ui`, `${T.api}/ui`]) report.frames.push(await frame(url));
  // The same ways in work where the origin allows them: a frame, a fetch and storage of this
  // origin give up everything, so what the others refused was refused by the origin.
  localStorage.setItem("tenant", "own");
  report.control = {
    storage: localStorage.getItem("tenant"),
    frame: await frame(`${T.api}${T.own}`),
    fetch: await tryFetch(`${T.api}${T.own}`, {}),
  };
  document.title = "gathered";
  return true;
};

const opened = [];

// Opens a window on the dashboard: at its own address, then through the API's redirect. A
// browser lets a page open one window per click, so each is its own call.
window.openDashboard = () => {
  const url = [`${T.dashboard}/ui`, `${T.api}/ui`][opened.length];
  const handle = window.open(url, "_blank");
  opened.push({ url, handle });
  return handle !== null;
};

window.probeWindows = () => {
  report.windows = opened.map(({ url, handle }) => ({ url, closed: handle.closed, ...probe(handle) }));
  document.title = "probed";
  return true;
};
