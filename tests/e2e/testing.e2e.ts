/**
 * The Testing view in a real VS Code with the real daemon: the `helper_model` target is a test item (in
 * the Testing view and as the gutter run icon at its `def model_factory`); running it from the editor
 * (Test: Run Test at Cursor, the gutter's action) validates it through the daemon (auto-fix off, so it
 * fails) and the item shows failed with one message per failing output (its max error and tolerance).
 * A validation from the palette updates its item too, and a model file written while VS Code is open
 * becomes an item without Refresh, and stays one when it stops parsing.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { Session, sleep } from "./harness";

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

  it("a validation started from the palette updates its item too", () =>
    session.step("palette-run", async () => {
      await session.palette("Distcheck: Validate distribution");
      await session.quickPick("pair_potential");
      await session.waitForStatus(/pair_potential/, VALIDATION_TIMEOUT);
      await session.palette("Testing: Focus on Test Explorer View");
      const passed = testRow("pair_potential").locator(".codicon-testing-passed-icon");
      await passed.first().waitFor({ timeout: VALIDATION_TIMEOUT });
      await session.shot("palette-run-passed");
    }));

  it("a model file created on disk becomes an item with no Refresh; one that stops parsing stays", () =>
    session.step("discovery", async () => {
      const file = path.join(session.workspace, "fresh_model.py");
      fs.writeFileSync(file, FRESH_MODEL);
      await testRow("fresh_model.py").waitFor({ timeout: 30_000 });
      fs.writeFileSync(file, FRESH_MODEL.replace("def sample_batch():", "def sample_batch(:"));
      await sleep(3000); // the watcher's event and the re-read of the targets
      await session.palette("Testing: Focus on Test Explorer View");
      await testRow("fresh_model.py").waitFor({ timeout: 10_000 });
      await session.shot("discovered");
    }));
});

const FRESH_MODEL = [
  '"""Written by the test while VS Code is open."""',
  "from examples import pair_potential",
  "",
  "",
  "def model_factory():",
  "    return pair_potential.PairPotential().double()",
  "",
  "",
  "def sample_batch():",
  "    return pair_potential.sample_batch()",
  "",
].join("\n");
