/**
 * The Testing view in a real VS Code with the real daemon: the `helper_model` target is a test item (in
 * the Testing view and as the gutter run icon at its `def model_factory`); running it from the editor
 * (Test: Run Test at Cursor, the gutter's action) validates it through the daemon (auto-fix off, so it
 * fails) and the item shows failed with one message per failing output (its max error and tolerance).
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { Session } from "./harness";

const VALIDATION_TIMEOUT = 300_000; // the first run starts the runner, which imports torch

describe("testing view: targets as test items, run, failure messages", { timeout: 900_000 }, () => {
  const session = new Session({ name: "testing", settings: { "distcheck.autoFix": false } });

  before(() => session.startWithDaemon());

  after(async () => {
    await session.close();
  });

  const testRow = (name: string) => session.page.locator(".test-explorer .monaco-list-row", { hasText: name }).first();

  it("each target is an item of the Testing view, with the run icon at its factory", () =>
    session.step("items", async () => {
      await session.waitForStatus(/Distcheck/, 60_000);
      await session.palette("Testing: Focus on Test Explorer View");
      await testRow("helper_model").waitFor({ timeout: 60_000 });
      for (const name of ["pair_potential", "unaware_model"]) {
        await testRow(name).waitFor({ timeout: 10_000 });
      }
      await session.quickOpen("helper_model.py");
      const source = fs.readFileSync(path.join(session.workspace, "helper_model.py"), "utf8").split("\n");
      const line = source.findIndex((l) => l.startsWith("def model_factory")) + 1;
      // Go to Line can miss right after the editor opens: retry until the cursor is on the def
      const cursor = session.page.locator(".statusbar-item", { hasText: `Ln ${line}, Col` }).first();
      for (let i = 0; i < 5 && !(await cursor.isVisible()); i++) {
        await session.page.locator(".monaco-editor textarea").first().focus();
        await session.page.keyboard.press("Control+G");
        await session.page.keyboard.type(`${line}`);
        await session.page.keyboard.press("Enter");
        await cursor.waitFor({ timeout: 3000 }).catch(() => undefined);
      }
      await cursor.waitFor({ timeout: 5000 });
      const glyph = session.page.locator(".monaco-editor .margin [class*='testing-run-glyph'], .monaco-editor .margin .codicon-testing-run-icon");
      await glyph.first().waitFor({ timeout: 30_000 });
      await session.shot("items-and-gutter");
    }));

  it("running helper_model from its factory line shows it failed, with a message per failing output", () =>
    session.step("run", async () => {
      await session.palette("Test: Run Test at Cursor");
      const failed = session.page.locator(".test-explorer .monaco-list-row", { hasText: "helper_model" }).locator(".codicon-testing-failed-icon");
      await failed.first().waitFor({ timeout: VALIDATION_TIMEOUT });
      await session.shot("failed");
      // the failure peek (opened for a failure in a visible document) or the explorer's message rows
      const message = session.page.getByText(/forces: \d+\/\d+ elements out of tolerance, max abs diff [\d.e-]+ \(atol [\d.e-]+, rtol [\d.e-]+\)/).first();
      await message.waitFor({ timeout: 30_000 });
      assert.match(await message.innerText(), /forces: \d+\/\d+ elements out of tolerance/);
      await session.shot("failure-message");
      const pass = session.page.locator(".test-explorer .monaco-list-row", { hasText: "helper_model" }).locator(".codicon-testing-passed-icon");
      assert.equal(await pass.count(), 0);
    }));
});
