// A headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
// NUL-separated JSON on file descriptors 3 and 4), so the test needs no WebSocket client and no
// package from a registry.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The browser binary: MOTE_CHROMIUM, or Debian's chromium (its launcher script, or the binary). */
export function chromiumPath() {
  const candidates = [process.env.MOTE_CHROMIUM, "/usr/lib/chromium/chromium", "/usr/bin/chromium"];
  const found = candidates.find((p) => p && existsSync(p));
  if (!found) throw new Error("no Chromium: install Debian's chromium package (scripts/test-ui does) or set MOTE_CHROMIUM");
  return found;
}

export class Browser {
  static async launch({ width = 1280, height = 900 } = {}) {
    const profile = mkdtempSync(join(tmpdir(), "mote-ui-chromium-"));
    const args = [
      "--headless=new",
      "--remote-debugging-pipe",
      `--user-data-dir=${profile}`,
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-extensions",
      "--disable-background-networking",
      "--disable-component-update",
      "--hide-scrollbars",
      "--mute-audio",
      `--window-size=${width},${height}`,
      "about:blank",
    ];
    // Chromium's sandbox needs user namespaces, which a CI container run as root lacks.
    if (process.getuid && process.getuid() === 0) args.unshift("--no-sandbox");
    // In a process group of its own, so that closing it ends its helper processes too.
    const child = spawn(chromiumPath(), args, { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"], detached: true });
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr = (stderr + d).slice(-4000);
    });
    const browser = new Browser(child, profile, () => stderr);
    await browser.send("Target.setDiscoverTargets", { discover: false });
    return browser;
  }

  constructor(child, profile, stderr) {
    this.child = child;
    this.profile = profile;
    this.stderr = stderr;
    this.nextId = 1;
    this.waiting = new Map();
    this.listeners = [];
    this.buffer = "";
    this.exited = new Promise((resolve) => child.once("exit", resolve));
    child.stdio[4].on("data", (chunk) => this.receive(chunk));
    child.once("exit", (code) => {
      for (const { reject } of this.waiting.values()) {
        reject(new Error(`Chromium exited (${code}): ${this.stderr()}`));
      }
      this.waiting.clear();
    });
  }

  receive(chunk) {
    this.buffer += chunk.toString("utf8");
    let end;
    while ((end = this.buffer.indexOf("\0")) >= 0) {
      const message = JSON.parse(this.buffer.slice(0, end));
      this.buffer = this.buffer.slice(end + 1);
      if (message.id !== undefined) {
        const call = this.waiting.get(message.id);
        this.waiting.delete(message.id);
        if (!call) continue;
        if (message.error) call.reject(new Error(`${call.method}: ${message.error.message}`));
        else call.resolve(message.result);
      } else {
        for (const listener of this.listeners) listener(message);
      }
    }
  }

  send(method, params = {}, sessionId = undefined) {
    const id = this.nextId++;
    const message = { id, method, params };
    if (sessionId) message.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject, method });
      this.child.stdio[3].write(JSON.stringify(message) + "\0");
    });
  }

  /** A new tab of `width`×`height`, with its console errors, exceptions and CSP reports kept. */
  async newPage({ width = 1280, height = 900 } = {}) {
    const { targetId } = await this.send("Target.createTarget", { url: "about:blank" });
    return this.attach(targetId, { width, height });
  }

  /** Every tab, as `Target.getTargets` describes them (`targetId`, `url`, ...). */
  async pages() {
    const { targetInfos } = await this.send("Target.getTargets");
    return targetInfos.filter((t) => t.type === "page");
  }

  /** The tab `targetId` (one a page opened, say), from now on as `newPage` gives them. */
  async attach(targetId, { width = 1280, height = 900 } = {}) {
    const { sessionId } = await this.send("Target.attachToTarget", { targetId, flatten: true });
    const page = new Page(this, sessionId, targetId);
    this.listeners.push((m) => m.sessionId === sessionId && page.event(m));
    await page.send("Page.enable");
    await page.send("Runtime.enable");
    await page.send("Log.enable");
    await page.send("Emulation.setDeviceMetricsOverride", { width, height, deviceScaleFactor: 1, mobile: false });
    return page;
  }

  async close() {
    try {
      await Promise.race([this.send("Browser.close"), new Promise((r) => setTimeout(r, 3000))]);
    } catch (_) {
      // It may already be gone.
    }
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
    await this.exited;
    // Its helpers (network service, crash handler) may outlive it by a moment.
    try {
      process.kill(-this.child.pid, "SIGKILL");
    } catch (_) {
      // The group is gone already.
    }
    try {
      rmSync(this.profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
    } catch (e) {
      console.warn(`# left the browser profile ${this.profile}: ${e.message}`);
    }
  }
}

export class Page {
  constructor(browser, sessionId, targetId) {
    this.browser = browser;
    this.sessionId = sessionId;
    this.targetId = targetId;
    this.errors = [];
  }

  send(method, params = {}) {
    return this.browser.send(method, params, this.sessionId);
  }

  event({ method, params }) {
    if (method === "Runtime.exceptionThrown") {
      this.errors.push(params.exceptionDetails.exception?.description || params.exceptionDetails.text);
    } else if (method === "Runtime.consoleAPICalled" && params.type === "error") {
      this.errors.push(params.args.map((a) => a.value ?? a.description).join(" "));
    } else if (method === "Log.entryAdded" && params.entry.level === "error") {
      this.errors.push(`${params.entry.source}: ${params.entry.text} ${params.entry.url || ""}`);
    }
  }

  async goto(url) {
    const { errorText } = await this.send("Page.navigate", { url });
    if (errorText) throw new Error(`cannot load ${url}: ${errorText}`);
  }

  /**
   * The value of `expression`, awaited if it is a promise; with `userGesture`, run as if the
   * user had just clicked (so that the page may open windows).
   */
  async eval(expression, { userGesture = false } = {}) {
    const { result, exceptionDetails } = await this.send("Runtime.evaluate", {
      expression,
      returnByValue: true,
      awaitPromise: true,
      userGesture,
    });
    if (exceptionDetails) {
      throw new Error(`${expression}: ${exceptionDetails.exception?.description || exceptionDetails.text}`);
    }
    return result.value;
  }

  /** Waits until `expression` is truthy; fails naming `what` after `timeoutMs`. */
  async waitFor(expression, what, timeoutMs = 15000) {
    const deadline = Date.now() + timeoutMs;
    let last;
    for (;;) {
      try {
        last = await this.eval(expression);
        if (last) return last;
      } catch (e) {
        last = e.message;
      }
      if (Date.now() > deadline) {
        throw new Error(`waited ${timeoutMs} ms for ${what} (${expression} was ${JSON.stringify(last)})`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** A PNG of the whole page, `width` wide, as tall as its content. */
  async screenshot(width = 1280) {
    const height = await this.eval("Math.ceil(document.documentElement.scrollHeight)");
    await this.send("Emulation.setDeviceMetricsOverride", { width, height, deviceScaleFactor: 1, mobile: false });
    // The charts redraw for the new size on the next frame.
    await this.eval("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))");
    const { data } = await this.send("Page.captureScreenshot", { format: "png" });
    return Buffer.from(data, "base64");
  }
}
