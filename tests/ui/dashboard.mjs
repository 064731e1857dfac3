// The dashboard in a real headless Chromium against a real `mote up`: the page loads from the
// node's dashboard listener (the API's /ui redirects there), reads the live stream, and shows
// what the API says; it goes "disconnected" when the node stops and live again when it is back;
// its token handling works against a second real node that asks for one (`--require-tokens`),
// with tokens made through its API; and a tenant's hostile page served by that node, in the same
// browser as the admin's signed-in dashboard, gets none of its token (`hostilePage`).
//
//   MOTE_PY_COMPONENT=path/to/http-python.wasm node tests/ui/dashboard.mjs [path/to/mote]
//
// MOTE_UI_SCREENSHOT=docs/dashboard.png saves a screenshot of the whole page, 1280 wide, after
// MOTE_UI_SCREENSHOT_AFTER_S seconds (default 20) of traffic, with a second node in the edge
// set-up so that the cluster and store panels have something to show.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Browser } from "./cdp.mjs";

const MOTE = resolve(process.argv[2] || "target/release/mote");
const NODE_NAME = "edge-1";

// Two functions besides the examples, hand-assembled (the mote ABI: `memory`, `mote_alloc`,
// `mote_handle`): one traps, one busy-loops for about 30 million iterations.
const TRAP = "AGFzbQEAAAABDAJgAX8Bf2ACf38BfgMDAgABBQMBAAEHJQMGbWVtb3J5AgAKbW90ZV9hbGxvYwAAC21vdGVfaGFuZGxlAAEKCgIEAEEACwMAAAs=";
const SLOW = "AGFzbQEAAAABDAJgAX8Bf2ACf38BfgMDAgABBQMBAAEHJQMGbWVtb3J5AgAKbW90ZV9hbGxvYwAAC21vdGVfaGFuZGxlAAEKIAIEAEEACxkBAX9BgIenDiECA0AgAkEBayICDQALQgAL";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let passed = 0;
function ok(what) {
  passed += 1;
  console.log(`ok ${passed} - ${what}`);
}

/** A port free now. */
function freePort() {
  return new Promise((r) => {
    const server = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => r(port));
    });
  });
}

/**
 * Starts `mote up` on `listen`; resolves once it serves with the process, the API's base URL and
 * the dashboard's (`ui`), each as `mote up` prints it.
 */
async function startMote(data, listen, { name = NODE_NAME, extra = [] } = {}) {
  const child = spawn(
    MOTE,
    ["up", "--examples", "--listen", listen, "--store-listen", "127.0.0.1:0", "--data", data, "--node", name, "--cores", "2", ...extra],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, RUST_LOG: "warn" } },
  );
  let out = "";
  child.stderr.on("data", (d) => {
    out = (out + d).slice(-8000);
  });
  const [base, ui] = await new Promise((resolveUrls, reject) => {
    let seen = "";
    child.stdout.on("data", (d) => {
      seen += d;
      const m = seen.match(/mote is up on (http:\/\/[0-9.:]+).*\ndashboard on (http:\/\/[0-9.:]+)\/ui\n/);
      if (m) resolveUrls([m[1], m[2]]);
    });
    child.once("exit", (code) => reject(new Error(`mote up exited (${code}): ${out}`)));
  });
  for (let i = 0; i < 100; i++) {
    const res = await fetch(`${base}/healthz`).catch(() => null);
    if (res && res.ok) return { child, base, ui };
    await sleep(100);
  }
  throw new Error(`mote at ${base} never became healthy: ${out}`);
}

async function stopMote(child) {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10000);
  await exited;
  clearTimeout(timer);
}

async function api(base, path, init = {}) {
  const res = await fetch(`${base}${path}`, init);
  assert.ok(res.ok, `${init.method || "GET"} ${path} answered ${res.status}: ${await res.clone().text()}`);
  return res;
}

async function deploy(base, name, wasmBase64) {
  await api(base, `/v1/functions/${name}?timeout_ms=2000`, {
    method: "PUT",
    body: Buffer.from(wasmBase64, "base64"),
  });
}

async function invoke(base, name, body = "mote") {
  const res = await fetch(`${base}/v1/invoke/${name}`, { method: "POST", body });
  await res.arrayBuffer();
  return res.status;
}

