/**
 * One diagnostic per spec mistake, in a real VS Code with the real daemon: while the distcheck server
 * runs, a spec file with two mistakes shows exactly two diagnostics, both the daemon's `spec-invalid`
 * (the JSON language service's schema is hints-only then, `extension/src/specSchema.ts`), and the JSON
 * service still completes enum values from the schema. When the server cannot run (an interpreter that
 * does not exist), the JSON service checks the file against the full schema again; once the server is
 * back, its diagnostics are the only ones again.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { PYTHON, Session, sleep } from "./harness";

const SPEC = "two_mistakes.distspec.json";
// line 4: a string for a boolean; line 5: an unknown field; line 8 (the policy kind) is valid
const TEXT = `{
  "format": "distcheck-spec",
  "version": 1,
  "system_reductions": "yes",
  "not_a_field": 1,
  "distribution": {
    "policy": {
      "kind": "halo"
    }
  }
}
`;

/**
 * The spec file's diagnostics in the Problems panel (their aria-label and text). The panel's rows are a
 * tree: a row per file ("2 problems in file X of folder ."), then a row per diagnostic, whose aria-label
 * starts with its severity, each followed by a row per related-information entry ("What to do: ...").
 * Only the diagnostic rows under the spec file's row count.
 */
async function specRows(session: Session): Promise<string[]> {
  const out: string[] = [];
  let inSpec = false;
  for (const row of await session.problems()) {
    const file = /^\d+ problems? in file (.+?) of folder /.exec(row);
    if (file) {
      inSpec = path.basename(file[1] ?? "") === SPEC;
    } else if (inSpec && /^(Error|Warning|Info|Hint): /.test(row)) {
      out.push(row);
    }
  }
  return out;
}

const fromDistcheck = (row: string): boolean => /spec-invalid/.test(row) && /distcheck/i.test(row);

describe("schema dupes: a spec's mistakes show once while the server runs", { timeout: 900_000 }, () => {
  const session = new Session({
    name: "schema_dupes",
    prepareWorkspace: (ws) => fs.writeFileSync(path.join(ws, SPEC), TEXT),
  });

  before(() => session.startWithDaemon());

  after(async () => {
    await session.close();
  });

  /** Polls the Problems rows until `done` holds for the same rows twice in a row, or `timeoutMs` passes. */
  async function rowsUntil(done: (rows: string[]) => boolean, timeoutMs: number): Promise<string[]> {
    const deadline = Date.now() + timeoutMs;
    let rows: string[] = [];
    let held = 0;
    while (Date.now() < deadline) {
      rows = await specRows(session);
      held = done(rows) ? held + 1 : 0;
      if (held >= 2) {
        return rows;
      }
      await sleep(1500);
    }
    return rows;
  }

  const onlyDistcheckTwo = (rows: string[]): boolean => rows.length === 2 && rows.every(fromDistcheck);

  /** Brings the spec to the front: Quick Open, else its Explorer row (Quick Open's keys can land in an editor that is closing). */
  async function openSpec(): Promise<void> {
    const tab = session.page.locator(`.tabs-container .tab.active[aria-label*="${SPEC}"]`).first();
    for (let i = 0; i < 3; i++) {
      try {
        await session.quickOpen(SPEC);
      } catch {
        session.log(`Quick Open did not bring ${SPEC} up; its Explorer row`);
        await session.page.locator(".explorer-folders-view .monaco-list-row", { hasText: SPEC }).first().click();
      }
      if (await tab.waitFor({ timeout: 5000 }).then(() => true, () => false)) {
        return;
      }
    }
    await tab.waitFor({ timeout: 5000 });
  }

  /**
   * Sets a User setting the way a user does (Session.setSetting), with every editor closed first (it
   * types into the first editor on the page, which must be settings.json), then the spec in front again.
   */
  async function setUserSetting(key: string, value: unknown): Promise<void> {
    await session.palette("View: Close All Editors");
    await sleep(1000);
    await session.setSetting("user", key, value);
    await openSpec();
  }

  it("two mistakes, two diagnostics, both distcheck's spec-invalid", () =>
    session.step("two-diagnostics", async () => {
      await openSpec();
      const rows = await rowsUntil(onlyDistcheckTwo, 120_000);
      session.log(`problems:\n${rows.join("\n")}`);
      assert.equal(rows.length, 2, `one diagnostic per mistake:\n${rows.join("\n")}`);
      assert.ok(rows.every(fromDistcheck), `all from distcheck (spec-invalid), none from the JSON service:\n${rows.join("\n")}`);
      assert.ok(rows.some((r) => r.includes("system_reductions")) && rows.some((r) => r.includes("not_a_field")), rows.join("\n"));
      await session.shot("one-diagnostic-per-mistake");
    }));

  it("the JSON service still suggests the schema's enum values", () =>
    session.step("completion", async () => {
      await session.page.locator(".editor-instance .monaco-editor").first().click();
      await session.palette("Go to Line/Column...");
      const input = session.page.locator(".quick-input-widget .quick-input-box input");
      await input.fill(":8:16"); // inside "halo"
      await session.page.keyboard.press("Enter");
      await sleep(500);
      await session.page.keyboard.press("Control+Space");
      const suggestions = session.page.locator(".editor-widget.suggest-widget .monaco-list-row");
      await suggestions.first().waitFor({ timeout: 30_000 });
      await sleep(800);
      const labels = await suggestions.allInnerTexts();
      session.log(`suggestions at policy.kind: ${labels.join(" | ")}`);
      await session.shot("enum-suggestions");
      await session.page.keyboard.press("Escape");
      assert.ok(labels.some((l) => l.includes("replicated")), labels.join(" | "));
      assert.ok(labels.some((l) => l.includes("halo")), labels.join(" | "));
    }));

  it("with no usable interpreter the full schema checks the file, and the server takes over again", () =>
    session.step("fallback", async () => {
      await setUserSetting("distcheck.interpreter", path.join(session.tmp, "no-such-python"));
      const fallback = await rowsUntil((rows) => rows.length >= 2 && !rows.some(fromDistcheck), 120_000);
      session.log(`problems without the server:\n${fallback.join("\n")}`);
      assert.ok(fallback.length >= 2 && !fallback.some(fromDistcheck), `the JSON service's own checks:\n${fallback.join("\n")}`);
      assert.ok(fallback.some((r) => /boolean/i.test(r)), fallback.join("\n"));
      assert.ok(fallback.some((r) => /not_a_field|not allowed/i.test(r)), fallback.join("\n"));
      await session.shot("full-schema-without-server");

      await setUserSetting("distcheck.interpreter", PYTHON);
      const back = await rowsUntil(onlyDistcheckTwo, 120_000);
      session.log(`problems with the server back:\n${back.join("\n")}`);
      assert.ok(onlyDistcheckTwo(back), `once the server runs again, only its diagnostics:\n${back.join("\n")}`);
      await session.shot("server-back");
    }));
});
