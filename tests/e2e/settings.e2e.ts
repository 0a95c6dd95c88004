/**
 * Settings that stick, in a real VS Code (code-server is a remote window, where a machine-scoped setting
 * in User settings is dropped once the extension's configuration registers): `distcheck.interpreter` set
 * in User settings starts the server, and "Distcheck: Restart server" starts it again with the same
 * interpreter (the log names the source; no python3 fallback, no set-up notification). The Distcheck log
 * has levels, and the walkthrough opens with its four steps.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { PYTHON, Session, sleep } from "./harness";

const FROM_USER = `interpreter ${PYTHON} (from the distcheck.interpreter setting (User settings))`;

describe("settings: the interpreter survives a restart; the walkthrough", { timeout: 600_000 }, () => {
  // the harness writes distcheck.interpreter = the repository's .venv python into User settings
  const session = new Session({ name: "settings" });

  before(() => session.startWithDaemon());

  after(async () => {
    await session.close();
  });

  /** The Distcheck log lines that contain `filter`, polled until `done` holds for them or `timeoutMs` passes. */
  async function logUntil(filter: string, done: (lines: string) => boolean, timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    let lines = "";
    while (Date.now() < deadline) {
      lines = await session.outputLines(filter);
      if (done(lines)) {
        return lines;
      }
      await sleep(1000);
    }
    return lines;
  }

  const count = (text: string, needle: string): number => text.split(needle).length - 1;

  it("the first start uses the interpreter from User settings and says so", () =>
    session.step("first-start", async () => {
      await session.statusItem().waitFor({ timeout: 60_000 });
      await session.palette("Distcheck: Show output");
      await session.page.locator(".part.panel .monaco-editor .view-lines").first().waitFor();
      const lines = await logUntil("interpreter", (l) => l.includes(FROM_USER), 60_000);
      assert.ok(lines.includes(FROM_USER), lines);
      assert.match(lines, /\[info\] interpreter /, "the log has levels");
      const started = await logUntil("server started", (l) => l.includes("server started"), 60_000);
      assert.match(started, /server started/);
      await session.shot("first-start-log");
    }));

  it("Distcheck: Restart server starts it again with the same interpreter, no fallback", () =>
    session.step("restart", async () => {
      await session.palette("Distcheck: Restart server");
      const lines = await logUntil("interpreter", (l) => count(l, FROM_USER) >= 2, 60_000);
      assert.equal(count(lines, FROM_USER), 2, lines);
      assert.ok(!lines.includes("python3"), `no python3 fallback:\n${lines}`);
      const started = await logUntil("server started", (l) => count(l, "server started") >= 2, 60_000);
      assert.equal(count(started, "server started"), 2, started);
      await sleep(2000);
      for (const words of ["not importable", "no Python interpreter at"]) {
        assert.equal(await session.toasts().filter({ hasText: words }).count(), 0, `no "${words}" notification`);
      }
      await session.shot("restarted-log");
    }));

  it("the walkthrough opens with its four steps", () =>
    session.step("walkthrough", async () => {
      await session.palette("Welcome: Open Walkthrough...");
      await session.quickPick("Get started with Distcheck");
      const page = session.page.locator(".gettingStartedContainer");
      await page.waitFor({ timeout: 30_000 });
      for (const title of ["Pick the interpreter", "Install distcheck", "Validate an example", "Apply a fix"]) {
        await page.locator(".getting-started-step", { hasText: title }).first().waitFor({ timeout: 30_000 });
      }
      await session.shot("walkthrough");
    }));
});