/** Calls the functions at different rates until `stop()`: hello busiest, slow and trap rarest. */
function traffic(base) {
  let running = true;
  const loop = async (name, everyMs, body) => {
    while (running) {
      await invoke(base, name, body).catch(() => {});
      await sleep(everyMs);
    }
  };
  const loops = [loop("hello", 20, "dashboard"), loop("echo", 80, "x".repeat(512)), loop("wc", 250, "a b c\nd e\n"), loop("slow", 400), loop("trap", 1500)];
  if (process.env.MOTE_UI_SCREENSHOT) {
    // Enough work for the screenshot to show busy cores, a queue now and then, and calls
    // placed on the other node.
    loops.push(loop("slow", 10), loop("slow", 20), loop("slow", 30), loop("hello", 5, "more"));
  }
  return async () => {
    running = false;
    await Promise.all(loops);
  };
}

const rowCalls = (name) => `Number(document.querySelector('#functions tr[data-function="${name}"] [data-field=calls]')?.dataset.value ?? -1)`;

/**
 * Attack 2 of issue 33: a tenant's page, served by a component on the same node, in the browser
 * of an admin whose dashboard is signed in (with the admin token), tries to obtain or use the
 * dashboard's token; it must get nothing, and the dashboard must go on showing live data.
 */
