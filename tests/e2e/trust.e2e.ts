/**
 * Workspace trust with a hostile workspace (`shadow.ts`): after the user trusts it, nothing of it runs
 * while the extension and its server start and the user browses; a validation, once asked for, imports
 * the target's own module and nothing that merely shadows `json`, `torch` or `distcheck`.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Session, sleep } from "./harness";
import { addShadowFiles, markers } from "./shadow";

describe("trust: a trusted workspace runs only what a validation asks for", { timeout: 600_000 }, () => {
  const session = new Session({ name: "trust", trustPrompt: true, prepareWorkspace: addShadowFiles });

  before(() => session.startWithDaemon());

  after(async () => {
    await session.close();
  });

  it("trusting the workspace starts the extension and its server without running workspace code", () =>
    session.step("trusted-idle", async () => {
      const dialog = session.page.locator(".monaco-dialog-box");
      await dialog.waitFor({ timeout: 60_000 });
      await dialog.locator(".monaco-button", { hasText: /Yes, I trust/ }).click();
      await session.page.locator(".explorer-folders-view .monaco-list-row").first().waitFor({ timeout: 60_000 });
      await session.waitForStatus(/Distcheck/, 60_000);
      await session.quickOpen("marked_model.py");
      await session.quickOpen("pyproject.toml");
      await sleep(8000); // the server has started, read the config, placed its CodeLens
      await session.shot("trusted-idle");
      assert.deepEqual(markers(session.workspace), [], "no workspace code may run before a validation is asked for");
    }));

  it("a validation imports the factory's own module and nothing that shadows json, torch or distcheck", () =>
    session.step("validated", async () => {
      await session.palette("Distcheck: Validate distribution");
      await session.quickPick("marked");
      await session.reportShows("passed", 240_000);
      await session.shot("validated");
      const found = markers(session.workspace);
      session.log(`markers: ${found.join(", ")}`);
      assert.ok(found.length > 0, "the factory's module was imported");
      assert.deepEqual(
        found.filter((m) => !m.startsWith("model.")),
        [],
        "only the factory's own module may run",
      );
    }));
});
