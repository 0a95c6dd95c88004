/**
 * Fixes where the error is, in a real VS Code with the real daemon: `helper_model` validated with
 * auto-fix off fails, its failing outputs are marked in the spec JSON, and Ctrl+. on one of them there
 * offers the helper's "Declare ... as a reduction adapter" fix (before, only the Python call sites
 * did); applying it edits the spec file.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { Session, sleep } from "./harness";

const VALIDATION_TIMEOUT = 300_000; // the first run starts the runner, which imports torch
const HELPER = "examples.thirdparty.nbops.mol_sum";
const ROOT = path.resolve(__dirname, "..", "..", "..");

/** helper_model's own spec (no adapter) as its file, so the failing outputs have lines in it. */
function writeSpec(workspace: string): void {
  const python = path.join(ROOT, ".venv", "bin", "python");
  const text = execFileSync(
    python,
    ["-c", "from distcheck.spec import MLIPSpec; from examples import helper_model; print(MLIPSpec.from_dict(helper_model.SPEC).to_json(), end='')"],
    { cwd: ROOT, env: { ...process.env, PYTHONPATH: [path.join(ROOT, "server"), ROOT].join(path.delimiter) }, encoding: "utf8" },
  );
  fs.writeFileSync(path.join(workspace, "helper_model.distspec.json"), text);
}

describe("fixes: Ctrl+. on a failing output in the spec JSON offers the adapter fix", { timeout: 900_000 }, () => {
  const session = new Session({ name: "fixes", settings: { "distcheck.autoFix": false }, prepareWorkspace: writeSpec });
  const spec = (): string => path.join(session.workspace, "helper_model.distspec.json");

  before(() => session.startWithDaemon());

  after(async () => {
    await session.close();
  });

  it("validating helper_model marks its failing outputs in the spec JSON", () =>
    session.step("validate", async () => {
      await session.waitForStatus(/Distcheck/, 60_000);
      await session.palette("Distcheck: Validate distribution");
      await session.quickPick("helper_model");
      await session.waitForStatus(/✗ helper_model/, VALIDATION_TIMEOUT);
      const rows = await session.problems();
      assert.ok(rows.some((r) => r.includes("failing-output")), rows.join("\n"));
    }));

  it("Ctrl+. on the failing output offers the adapter fix, and applying it edits the spec", () =>
    session.step("fix", async () => {
      // from its row in Problems: opens the spec JSON at the diagnostic, focus in the editor
      await session.palette("View: Focus Problems (Errors, Warnings, Infos)");
      const row = session.page.locator(".markers-panel .monaco-list-row", { hasText: "Output 'forces'" }).first();
      await row.click();
      await session.page.keyboard.press("Enter");
      await sleep(1500);
      await session.page.keyboard.press("Control+.");
      const menu = session.page.locator(".action-widget .monaco-list-row");
      await menu.first().waitFor({ timeout: 30_000 });
      const titles = await menu.allInnerTexts();
      session.log(`quick fixes in the spec JSON: ${titles.join(" | ")}`);
      await session.shot("spec-json-quick-fix-menu");
      const focusable = await session.page.locator(".action-widget .monaco-list-row.action").allInnerTexts();
      const index = focusable.findIndex((t) => t.includes(`Declare ${HELPER}`));
      assert.ok(index >= 0, `no declare-adapter fix among: ${titles.join(" | ")}`);
      for (let i = 0; i < index; i++) {
        await session.page.keyboard.press("ArrowDown");
      }
      await session.page.keyboard.press("Enter");
      await sleep(1500);
      await session.page.keyboard.press("Control+S");
      const deadline = Date.now() + 20_000;
      let onDisk = "";
      while (Date.now() < deadline && !onDisk.includes("mol_sum")) {
        await sleep(500);
        onDisk = fs.readFileSync(spec(), "utf8");
      }
      await session.shot("spec-json-fix-applied");
      const helpers = (JSON.parse(onDisk) as { distribution: { third_party_helpers: Array<{ module_path: string; attr_name: string }> } }).distribution
        .third_party_helpers;
      assert.deepEqual(
        helpers.map((h) => `${h.module_path}.${h.attr_name}`),
        [HELPER],
      );
    }));
});