async function hostilePage(browser, { gbase, gui, admin, readToken, invokeToken }) {
  const component = process.env.MOTE_PY_COMPONENT;
  assert.ok(component, "MOTE_PY_COMPONENT names the Python component (scripts/test-ui builds it)");
  // A public component, as a tenant with `deploy` may mount: its pages need no token.
  await api(gbase, "/v1/functions/tenant-site?route=/tenant/...&public=true&timeout_ms=10000", {
    method: "PUT",
    headers: { Authorization: `Bearer ${admin}` },
    body: readFileSync(component),
  });
  const dashboard = await browser.newPage();
  // The dashboard's origin keeps the read token from the steps before: a link with another token
  // (anyone can send one) does not switch it without the admin's click.
  await dashboard.goto(`${gui}/ui#token=${encodeURIComponent(admin)}`);
  await dashboard.waitFor("!document.querySelector('#switch').hidden && location.hash === '' && document.querySelector('#conn').dataset.state === 'live'", "the offer to switch to the link's token");
  assert.equal(await dashboard.eval("localStorage.getItem('mote.token')"), readToken, "a link switched the token without a click");
  await dashboard.eval("document.querySelector('#switch-use').click(), true");
  await dashboard.waitFor("document.querySelector('#switch').hidden && document.querySelector('#signin').hidden && document.querySelector('#conn').dataset.state === 'live' && Number(document.body.dataset.updates) >= 1", "the admin's dashboard, signed in and live");
  assert.equal(await dashboard.eval("localStorage.getItem('mote.token')"), admin);

  const targets = { dashboard: gui, api: gbase, own: "/tenant/own" };
  const html = `<!doctype html><meta charset="utf-8"><title>a tenant's page</title><body><script>window.TARGETS = ${JSON.stringify(targets)};</script><script>${readFileSync(new URL("./hostile.js", import.meta.url), "utf8")}</script>`;
  const hostile = await browser.newPage();
  await hostile.goto(`${gbase}/tenant/page?html=${encodeURIComponent(html)}`);
  await hostile.waitFor("typeof window.gather === 'function'", "the hostile page's script");
  assert.equal(await hostile.eval("location.origin"), gbase, "the hostile page runs at the API's origin");
  await hostile.eval("window.gather()");

  // Windows on the dashboard, opened as if the admin clicked; the test waits until each shows
  // the dashboard signed in (so the token is in its storage and script) before the page tries
  // to read them.
  const before = new Set((await browser.pages()).map((t) => t.targetId));
  for (let i = 0; i < 2; i++) {
    assert.ok(await hostile.eval("window.openDashboard()", { userGesture: true }), `the page opened window ${i + 1}`);
  }
  let popups = [];
  for (let i = 0; i < 100 && popups.length < 2; i++) {
    popups = (await browser.pages()).filter((t) => !before.has(t.targetId) && t.url.startsWith(`${gui}/ui`));
    if (popups.length < 2) await sleep(100);
  }
  assert.equal(popups.length, 2, "both windows reached the dashboard's origin");
  for (const target of popups) {
    const popup = await browser.attach(target.targetId);
    await popup.waitFor("document.querySelector('#signin').hidden && Number(document.body.dataset.updates) >= 1", "the opened dashboard, signed in");
    assert.equal(await popup.eval("localStorage.getItem('mote.token')"), admin);
  }
  await hostile.eval("window.probeWindows()");
  const report = await hostile.eval("window.report");
  const text = JSON.stringify(report);

  // It obtained no token: none of the node's tokens, nor anything that looks like one.
  for (const token of [admin, readToken, invokeToken]) assert.ok(!text.includes(token), `the page got a token: ${text}`);
  assert.doesNotMatch(text, /mote_[0-9a-f]{64}/);
  assert.deepEqual(report.own, { localStorage: {}, sessionStorage: {}, cookie: "" }, "nothing of the dashboard in the page's own storage");
  const refused = (probe, what) => {
    for (const key of ["localStorage", "sessionStorage", "cookie", "document", "token", "location"]) {
      assert.ok(probe[key].error || probe[key].value === null, `${what}: the page read its ${key}: ${JSON.stringify(probe[key])}`);
    }
  };
  assert.equal(report.frames.length, 2);
  for (const f of report.frames) refused(f, `a frame of ${f.url}`);
  assert.equal(report.windows.length, 2);
  for (const w of report.windows) refused(w, `a window on ${w.url}`);
  // It could not use the token: no request for the dashboard's data got an answer it could read.
  for (const f of report.fetches) {
    assert.ok(f.error || f.status !== 200 || (f.type === "opaque" && !f.body), `fetch ${f.url} (${f.mode}): ${JSON.stringify(f)}`);
  }
  const byUrl = (url, mode = "cors") => report.fetches.find((f) => f.url === url && f.mode === mode);
  // The API refuses a page of its own origin (a tenant's) everything but calls, token or not.
  assert.equal(byUrl(`${gbase}/v1/dashboard`).status, 403, "the API takes no request for its data from a tenant's page");
  assert.match(byUrl(`${gui}/v1/dashboard`).error, /TypeError/, "the dashboard's origin shares nothing with the page");
  assert.equal(byUrl(`${gui}/v1/dashboard`, "no-cors").type, "opaque");
  // The same probes work where the origin allows: what they got elsewhere is the origin's doing.
  assert.equal(report.control.storage, "own");
  assert.match(report.control.frame.document.value, /Hello from Python: GET \/own/);
  assert.equal(report.control.fetch.status, 200);
  assert.match(report.control.fetch.body, /Hello from Python: GET \/own/);
  ok("a tenant's page on the same node gets no token: not from storage, cookies, frames, windows or fetches, on either origin");

  // The dashboard itself goes on: signed in, live, its token where it was.
  const updates = await dashboard.eval("Number(document.body.dataset.updates)");
  await dashboard.waitFor(`document.querySelector('#conn').dataset.state === 'live' && Number(document.body.dataset.updates) > ${updates + 1}`, "more live updates on the admin's dashboard");
  assert.equal(await dashboard.eval("localStorage.getItem('mote.token')"), admin);
  assert.ok(await dashboard.eval(`!!document.querySelector('#functions tr[data-function="tenant-site"]')`), "the dashboard lists the tenant's component");
  ok("the admin's dashboard still shows live data with its token");
}

