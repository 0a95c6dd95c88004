/**
 * Restricted Mode: in an untrusted workspace validation (which runs the workspace's code) is refused
 * with an explanation and a way to manage trust, while spec files are still checked (JSON schema from
 * the `jsonValidation` contribution).
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { Session, sleep } from "./harness";
import { addShadowFiles, markers } from "./shadow";

describe("restricted mode: an untrusted workspace", { timeout: 600_000 }, () => {
  const session = new Session({
    name: "restricted",
    trustPrompt: true,
    prepareWorkspace: (ws) => {
      addShadowFiles(ws);
      fs.writeFileSync(
        path.join(ws, "broken.distspec.json"),
        `${JSON.stringify({ format: "distcheck-spec", version: 1, system_reductions: "yes", not_a_field: 1 }, null, 2)}\n`,
      );
    },
  });

  before(async () => {
    await session.start();
  });

  after(async () => {
    await session.close();
  });

  it("the workspace opens in Restricted Mode", () =>
    session.step("trust-prompt", async () => {
      const dialog = session.page.locator(".monaco-dialog-box");
      await dialog.waitFor({ timeout: 60_000 });
      await session.shot("trust-prompt");
      await dialog.locator(".monaco-button", { hasText: /No, I don.t trust/ }).click();
      await session.page.locator(".explorer-folders-view .monaco-list-row").first().waitFor({ timeout: 60_000 });
      await session.statusItem().waitFor({ timeout: 60_000 });
      await sleep(1000);
    }));

  it("Validate distribution explains why it is disabled and offers to manage trust", () =>
    session.step("validate-refused", async () => {
      await session.palette("Distcheck: Validate distribution");
      const toast = session.toasts().filter({ hasText: "Restricted Mode" }).first();
      await toast.waitFor({ timeout: 30_000 });
      assert.match(await toast.innerText(), /imports and runs this workspace's model and sample code/);
      await toast.locator(".monaco-button", { hasText: "Manage Workspace Trust" }).waitFor();
      await session.shot("validate-refused");
      await session.palette("Distcheck: Save validated spec");
      await sleep(500);
      assert.ok((await session.toasts().filter({ hasText: "Restricted Mode" }).count()) >= 1);
    }));

  it("spec files are still checked", () =>
    session.step("spec-diagnostics", async () => {
      await session.quickOpen("broken.distspec.json");
      const deadline = Date.now() + 30_000;
      let text = "";
      while (Date.now() < deadline) {
        text = (await session.problems()).join("\n");
        if (/not_a_field|not allowed/i.test(text) && /system_reductions|boolean/i.test(text)) {
          break;
        }
        await sleep(1000);
      }
      session.log(`problems:\n${text}`);
      assert.match(text, /not_a_field|not allowed/i);
      assert.match(text, /boolean/i);
      await session.shot("spec-diagnostics");
    }));

  it("nothing of the workspace ran: no json.py, torch.py, distcheck.py, build backend or model", () =>
    session.step("no-markers", async () => {
      await session.quickOpen("marked_model.py");
      await sleep(3000);
      assert.deepEqual(markers(session.workspace), []);
    }));
});
