/**
 * The whole loop in a real VS Code with the real daemon: validate the `helper_model` example (its spec
 * lacks the adapter for the TorchScript helper `examples.thirdparty.nbops.mol_sum`; auto-fix is off so
 * the failure stays visible), see the Problems with the right codes, apply the "declare adapter" quick
 * fix with the keyboard (Ctrl+.), validate again and see it pass — in the status bar, in Problems and in
 * the report panel's webview.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { Session, sleep } from "./harness";

const HELPER = "examples.thirdparty.nbops.mol_sum";
const VALIDATION_TIMEOUT = 240_000; // the first run starts the runner, which imports torch

describe("scenario: validate, quick-fix, validate again", { timeout: 900_000 }, () => {
  const session = new Session({
    name: "scenario",
    settings: { "distcheck.autoFix": false },
    prepareWorkspace: addSlowTarget,
  });

  before(() => session.startWithDaemon());

  after(async () => {
    await session.close();
  });

  async function validateHelperModel(): Promise<void> {
    await session.palette("Distcheck: Validate distribution");
    await session.quickPick("helper_model");
  }

  async function problemRows(filter = ""): Promise<string[]> {
    const rows = await session.problems(filter);
    const codes = rows.map((r) => /distcheck\(([\w-]+)\)/.exec(r)?.[1] ?? /distcheck ([\w-]+) \[/.exec(r)?.[1] ?? "?");
    session.log(`problems: ${rows.length} row(s), codes ${[...new Set(codes)].join(", ") || "none"}`);
    return rows;
  }

  it("the server starts and the CodeLens is above the factory", () =>
    session.step("codelens", async () => {
      await session.waitForStatus(/Distcheck/, 60_000);
      await session.quickOpen("helper_model.py");
      const source = fs.readFileSync(path.join(session.workspace, "helper_model.py"), "utf8").split("\n");
      const line = source.findIndex((l) => l.startsWith("def model_factory")) + 1;
      await session.page.keyboard.press("Control+G");
      await session.page.keyboard.type(`${line}`);
      await session.page.keyboard.press("Enter");
      const lens = session.page.locator(".contentWidgets .codelens-decoration, .codelens-decoration", { hasText: "Validate distribution" });
      await lens.first().waitFor({ timeout: 60_000 });
      assert.match(await lens.first().innerText(), /▶ Validate distribution \(helper_model\)/);
      await session.shot("codelens");
    }));

  it("validating helper_model fails and says why, with Problems carrying the right codes", () =>
    session.step("first-validation", async () => {
      await validateHelperModel();
      await session.waitForStatus(/helper_model/, 30_000);
      await session.shot("running");
      await session.waitForStatus(/✗ helper_model: \d+ outputs? failing/, VALIDATION_TIMEOUT);
      await session.shot("failed");
      // one code at a time: the errors' detail rows push the warnings off the (virtualised) list
      const helperRows = (await problemRows("undeclared-helper")).join("\n");
      assert.match(helperRows, /distcheck\(undeclared-helper\)|undeclared-helper/);
      assert.ok(helperRows.includes(HELPER), helperRows);
      assert.match((await problemRows("failing-output")).join("\n"), /distcheck\(failing-output\)|failing-output/);
      await session.shot("problems");
      const view = session.webview();
      await view.locator("#verdict").waitFor({ timeout: 30_000 });
      assert.equal((await view.locator("#verdict").innerText()).trim(), "✗ failed");
      await view.locator("button", { hasText: "Declare adapter" }).waitFor();
      await session.shot("report-failed");
    }));

  it("the declare-adapter quick fix applies with Ctrl+.", () =>
    session.step("quick-fix", async () => {
      await session.palette("View: Focus Problems (Errors, Warnings, Infos)");
      const filter = session.page.locator('.part.panel input[placeholder^="Filter"]').first();
      await filter.fill("undeclared-helper");
      await sleep(800);
      const row = session.page.locator(".markers-panel .monaco-list-row", { hasText: "undeclared" }).first();
      await row.click();
      await session.page.keyboard.press("Enter"); // opens the file at the diagnostic, focus in the editor
      await sleep(1000);
      await session.page.keyboard.press("Control+.");
      const menu = session.page.locator(".action-widget .monaco-list-row");
      await menu.first().waitFor();
      const titles = await menu.allInnerTexts();
      session.log(`quick fixes: ${titles.join(" | ")}`);
      const index = titles.findIndex((t) => t.includes(`Declare ${HELPER}`));
      assert.ok(index >= 0, `no declare-adapter fix among: ${titles.join(" | ")}`);
      await session.shot("quick-fix-menu");
      // the first row is focused when the menu opens; headers are not focusable
      const focusable = await session.page.locator(".action-widget .monaco-list-row.action").allInnerTexts();
      const target = focusable.findIndex((t) => t.includes(`Declare ${HELPER}`));
      for (let i = 0; i < target; i++) {
        await session.page.keyboard.press("ArrowDown");
      }
      await session.page.keyboard.press("Enter");
      await filter.fill("");
      const spec = path.join(session.workspace, "helper_model.distspec.json");
      const deadline = Date.now() + 20_000;
      let onDisk = "";
      while (Date.now() < deadline) {
        onDisk = fs.existsSync(spec) ? fs.readFileSync(spec, "utf8") : "";
        if (onDisk.includes("mol_sum")) {
          break;
        }
        await sleep(500);
      }
      const tab = session.page.locator('.tabs-container .tab[aria-label*="helper_model.distspec.json"]');
      session.log(`spec on disk: ${onDisk ? "yes" : "no"}; open tabs with it: ${await tab.count()}`);
      assert.ok(onDisk.includes("mol_sum") || (await tab.count()) > 0, "the quick fix did not write the adapter");
      await session.shot("quick-fix-applied");
      if (!onDisk.includes("mol_sum")) {
        // keep the buffer and the file in step for the re-run (the daemon reads open buffers too)
        await tab.first().click();
        await session.page.keyboard.press("Control+S");
      }
    }));

  it("validating again passes; Problems and the report panel agree", () =>
    session.step("second-validation", async () => {
      await validateHelperModel();
      await session.waitForStatus(/✓ helper_model/, VALIDATION_TIMEOUT);
      await session.shot("passed");
      const text = (await problemRows()).join("\n");
      assert.doesNotMatch(text, /failing-output|undeclared-helper/);
      const view = session.webview();
      await view.locator("#verdict", { hasText: "passed" }).waitFor({ timeout: 30_000 });
      assert.equal((await view.locator("#verdict").innerText()).trim(), "✓ passed");
      assert.equal(await view.locator("svg.diff-chart rect.bar.bad").count(), 0);
      await session.shot("report-passed");
    }));

  it("Apply best spec writes the validated spec file", () =>
    session.step("apply-best-spec", async () => {
      const spec = path.join(session.workspace, "helper_model.distspec.json");
      fs.rmSync(spec);
      // the spec file this pass ran under is gone: the panel says the verdict is stale, and still
      // offers to write the spec that passed
      const view = await session.reportShows("stale");
      assert.match(await view.locator("body").innerText(), /helper_model\.distspec\.json changed after this run/);
      await view.locator("button", { hasText: "Apply best spec" }).click();
      const toast = session.toasts().filter({ hasText: "wrote the validated spec of helper_model" }).first();
      await toast.waitFor({ timeout: 30_000 });
      assert.match(await toast.innerText(), /helper_model\.distspec\.json/);
      await toast.hover();
      await toast.locator(".monaco-button", { hasText: "Open" }).click();
      await session.page.locator('.tabs-container .tab.active[aria-label*="helper_model.distspec.json"]').waitFor();
      await session.page.locator(".editor-instance .monaco-editor .view-lines", { hasText: "mol_sum" }).first().waitFor();
      await session.shot("applied-best-spec");
      // back to no spec file, for the next step
      await session.palette("View: Revert and Close Editor");
      await sleep(500);
      fs.rmSync(spec, { force: true });
    }));

  it("the report panel's Declare adapter button and its Validate follow-up", () =>
    session.step("panel-buttons", async () => {
      fs.rmSync(path.join(session.workspace, "helper_model.distspec.json"), { force: true });
      await sleep(1500); // the daemon hears of the deletion through the file watcher
      await validateHelperModel();
      await session.waitForStatus(/✗ helper_model: \d+ outputs? failing/, VALIDATION_TIMEOUT);
      const view = await session.reportShows("failed");
      await view.locator("button", { hasText: "Declare adapter" }).click();
      const toast = session.toasts().filter({ hasText: `Declare ${HELPER}` }).first();
      await toast.waitFor({ timeout: 30_000 });
      await session.shot("declared-from-panel");
      await toast.hover();
      await toast.locator(".monaco-button", { hasText: "Validate" }).click();
      await session.waitForStatus(/✓ helper_model/, VALIDATION_TIMEOUT);
      await view.locator("#verdict", { hasText: "passed" }).waitFor({ timeout: 30_000 });
      await session.shot("passed-after-panel-fix");
    }));

  it("Cancel validation stops a running validation", () =>
    session.step("cancel", async () => {
      await session.palette("Distcheck: Validate distribution");
      await session.quickPick("slow");
      await session.waitForStatus(/Distcheck slow/, 30_000);
      await session.palette("Distcheck: Cancel validation");
      await session.page.locator(".statusbar-item", { hasText: "Distcheck: cancelled slow" }).first().waitFor({ timeout: 30_000 });
      await session.shot("cancelled");
      // the cancelled run is what the status item shows now, not the previous target's pass
      await session.waitForStatus(/slow: cancelled/, 30_000);
    }));
});

/** A target whose ranks sleep in forward, so a validation is still running when the test cancels it. */
function addSlowTarget(workspace: string): void {
  fs.writeFileSync(
    path.join(workspace, "slow_model.py"),
    [
      '"""A pair potential whose ranks sleep in forward, so a validation stays busy."""',
      "import time",
      "",
      "from distcheck.runtime import current_context",
      "from examples import pair_potential",
      "",
      "",
      "class Slow(pair_potential.PairPotential):",
      "    def forward(self, batch):",
      "        if current_context() is not None:",
      "            time.sleep(60)",
      "        return super().forward(batch)",
      "",
      "",
      "def model_factory():",
      "    return Slow().double()",
      "",
      "",
      "sample_batch = pair_potential.sample_batch",
      "",
    ].join("\n"),
  );
  fs.appendFileSync(
    path.join(workspace, "pyproject.toml"),
    '\n[[tool.distcheck.targets]]\nname = "slow"\nfactory = "slow_model.py:model_factory"\n' +
      'sample = "slow_model.py:sample_batch"\ntimeout_sec = 300\n',
  );
}
