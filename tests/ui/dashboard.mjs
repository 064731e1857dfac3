// The dashboard in a real headless Chromium against a real `mote up`: the page loads from the
// node, reads the live stream, and shows what the API says; it goes "disconnected" when the node
// stops and live again when it is back; and its token handling works against a second real node
// that asks for one (`--require-tokens`), with tokens made through its API.
//
//   node tests/ui/dashboard.mjs [path/to/mote]
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

/** Starts `mote up` on `listen`; resolves with the process and its base URL once it serves. */
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
  const base = await new Promise((resolveUrl, reject) => {
    let seen = "";
    child.stdout.on("data", (d) => {
      seen += d;
      const m = seen.match(/mote is up on (http:\/\/[0-9.:]+)/);
      if (m) resolveUrl(m[1]);
    });
    child.once("exit", (code) => reject(new Error(`mote up exited (${code}): ${out}`)));
  });
  for (let i = 0; i < 100; i++) {
    const res = await fetch(`${base}/healthz`).catch(() => null);
    if (res && res.ok) return { child, base };
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
  const { base } = mote;
  const port = new URL(base).port;
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

    // The page and its files come from the node, with their types and a cache header.
    for (const [path, type] of [["/ui", "text/html"], ["/ui/", "text/html"], ["/ui/app.js", "text/javascript"], ["/ui/style.css", "text/css"]]) {
      const res = await api(base, path);
      assert.ok(res.headers.get("content-type").startsWith(type), `${path}: ${res.headers.get("content-type")}`);
      assert.equal(res.headers.get("cache-control"), "no-cache", path);
      const again = await fetch(`${base}${path}`, { headers: { "if-none-match": res.headers.get("etag") } });
      assert.equal(again.status, 304, `${path} revalidates by its ETag`);
    }
    ok("the page's files are served by the node, typed, revalidated by ETag");

    const page = await browser.newPage();
    await page.goto(`${base}/ui`);
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
    // One row per executor thread, or per core when the node preempts (a core passes between
    // threads then).
    const rows = node.preempt ? node.cores : node.executor_threads;
    assert.equal(await page.eval("document.querySelectorAll('#executors tbody tr[data-executor]').length"), rows);
    assert.equal(await page.eval("Number(document.querySelector('#executors').dataset.cores)"), node.cores);
    assert.equal(node.cores, 2);
    assert.equal(await page.eval("document.querySelectorAll('#classes tbody tr[data-class]').length"), node.classes.length);
    const executorCalls = await page.eval("[...document.querySelectorAll('#executors [data-field=calls]')].reduce((n, c) => n + Number(c.textContent), 0)");
    assert.ok(executorCalls > 0, "the executors ran calls");
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
    mote = await startMote(join(data, NODE_NAME), `127.0.0.1:${port}`, { extra: edge });
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
    const gbase = guarded.base;
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
    assert.equal((await fetch(`${gbase}/ui`)).status, 200, "/ui needs no token");
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
    await signin.goto(`${gbase}/ui`);
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
    await linked.goto(`${gbase}/ui#token=${encodeURIComponent(readToken)}`);
    await linked.waitFor("document.querySelector('#signin').hidden && Number(document.body.dataset.updates) >= 1", "live data with the token from the address");
    assert.equal(await linked.eval("location.hash"), "");
    assert.equal(await linked.eval("location.href"), `${gbase}/ui`);
    assert.equal(await linked.eval("localStorage.getItem('mote.token')"), readToken);
    ok("#token= in the address signs the page in and leaves the address bar");
    // The same on a page already open, signed out: the fragment changes, the page does not reload.
    await signin.eval(`(location.hash = ${JSON.stringify(`#token=${readToken}`)}, true)`);
    await signin.waitFor("document.querySelector('#signin').hidden && document.querySelector('#conn').dataset.state === 'live' && location.hash === ''", "the open page to take the token from its address");
    ok("an open page takes #token= too");
    for (const p of [signin, linked]) {
      assert.deepEqual(p.errors.filter((e) => !/\b40[13]\b/.test(e)), [], "no script errors beyond the expected 401s and 403s");
    }
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
