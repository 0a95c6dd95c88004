/**
 * Honest editor states in a real VS Code with the real daemon (issue 16 item 1 and 2):
 * - `helper_model` with auto-fix on: the first attempt fails, auto-fix passes; the status item and the
 *   panel say "fix available — apply" (never a green pass), Apply best spec leads, attempts are
 *   numbered from 1 in the panel; the partition chart sits under its heading and takes a wide panel's
 *   width;
 * - an edit of the model after the report makes the verdict stale (status item and panel);
 * - `distcheck.saveBeforeValidate`: always saves the dirty model first; never validates the disk and
 *   the panel names the unsaved file; prompt asks, and "Save and validate" saves;
 * - a cancelled validation shows as cancelled in the status item and on the panel, which offers
 *   Validate again.
 * Screenshots under tests/e2e/artifacts/states/.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { Session, sleep } from "./harness";

const VALIDATION_TIMEOUT = 300_000; // the first run starts the runner, which imports torch
const FIX = "fix available — apply";

describe("states: passed after fix, stale, save before validate, cancelled", { timeout: 1_500_000 }, () => {
  const session = new Session({ name: "states", prepareWorkspace: addSlowTarget });
  const model = (): string => path.join(session.workspace, "helper_model.py");
  let edits = 0;

  before(() => session.startWithDaemon());

  after(async () => {
    await session.close();
  });

  /** Validate distribution → the target; again when the target picker closes before it is used (a
   * webview that finishes loading can take the focus from it). */
  async function validate(target: string): Promise<void> {
    const picker = session.page.locator('.quick-input-widget .quick-input-box input[placeholder="Target to validate"]');
    for (let i = 0; i < 3; i++) {
      await session.palette("Distcheck: Validate distribution");
      try {
        await picker.waitFor({ state: "visible", timeout: 5000 });
        await sleep(300);
        if (await picker.isVisible()) {
          await session.quickPick(target);
          return;
        }
      } catch {
        session.log("the target picker did not stay open; again");
      }
    }
    throw new Error(`e2e states: the target picker never stayed open to pick ${target}`);
  }

  /** Types a comment at the end of helper_model.py (leaving the buffer dirty); returns the comment. */
  async function editModel(): Promise<string> {
    const comment = `# e2e edit ${++edits}`;
    await openModel();
    await session.page.locator(".editor-instance .monaco-editor textarea").first().focus();
    await session.page.keyboard.press("Control+End");
    await session.page.keyboard.insertText(`\n${comment}\n`);
    await session.page.locator('.tabs-container .tab.dirty[aria-label*="helper_model.py"]').first().waitFor({ timeout: 10_000 });
    session.log(`typed "${comment}" into helper_model.py (unsaved)`);
    await session.waitForStatus(/helper_model: stale — validate again/, 20_000);
    return comment;
  }

  /** Makes helper_model.py the active editor: its tab when it has one, else its Explorer row (Quick
   * Open's keys can go to a focused webview or a closing editor); retried a few times. */
  async function openModel(): Promise<void> {
    const active = session.page.locator('.tabs-container .tab.active[aria-label*="helper_model.py"]').first();
    for (let i = 0; i < 4 && !(await active.isVisible()); i++) {
      const tab = session.page.locator('.tabs-container .tab[aria-label*="helper_model.py"]').first();
      const row = session.page.locator(".explorer-folders-view .monaco-list-row", { hasText: /^helper_model\.py/ }).first();
      await ((await tab.isVisible()) ? tab : row).click();
      await active.waitFor({ timeout: 5000 }).catch(() => session.log("helper_model.py is not the active editor yet; again"));
    }
    await active.waitFor({ timeout: 5000 });
  }

  /**
   * Sets a User setting in settings.json the way a user does (Session.setSetting), with every editor
   * closed first: setSetting types into the first editor on the page, which must be settings.json.
   * Only call it while no buffer is dirty.
   */
  async function setUserSetting(key: string, value: unknown): Promise<void> {
    await session.palette("View: Close All Editors");
    await sleep(1000);
    await session.setSetting("user", key, value);
  }

  const onDisk = (): string => fs.readFileSync(model(), "utf8");

  /** Brings the report panel to the front (after the single-column layout it shares a group with the model). */
  async function showPanel(shows: string): Promise<ReturnType<Session["webview"]>> {
    await session.palette("Distcheck: Show report");
    return session.reportShows(shows);
  }

  it("a pass only after auto-fix is 'fix available — apply' in the status item and the panel, Apply first", () =>
    session.step("passed-after-fix", async () => {
      await session.waitForStatus(/Distcheck/, 60_000);
      await validate("helper_model");
      const status = await session.waitForStatus(new RegExp(`helper_model: ${FIX}`), VALIDATION_TIMEOUT);
      assert.doesNotMatch(status, /✓/);
      const view = await session.reportShows(FIX);
      assert.equal((await view.locator("#verdict").innerText()).trim(), `💡 ${FIX}`);
      const buttons = (await view.locator(".actions button").allInnerTexts()).map((t) => t.trim());
      assert.equal(buttons[0], "Apply best spec", buttons.join(" | "));
      // attempts numbered from 1: the table's rows 1, 2 and the outputs of the passing fix, attempt 2
      const numbers = (await view.locator("table.attempts tbody tr td:first-child").allInnerTexts()).map((t) => t.trim());
      assert.deepEqual(numbers, ["1", "2"]);
      assert.match(await view.locator("#outputs h2").innerText(), /attempt 2/);
      await session.shot("passed-after-fix");
    }));

  it("in a wide panel the partition chart is under its heading and takes the panel's width", () =>
    session.step("wide-partition", async () => {
      await session.palette("View: Single Column Editor Layout");
      await sleep(1500);
      const view = await session.reportShows(FIX);
      const heading = await view.locator("#partition h2").boundingBox();
      const chart = await view.locator("svg.partition-chart").boundingBox();
      const body = await view.locator("body").boundingBox();
      assert.ok(heading && chart && body, "partition heading, chart and body are on the page");
      session.log(`panel ${body.width.toFixed(0)} px wide; heading bottom ${(heading.y + heading.height).toFixed(0)}, chart top ${chart.y.toFixed(0)}, chart ${chart.width.toFixed(0)} px`);
      assert.ok(body.width > 1000, `the panel is wide (${body.width} px)`);
      assert.ok(chart.y >= heading.y + heading.height - 1, "the chart starts below its heading");
      assert.ok(chart.width > 0.5 * body.width, `the chart uses the panel's width (${chart.width} of ${body.width} px)`);
      await view.locator("#partition").scrollIntoViewIfNeeded();
      await session.shot("wide-panel-partition");
    }));

  it("editing the model after the report makes the verdict stale", () =>
    session.step("stale", async () => {
      await editModel();
      const view = await showPanel("stale");
      assert.match(await view.locator("#stale").innerText(), /helper_model\.py changed after this run/);
      await session.shot("stale");
    }));

  it("saveBeforeValidate always (the default): the dirty model is saved, then validated", () =>
    session.step("save-always", async () => {
      const comment = `# e2e edit ${edits}`;
      assert.ok(!onDisk().includes(comment), "the edit is not on disk yet");
      await validate("helper_model");
      await session.waitForStatus(new RegExp(`helper_model: ${FIX}`), VALIDATION_TIMEOUT);
      assert.ok(onDisk().includes(comment), "validating saved the model first");
      assert.equal(await session.page.locator('.tabs-container .tab.dirty[aria-label*="helper_model.py"]').count(), 0);
      const view = await showPanel(FIX);
      assert.equal(await view.locator("#unsaved").count(), 0);
      await session.shot("saved-then-validated");
    }));

  it("saveBeforeValidate prompt: asks, and Save and validate saves", () =>
    session.step("save-prompt", async () => {
      await setUserSetting("distcheck.saveBeforeValidate", "prompt");
      const comment = await editModel();
      await validate("helper_model");
      const dialog = session.page.locator(".monaco-dialog-box");
      await dialog.waitFor({ timeout: 30_000 });
      assert.match(await dialog.innerText(), /validates the files on disk: helper_model\.py has unsaved changes/);
      await session.shot("prompt");
      await dialog.locator(".monaco-button", { hasText: "Save and validate" }).click();
      // saving marks the last verdict stale, then the run starts: only then wait for its verdict
      await session.waitForStatus(/helper_model: stale|Distcheck helper_model/, 30_000);
      await session.waitForStatus(new RegExp(`helper_model: ${FIX}`), VALIDATION_TIMEOUT);
      assert.ok(onDisk().includes(comment), "Save and validate saved the model");
    }));

  it("saveBeforeValidate never: the disk is validated and the panel names the unsaved file", () =>
    session.step("save-never", async () => {
      await setUserSetting("distcheck.saveBeforeValidate", "never");
      const comment = await editModel();
      await validate("helper_model");
      await session.waitForStatus(new RegExp(`helper_model: ${FIX}`), VALIDATION_TIMEOUT);
      assert.ok(!onDisk().includes(comment), "never: the model was not saved");
      const view = await showPanel(FIX);
      const unsaved = view.locator("#unsaved");
      await unsaved.waitFor({ timeout: 20_000 });
      assert.match(await unsaved.innerText(), /unsaved edits in helper_model\.py were not validated/);
      await session.shot("never-unsaved-named");
    }));

  it("a cancelled validation is cancelled in the status item and on the panel, which offers Validate again", () =>
    session.step("cancelled", async () => {
      await validate("slow");
      await session.waitForStatus(/Distcheck slow/, 60_000);
      await sleep(2000);
      await session.palette("Distcheck: Cancel validation");
      const status = await session.waitForStatus(/slow: cancelled/, 30_000);
      assert.doesNotMatch(status, /✓|✗|fix available/);
      const view = await showPanel("cancelled");
      assert.equal((await view.locator("#verdict").innerText()).trim(), "⊘ cancelled — validate again");
      assert.match(await view.locator("#cancelled").innerText(), /The last validation of slow was cancelled/);
      const again = view.locator(".actions button", { hasText: "Validate again" });
      await again.waitFor();
      await session.shot("cancelled");
      // its Validate again starts the target again (then cancelled once more, to leave nothing running)
      await again.click();
      await session.waitForStatus(/Distcheck slow/, 60_000);
      await session.palette("Distcheck: Cancel validation");
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
