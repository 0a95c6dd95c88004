/**
 * Errors at the user's line, in a real VS Code with the real daemon: a model file that validated once
 * and then stops parsing puts its one diagnostic on the SyntaxError's own line of that file (never on
 * `<frozen importlib._bootstrap>`), which says what that line raised; the status item says the run
 * ended in an error, and the report panel shows that error instead of keeping the previous report.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { Session } from "./harness";

const VALIDATION_TIMEOUT = 300_000; // the first run starts the runner, which imports torch
const MODEL = "typo_model.py";

/** The model file: valid as written; `broken` puts a SyntaxError on line `BROKEN_LINE` (1-based). */
function modelSource(broken: boolean): string {
  return [
    '"""A pair potential the test breaks after its first validation."""',
    "from examples import pair_potential",
    "",
    "",
    "def model_factory():",
    broken ? "    return pair_potential.PairPotential(.double()" : "    return pair_potential.PairPotential().double()",
    "",
    "",
    "sample_batch = pair_potential.sample_batch",
    "",
  ].join("\n");
}
const BROKEN_LINE = 6;

describe("errors: a SyntaxError in the model file is shown at its own line", { timeout: 900_000 }, () => {
  const session = new Session({
    name: "errors",
    prepareWorkspace: (ws) => {
      fs.writeFileSync(path.join(ws, MODEL), modelSource(false));
      fs.appendFileSync(
        path.join(ws, "pyproject.toml"),
        `\n[[tool.distcheck.targets]]\nname = "typo"\nfactory = "${MODEL}:model_factory"\nsample = "${MODEL}:sample_batch"\n`,
      );
    },
  });

  before(() => session.startWithDaemon());

  after(async () => {
    await session.close();
  });

  it("the model validates while it parses", () =>
    session.step("valid", async () => {
      await session.waitForStatus(/Distcheck/, 60_000);
      await session.palette("Distcheck: Validate distribution");
      await session.quickPick("typo");
      await session.waitForStatus(/✓ typo/, VALIDATION_TIMEOUT);
      await session.palette("Distcheck: Show report");
      await session.reportShows("passed");
    }));

  it("a SyntaxError: one diagnostic on its line of the model file, and the panel shows the error", () =>
    session.step("syntax-error", async () => {
      fs.writeFileSync(path.join(session.workspace, MODEL), modelSource(true));
      // the edit marks the shown report stale (status item and panel) first: once that has happened the
      // panel's update can no longer take the focus from the target picker opened next
      await session.waitForStatus(/typo: stale/, 20_000);
      await session.palette("Distcheck: Validate distribution");
      await session.quickPick("typo");
      await session.waitForStatus(/✗ typo: error/, VALIDATION_TIMEOUT);
      // top-level rows only (a diagnostic's related locations are rows under it)
      const rows = (await session.problems()).filter((r) => /^Error: /.test(r) && /SyntaxError/.test(r));
      // it says what the line raised, not which factory was being imported
      assert.match(rows[0] ?? "", /^Error: SyntaxError: invalid syntax \(typo_model\.py, line 6\)/);
      session.log(`problems: ${rows.join(" || ")}`);
      assert.equal(rows.length, 1, rows.join("\n"));
      const row = rows[0] ?? "";
      assert.doesNotMatch(row, /frozen|importlib/);
      // the Problems row sits under its file and reads "[Ln 6, Col …]"
      assert.match(row, new RegExp(`\\[Ln ${BROKEN_LINE}, Col \\d+\\]`), row);
      await session.page.locator(".markers-panel .monaco-list-row", { hasText: MODEL }).first().waitFor({ timeout: 5000 });
      await session.shot("syntax-error-problems");
      // opening it goes to the broken line of the model file
      await session.page.locator(".markers-panel .monaco-list-row", { hasText: /SyntaxError/ }).first().dblclick();
      await session.page.locator(`.tabs-container .tab.active[aria-label*="${MODEL}"]`).first().waitFor({ timeout: 10_000 });
      await session.page.locator(".statusbar-item", { hasText: new RegExp(`Ln ${BROKEN_LINE}, Col`) }).first().waitFor({ timeout: 10_000 });
      await session.palette("Distcheck: Show report");
      const view = await session.reportShows("error");
      assert.match(await view.locator("main").innerText(), /SyntaxError/);
      await session.shot("syntax-error-panel");
    }));
});