async function main() {
  const data = mkdtempSync(join(tmpdir(), "mote-ui-"));
  // The screenshot shows a cluster: a second node in the edge set-up, each node's store
  // replica pulling from the other's.
  let edge = [];
  let second = null;
  if (process.env.MOTE_UI_SCREENSHOT) {
    const [p1, p2] = [await freePort(), await freePort()];
    edge = ["--store-peer-listen", `127.0.0.1:${p1}`, "--store-peers", `edge-2=http://127.0.0.1:${p2}`];
    second = await startMote(join(data, "edge-2"), "127.0.0.1:0", {
      name: "edge-2",
      extra: ["--store-peer-listen", `127.0.0.1:${p2}`, "--store-peers", `${NODE_NAME}=http://127.0.0.1:${p1}`],
    });
  }
  let mote = await startMote(join(data, NODE_NAME), "127.0.0.1:0", { extra: edge });
  const { base, ui } = mote;
  const [port, uiPort] = [new URL(base).port, new URL(ui).port];
  assert.notEqual(port, uiPort, "the dashboard has a listener of its own");
  const browser = await Browser.launch();
  let stopTraffic = null;
  let guarded = null;
  try {
    await deploy(base, "trap", TRAP);
    await deploy(base, "slow", SLOW);
    for (let i = 0; i < 5; i++) assert.equal(await invoke(base, "hello"), 200);
    assert.notEqual(await invoke(base, "trap"), 200);
    assert.equal(await invoke(base, "slow"), 200);
    stopTraffic = traffic(base);

    // The page and its files come from the node's dashboard listener, with their types and a
    // cache header; the API's /ui sends browsers there.
    for (const [path, type] of [["/ui", "text/html"], ["/ui/", "text/html"], ["/ui/app.js", "text/javascript"], ["/ui/style.css", "text/css"]]) {
      const res = await api(ui, path);
      assert.ok(res.headers.get("content-type").startsWith(type), `${path}: ${res.headers.get("content-type")}`);
      assert.equal(res.headers.get("cache-control"), "no-cache", path);
      const again = await fetch(`${ui}${path}`, { headers: { "if-none-match": res.headers.get("etag") } });
      assert.equal(again.status, 304, `${path} revalidates by its ETag`);
      const sent = await fetch(`${base}${path}`, { redirect: "manual" });
      assert.equal(sent.status, 307, `the API's ${path} redirects`);
      assert.equal(sent.headers.get("location"), `${ui}${path}`);
    }
    ok("the page's files are served on the dashboard's own listener, typed, revalidated by ETag; the API's /ui redirects there");

    const page = await browser.newPage();
    await page.goto(`${base}/ui`);
    await page.waitFor(`location.origin === ${JSON.stringify(ui)}`, "the redirect to the dashboard's origin");
    await page.waitFor("Number(document.body.dataset.updates) >= 2", "two live updates");
    assert.equal(await page.eval("document.querySelector('#conn').dataset.state"), "live");
    ok("the page shows live updates from the event stream");

    // Function rows, with the calls the API counts: the page's figure lies between the API's
    // before and after it.
    const before = await (await api(base, "/v1/dashboard")).json();
    await page.waitFor(`${rowCalls("hello")} >= ${before.functions.find((f) => f.name === "hello").calls}`, "the page to catch up with the API");
    const shown = await page.eval(`Object.fromEntries([...document.querySelectorAll('#functions tr[data-function]')].map(r => [r.dataset.function, Number(r.querySelector('[data-field=calls]').dataset.value)]))`);
    const after = await (await api(base, "/v1/dashboard")).json();
    for (const name of ["hello", "echo", "wc", "ls", "trap", "slow"]) {
      assert.ok(name in shown, `the functions table has a row for ${name}: ${JSON.stringify(shown)}`);
    }
    for (const name of ["hello", "trap", "slow"]) {
      const lo = before.functions.find((f) => f.name === name).calls;
      const hi = after.functions.find((f) => f.name === name).calls;
      assert.ok(shown[name] > 0 && lo <= shown[name] && shown[name] <= hi, `${name}: the page shows ${shown[name]} calls, the API ${lo} then ${hi}`);
    }
    ok("the functions table has every function, with the calls the API counts");

    const trapOutcomes = await page.eval(`document.querySelector('#functions tr[data-function="trap"] [data-field=outcomes]').textContent`);
    assert.match(trapOutcomes, /trap [1-9]/, "the trapping function's outcomes show its traps");
    await page.waitFor(`document.querySelector('#functions tr[data-function="slow"] [data-field=p99]').textContent.endsWith('ms')`, "slow's p99 in ms");
    const stretch = await page.eval(`document.querySelector('#functions tr[data-function="hello"] [data-field=stretch]').textContent`);
    assert.ok(Number(stretch) >= 1, `hello's stretch is at least 1: ${stretch}`);
    ok("outcomes, percentiles and stretch are shown");

    // More calls: the count grows.
    const was = await page.eval(rowCalls("hello"));
    for (let i = 0; i < 20; i++) await invoke(base, "hello");
    await page.waitFor(`${rowCalls("hello")} >= ${was + 20}`, "hello's calls to grow by 20");
    ok("calls counted on the page grow with more calls");

    // Cores and classes as the node reports them.
    const node = await (await api(base, "/v1/node")).json();
    // One row per core, whichever thread ran its calls (a core passes between threads).
    assert.equal(await page.eval("document.querySelectorAll('#executors tbody tr[data-core]').length"), node.cores);
    assert.equal(await page.eval("Number(document.querySelector('#executors').dataset.cores)"), node.cores);
    assert.equal(node.cores, 2);
    assert.equal(await page.eval("document.querySelectorAll('#classes tbody tr[data-class]').length"), node.classes.length);
    const executorCalls = await page.eval("[...document.querySelectorAll('#executors [data-field=calls]')].reduce((n, c) => n + Number(c.textContent), 0)");
    assert.ok(executorCalls > 0, "the cores ran calls");
    ok(`the cores table shows the node's ${node.cores} cores and the share classes`);

    // The cluster: this node, by name, with the calls it ran.
    const me = await page.eval(`document.querySelector('#nodes tr[data-node="${NODE_NAME}"]')?.dataset.me`);
    assert.equal(me, "true");
    assert.equal(await page.eval("document.querySelector('#node-name').textContent"), NODE_NAME);
    assert.ok(Number(await page.eval(`document.querySelector('#nodes tr[data-node="${NODE_NAME}"] [data-field=calls]').textContent`)) > 0);
    ok("the cluster table shows this node by name and the calls it ran");

    // The charts: a line per busy function, and the busy-cores and queue lines.
    await page.waitFor("Number(document.querySelector('#chart-calls').dataset.points) >= 3", "three points in the charts");
    for (const id of ["chart-calls", "chart-p99", "chart-busy", "chart-queue"]) {
      const lines = await page.eval(`document.querySelectorAll('#${id} svg path.line').length`);
      assert.ok(lines >= 1, `${id} draws lines (${lines})`);
    }
    assert.ok(await page.eval(`[...document.querySelectorAll('#chart-calls path.line title')].some(t => t.textContent === 'hello')`));
    ok("the charts are drawn from the stream");

    // A job: its row, state, task rate and partition map.
    const job = await (await api(base, "/v1/jobs", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ function: "kmeans", workers: 1, partitions_per_core: 2, args: [["generate", "20000"], ["seed", "1"], ["iterations", "30"]] }),
    })).json();
    await page.waitFor(`document.querySelector('#jobs tr[data-job="${job.id}"] [data-field=state]')?.textContent === 'succeeded'`, "the job's row, succeeded", 30000);
    const map = await page.eval(`document.querySelector('#jobs tr[data-job="${job.id}"] .map').textContent`);
    assert.match(map, new RegExp(`${NODE_NAME}: g0: 0-3`), `the partition map: ${map}`);
    ok("the jobs table shows a job, its state and its partition map");

    if (process.env.MOTE_UI_SCREENSHOT) {
      // A long job across both nodes, running while the screenshot is taken.
      const long = await (await api(base, "/v1/jobs", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ function: "kmeans", workers: 2, partitions_per_core: 2, args: [["generate", "20000"], ["seed", "2"], ["iterations", "1000000"]] }),
      })).json();
      const wait = Number(process.env.MOTE_UI_SCREENSHOT_AFTER_S || 20);
      await sleep(wait * 1000);
      writeFileSync(process.env.MOTE_UI_SCREENSHOT, await page.screenshot());
      await api(base, `/v1/jobs/${long.id}`, { method: "DELETE" });
      ok(`screenshot saved to ${process.env.MOTE_UI_SCREENSHOT}`);
    }
    assert.deepEqual(page.errors, [], "no script errors or blocked loads");
    ok("no script errors, console errors or content-security-policy reports");

    // The node stops: the page says so, then reconnects when it is back on the same address.
    await stopTraffic();
    stopTraffic = null;
    await stopMote(mote.child);
    await page.waitFor("document.querySelector('#conn').dataset.state === 'disconnected'", "the disconnected state");
    const text = await page.eval("document.querySelector('#conn').textContent");
    assert.match(text, /disconnected/);
    ok(`the page shows the lost stream: "${text}"`);
    mote = await startMote(join(data, NODE_NAME), `127.0.0.1:${port}`, { extra: [...edge, "--ui-listen", `127.0.0.1:${uiPort}`] });
    const updates = await page.eval("Number(document.body.dataset.updates)");
    await page.waitFor(`document.querySelector('#conn').dataset.state === 'live' && Number(document.body.dataset.updates) > ${updates}`, "the page to reconnect", 30000);
    ok("the page reconnects when the node is back");

    // A node that asks for a token: a second real node with --require-tokens (no limit on failed
    // authentications, as this part fails on purpose), its admin token from DATA/admin.token, and
    // a `read` and an `invoke`-only token made through its API.
    guarded = await startMote(join(data, "guarded"), "127.0.0.1:0", {
      name: "guarded",
      extra: ["--require-tokens", "--auth-failures-per-minute", "0"],
    });
    const [gbase, gui] = [guarded.base, guarded.ui];
    const admin = readFileSync(join(data, "guarded", "admin.token"), "utf8").trim();
    assert.match(admin, /^mote_[0-9a-f]{64}$/, "the admin token in DATA/admin.token");
    const makeToken = async (name, scopes) => {
      const res = await fetch(`${gbase}/v1/tokens`, {
        method: "POST",
        headers: { Authorization: `Bearer ${admin}`, "content-type": "application/json" },
        body: JSON.stringify({ name, scopes }),
      });
      assert.equal(res.status, 201, `POST /v1/tokens for ${name}: ${await res.clone().text()}`);
      const made = await res.json();
      assert.deepEqual(made.scopes, scopes);
      return made.token;
    };
    const readToken = await makeToken("viewer", ["read"]);
    const invokeToken = await makeToken("caller", ["invoke"]);
    // What the API itself says to the page's request (the stream) without a token, with a wrong
    // one and with one lacking `read`: the page must show these words.
    const refusal = async (token, status) => {
      const res = await fetch(`${gbase}/v1/dashboard/events`, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
      assert.equal(res.status, status, `GET /v1/dashboard/events with ${token ? "a token" : "no token"}`);
      const { error } = await res.json();
      assert.ok(error, "the refusal has an error message");
      return error;
    };
    const noTokenError = await refusal(null, 401);
    assert.match(noTokenError, /`read` scope/);
    const wrongTokenError = await refusal("wrong", 401);
    const forbiddenError = await refusal(invokeToken, 403);
    assert.match(forbiddenError, /needs `read`/);
    assert.equal((await fetch(`${gui}/ui`)).status, 200, "/ui needs no token");
    const callHello = async (n) => {
      for (let i = 0; i < n; i++) {
        const res = await fetch(`${gbase}/v1/invoke/hello`, { method: "POST", headers: { Authorization: `Bearer ${invokeToken}` }, body: "guarded" });
        await res.arrayBuffer();
        assert.equal(res.status, 200, "the invoke-only token calls a function");
      }
    };
    await callHello(5);
    ok("a node started with --require-tokens refuses without a token, and makes read and invoke-only tokens");

    const signin = await browser.newPage();
    await signin.goto(`${gui}/ui`);
    await signin.waitFor("!document.querySelector('#signin').hidden", "the token form");
    assert.equal(await signin.eval("document.querySelector('#token-error').textContent"), noTokenError);
    assert.equal(await signin.eval("document.querySelector('#conn').dataset.state"), "signed-out");
    ok("without a token the page shows the token form with the API's 401 message");
    const submit = (token) => signin.eval(`(() => { document.querySelector('#token-input').value = ${JSON.stringify(token)}; document.querySelector('#token-form').requestSubmit(); return true; })()`);
    const formSays = (message) => `!document.querySelector('#signin').hidden && document.querySelector('#token-error').textContent === ${JSON.stringify(message)}`;
    await submit("wrong");
    await signin.waitFor(formSays(wrongTokenError), "the API's 401 message for a wrong token");
    assert.equal(await signin.eval("document.querySelector('#conn').dataset.state"), "signed-out");
    ok("a wrong token is refused: the form stays, with the API's message");
    await submit(invokeToken);
    await signin.waitFor(formSays(forbiddenError), "the API's 403 message for a token without `read`");
    assert.equal(await signin.eval("Number(document.body.dataset.updates || 0)"), 0, "no data reached the page before signing in");
    ok(`a token without the read scope is refused with the API's 403: "${forbiddenError}"`);
    await submit(readToken);
    await signin.waitFor("document.querySelector('#signin').hidden && document.querySelector('#conn').dataset.state === 'live' && Number(document.body.dataset.updates) >= 2", "live data with the read token");
    assert.equal(await signin.eval("localStorage.getItem('mote.token')"), readToken);
    for (const name of ["hello", "echo", "wc"]) {
      assert.ok(await signin.eval(`!!document.querySelector('#functions tr[data-function="${name}"]')`), `the signed-in page has a row for ${name}`);
    }
    await signin.waitFor(`${rowCalls("hello")} >= 5`, "hello's calls on the guarded node");
    await callHello(5);
    await signin.waitFor(`${rowCalls("hello")} >= 10`, "hello's calls to grow with live updates");
    ok("the read token signs the page in: function rows and live updates arrive");
    await signin.eval("document.querySelector('#sign-out').click(), true");
    await signin.waitFor(formSays(noTokenError), "the token form after signing out");
    assert.equal(await signin.eval("localStorage.getItem('mote.token')"), null);
    assert.equal(await signin.eval("document.querySelector('#conn').dataset.state"), "signed-out");
    ok("signing out forgets the token and brings the form back");
    // A link with the token, opened as the CLI would: a new page, no token kept (sign-out above
    // removed it from this origin's storage).
    const linked = await browser.newPage();
    await linked.goto(`${gui}/ui#token=${encodeURIComponent(readToken)}`);
    await linked.waitFor("document.querySelector('#signin').hidden && Number(document.body.dataset.updates) >= 1", "live data with the token from the address");
    assert.equal(await linked.eval("location.hash"), "");
    assert.equal(await linked.eval("location.href"), `${gui}/ui`);
    assert.equal(await linked.eval("localStorage.getItem('mote.token')"), readToken);
    ok("#token= in the address signs the page in and leaves the address bar");
    // The same on a page already open, signed out: the fragment changes, the page does not reload.
    await signin.eval(`(location.hash = ${JSON.stringify(`#token=${readToken}`)}, true)`);
    await signin.waitFor("document.querySelector('#signin').hidden && document.querySelector('#conn').dataset.state === 'live' && location.hash === ''", "the open page to take the token from its address");
    ok("an open page takes #token= too");
    // An old link to the API's /ui, token and all: the redirect keeps the fragment, which never
    // reached the API.
    const old = await browser.newPage();
    await old.goto(`${gbase}/ui#token=${encodeURIComponent(readToken)}`);
    await old.waitFor(`location.href === ${JSON.stringify(`${gui}/ui`)} && document.querySelector('#signin').hidden && Number(document.body.dataset.updates) >= 1`, "live data on the dashboard's origin");
    ok("an old link to the API's /ui#token= opens the dashboard on its own origin, signed in");
    for (const p of [signin, linked, old]) {
      assert.deepEqual(p.errors.filter((e) => !/\b40[13]\b/.test(e)), [], "no script errors beyond the expected 401s and 403s");
    }

    await hostilePage(browser, { gbase, gui, admin, readToken, invokeToken });
  } finally {
    if (stopTraffic) await stopTraffic();
    await browser.close();
    await stopMote(mote.child);
    if (second) await stopMote(second.child);
    if (guarded) await stopMote(guarded.child);
    rmSync(data, { recursive: true, force: true });
  }
  // In libtest's words, so that scripts/test counts these with the Rust tests.
  console.log(`test result: ok. ${passed} passed; 0 failed`);
}

main().catch((e) => {
  console.error(`not ok - ${e.stack || e}`);
  console.log(`test result: FAILED. ${passed} passed; 1 failed`);
  process.exit(1);
});
