/**
 * Smoke test in a real VS Code: the extension activates on the examples workspace, its commands are in
 * the palette, the status bar item and the output channel exist, the server start-up path is right
 * (started, or — without the daemon — the "not importable" notification with its two buttons), and the
 * report panel renders a real report inside its webview, opens files from it and comes back after a
 * window reload (serializer + getState/setState). Needs no daemon.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { PYTHON, ROOT, Session, daemonStatus, sleep } from "./harness";

const REPORT_FILE = "helper_model.distcheck-report.json";
const FIXTURE = path.join(ROOT, "tests", "extension", "fixtures", "helper_model_failed.json");

describe("smoke: the extension in code-server", { timeout: 600_000 }, () => {
  const session = new Session({
    name: "smoke",
    // start with an interpreter that does not exist: the set-up notification must say so (no crash loop)
    settings: { "distcheck.interpreter": "/nonexistent/bin/python" },
    prepareWorkspace: (ws) => {
      // a real report (written by validate_on_cpu), its paths pointed at this workspace copy
      const text = fs
        .readFileSync(FIXTURE, "utf8")
        .replaceAll("/work/main/examples", ws);
      fs.writeFileSync(path.join(ws, REPORT_FILE), text);
    },
  });

  before(async () => {
    const daemon = daemonStatus();
    session.log(`daemon: ${daemon.present ? "present" : "absent"}, ${daemon.importable ? "importable" : `not importable (${daemon.detail})`}`);
    await session.start();
  });

  after(async () => {
    await session.close();
  });

  it("activates; a missing interpreter gives one notification with Open setting / Show install command", () =>
    session.step("activation", async () => {
      await session.statusItem().waitFor({ timeout: 60_000 });
      const toast = session.toasts().filter({ hasText: "no Python interpreter at" }).first();
      await toast.waitFor({ timeout: 60_000 });
      assert.match(await toast.innerText(), /“\/nonexistent\/bin\/python” \(the distcheck\.interpreter setting\)/);
      await toast.locator(".monaco-button", { hasText: "Open setting" }).waitFor();
      await toast.locator(".monaco-button", { hasText: "Show install command" }).waitFor();
      assert.match((await session.statusItem().getAttribute("aria-label")) ?? "", /Distcheck/);
      await session.shot("missing-interpreter");
      await toast.hover();
      await toast.locator(".monaco-button", { hasText: "Show install command" }).click();
      await session.toasts().filter({ hasText: "-m pip install --upgrade" }).first().waitFor();
      await session.shot("install-command");
      await sleep(3000);
      assert.equal(await session.toasts().filter({ hasText: "no Python interpreter at" }).count(), 0, "no second notification (no restart loop)");
    }));

  it("Distcheck: Show output opens the Distcheck channel with the client's log", () =>
    session.step("show-output", async () => {
      await session.palette("Distcheck: Show output");
      await session.page.locator(".part.panel .monaco-editor .view-lines").first().waitFor();
      const lines = await session.outputLines("[info]");
      assert.match(lines, /\[info\] activated \(workspace trusted\)/);
      assert.match(lines, /interpreter \/nonexistent\/bin\/python \(from the distcheck\.interpreter setting/);
      await session.shot("output-channel");
    }));

  it("changing distcheck.interpreter restarts the server with the new interpreter", () =>
    session.step("interpreter-change", async () => {
      await session.setSetting("remote", "distcheck.interpreter", PYTHON);
      const deadline = Date.now() + 30_000;
      let lines = "";
      while (Date.now() < deadline) {
        lines = await session.outputLines("interpreter");
        if (lines.includes(`interpreter ${PYTHON} (from the distcheck.interpreter setting`)) {
          break;
        }
        await sleep(1000);
      }
      assert.match(lines, /distcheck\.interpreter changed \(now .*\): restarting the server/);
      assert.ok(lines.includes(`interpreter ${PYTHON} (from the distcheck.interpreter setting`), lines);
      await session.shot("interpreter-changed");
    }));

  it("every command is in the palette under the Distcheck category", () =>
    session.step("palette", async () => {
      await session.page.keyboard.press("Escape");
      await session.page.keyboard.press("F1");
      const input = session.page.locator(".quick-input-widget .quick-input-box input");
      await input.fill(">Distcheck: ");
      await sleep(800);
      const text = (await session.page.locator(".quick-input-widget .quick-input-list .monaco-list-row").allInnerTexts()).join("\n");
      for (const title of ["Validate distribution", "Show report", "Save validated spec", "Restart server", "Show output"]) {
        assert.ok(text.includes(`Distcheck: ${title}`), `missing "Distcheck: ${title}" in\n${text}`);
      }
      await session.shot("palette");
      await session.page.keyboard.press("Escape");
    }));

  it("Show report renders a real report in the webview", () =>
    session.step("report-panel", async () => {
      await session.quickOpen(REPORT_FILE);
      await session.palette("Distcheck: Show report");
      const view = session.webview();
      await view.locator("#verdict").waitFor({ timeout: 30_000 });
      assert.equal((await view.locator("#verdict").innerText()).trim(), "✗ failed");
      // the headline is the report's own next_action (first line), whatever the engine that wrote it said
      const fixture = JSON.parse(fs.readFileSync(FIXTURE, "utf8")) as { next_action: string };
      assert.equal((await view.locator("#headline").innerText()).trim(), fixture.next_action.split("\n")[0]);
      assert.equal(await view.locator("table.attempts tbody tr").count(), 1);
      assert.equal(await view.locator("svg.diff-chart rect.bar.bad").count(), 6);
      assert.equal(await view.locator("svg.partition-chart rect.seg").count(), 6);
      await view.locator("button", { hasText: "Validate again" }).waitFor();
      await view.locator("button", { hasText: "Export report JSON" }).waitFor();
      // no attempt passed, so there is no proven spec to apply
      assert.equal(await view.locator("button", { hasText: "Apply best spec" }).count(), 0);
      await session.shot("report-panel");
    }));

  it("the per-atom |Δ| charts and the per-module divergence chart render from the report's data", () =>
    session.step("charts", async () => {
      const view = await session.reportShows("failed");
      const fixture = JSON.parse(fs.readFileSync(FIXTURE, "utf8")) as {
        attempts: {
          atom_errors: { output: string; worst: unknown[]; ranks: unknown[]; halo_width: number | null }[];
          layer_divergence: { modules: unknown[] };
        }[];
      };
      const shown = fixture.attempts.at(-1);
      assert.ok(shown, "the fixture has an attempt");
      const charts = view.locator("#atom-errors figure.atom-chart");
      assert.equal(await charts.count(), shown.atom_errors.length);
      for (const [i, record] of shown.atom_errors.entries()) {
        const chart = charts.nth(i);
        assert.match(await chart.locator("svg.atom-plot").getAttribute("aria-label") ?? "", new RegExp(record.output));
        assert.equal(await chart.locator("circle.atom").count(), record.worst.length);
        assert.equal(await chart.locator("rect.owned").count(), record.ranks.length);
        // two ranks with halos: each slab has a halo band on its inner side, both drawn
        assert.ok((await chart.locator("rect.halo").count()) >= record.ranks.length, "halo bands are drawn");
        const box = await chart.locator("svg.atom-plot").boundingBox();
        assert.ok(box && box.width > 100 && box.height > 50, `the plot has a size on the page (${JSON.stringify(box)})`);
      }
      // worst atoms read as "atom N, component x|y|z"
      assert.match((await charts.first().locator("circle.atom title").first().textContent()) ?? "", /^atom \d+, component [xyz]: /);
      await session.shotOf(charts.first(), "atom-error-chart");
      const modules = view.locator("figure.module-chart");
      await modules.waitFor();
      assert.equal(await modules.locator("rect.module").count(), shown.layer_divergence.modules.length);
      await session.shotOf(modules, "module-divergence-chart");
    }));

  it("links in the report open files (helper source, Go to module)", () =>
    session.step("report-links", async () => {
      const view = await session.reportShows("failed");
      await view.locator("a", { hasText: "nbops.py:34" }).click();
      await session.page.locator('.tabs-container .tab[aria-label*="nbops.py"]').first().waitFor();
      await session.shot("opened-helper-source");
      await view.locator("a", { hasText: "Go to module" }).click();
      await session.page.locator('.tabs-container .tab[aria-label*="helper_readout.py"]').first().waitFor();
      await session.shot("go-to-module");
    }));

  it("the report panel is restored after a window reload", () =>
    session.step("restore", async () => {
      await session.reload();
      const view = session.webview();
      await view.locator("#verdict").waitFor({ timeout: 60_000 });
      assert.equal((await view.locator("#verdict").innerText()).trim(), "✗ failed");
      await session.shot("restored-after-reload");
    }));
});
