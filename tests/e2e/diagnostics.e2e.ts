/**
 * Diagnostics in a real VS Code with the real daemon (issue 35.6): validating `helper_model` puts its
 * diagnostics on its own files only (never on the model file of another target that calls the same
 * helper), and each diagnostic's code links the page shipped with the installed extension
 * (`extension/media/diagnostics/<code>.md`, the extension host's file), which opens in an editor.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { Session, sleep } from "./harness";

const VALIDATION_TIMEOUT = 300_000; // the first run starts the runner, which imports torch
const OTHER = "other_model.py";

/** Another target whose model file calls the helper `helper_model` is flagged for. */
const OTHER_SOURCE = [
  '"""Another target: it calls the same TorchScript helper as helper_model."""',
  "from examples.thirdparty.nbops import mol_sum",
  "",
  "",
  "def readout(x, idx):",
  "    return mol_sum(x, idx, 2)",
  "",
  "",
  "def model_factory():",
  "    raise NotImplementedError",
  "",
  "",
  "def sample_batch():",
  "    raise NotImplementedError",
  "",
].join("\n");

describe("diagnostics: a target's own files, and documentation shipped with the extension", { timeout: 900_000 }, () => {
  const session = new Session({
    name: "diagnostics",
    settings: { "distcheck.autoFix": false },
    prepareWorkspace: (ws) => {
      fs.writeFileSync(path.join(ws, OTHER), OTHER_SOURCE);
      fs.appendFileSync(
        path.join(ws, "pyproject.toml"),
        `\n[[tool.distcheck.targets]]\nname = "other"\nfactory = "${OTHER}:model_factory"\nsample = "${OTHER}:sample_batch"\n`,
      );
    },
  });

  before(() => session.startWithDaemon());

  after(async () => {
    await session.close();
  });

  it("helper_model's diagnostics are on its files, none on the other target's model file", () =>
    session.step("own-files", async () => {
      await session.waitForStatus(/Distcheck/, 60_000);
      await session.palette("Distcheck: Validate distribution");
      await session.quickPick("helper_model");
      await session.waitForStatus(/✗ helper_model/, VALIDATION_TIMEOUT);
      await session.problems();
      // only the helper's rows (its definition and every call the workspace scan finds), each file's header above them
      const filter = session.page.locator('.part.panel input[placeholder^="Filter"]').first();
      await filter.fill("undeclared-helper");
      await sleep(1500);
      const rows = await session.page.locator(".markers-panel .monaco-list-row").allInnerTexts();
      session.log(`undeclared-helper rows: ${rows.map((r) => r.replace(/\s+/g, " ")).join(" || ")}`);
      assert.ok(rows.some((r) => /undeclared-helper/.test(r)), rows.join("\n"));
      assert.ok(rows.some((r) => r.includes("helper_readout.py")), `a call outside any target's files keeps its diagnostic:\n${rows.join("\n")}`);
      assert.ok(!rows.some((r) => r.includes(OTHER)), `another target's file got diagnostics:\n${rows.join("\n")}`);
      await session.shot("problems");
    }));

  it("each code links its page in the installed extension, and the link opens it", () =>
    session.step("code-links", async () => {
      const links = session.page.locator(".markers-panel a:has(.marker-code)");
      await links.first().waitFor({ timeout: 10_000 });
      const found = new Set<string>();
      for (const l of await links.all()) {
        found.add((await l.getAttribute("href")) ?? "");
      }
      const hrefs = [...found];
      session.log(`code links: ${hrefs.join(" ")}`);
      assert.ok(hrefs.length > 0);
      const installed = fs.realpathSync(session.extensions);
      for (const href of hrefs) {
        // the extension host's own file: file:// in a desktop VS Code, vscode-remote:// in code-server
        const m = /^(?:file|vscode-remote):\/\/[^/]*(\/.*\/extension\/media\/diagnostics\/[a-z-]+\.md)$/.exec(href);
        assert.ok(m?.[1], href);
        const file = decodeURIComponent(m[1]);
        assert.ok(fs.existsSync(file), `${file} is not installed`);
        assert.ok(fs.realpathSync(file).startsWith(installed), `${file} is not the installed extension's`);
      }
      const link = links.filter({ hasText: "undeclared-helper" }).first();
      await link.click();
      await sleep(1000);
      await session.page.locator('.tabs-container .tab[aria-label*="undeclared-helper.md"]').first().waitFor({ timeout: 15_000 });
      await session.shot("page-opened");
    }));
});
