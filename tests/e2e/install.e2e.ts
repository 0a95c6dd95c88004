/**
 * First run in a real VS Code: the interpreter runs but has no distcheck. The set-up notification offers
 * "Install distcheck"; it installs the wheel the .vsix ships into that interpreter (pip, offline: the
 * interpreter already has distcheck's dependencies, and PIP_NO_INDEX keeps pip off the network), the
 * server starts, and the walkthrough ticks "Pick the interpreter" and "Install distcheck" and nothing that
 * has not happened yet ("Validate an example", "Apply a fix").
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { PYTHON, Session, sleep } from "./harness";

/**
 * A virtual environment with the .venv's packages but not distcheck: `--without-pip` (the .venv's pip is
 * on its path, as is everything else but distcheck, through a folder of links and a .pth file).
 */
function venvWithoutDistcheck(root: string): string {
  const venv = path.join(root, "venv");
  const made = spawnSync(PYTHON, ["-m", "venv", "--without-pip", venv], { encoding: "utf8" });
  assert.equal(made.status, 0, made.stderr);
  const sites = spawnSync(PYTHON, ["-c", "import site, sysconfig; print(sysconfig.get_paths()['purelib']); print('\\n'.join(site.getsitepackages()))"], {
    encoding: "utf8",
  });
  const [own, ...all] = sites.stdout.trim().split("\n");
  const links = path.join(root, "deps");
  fs.mkdirSync(links);
  for (const entry of fs.readdirSync(own as string)) {
    if (!/^(_*editable_*|distcheck)/.test(entry)) {
      fs.symlinkSync(path.join(own as string, entry), path.join(links, entry));
    }
  }
  const python = path.join(venv, "bin", "python");
  const purelib = spawnSync(python, ["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], { encoding: "utf8" }).stdout.trim();
  fs.writeFileSync(path.join(purelib, "deps.pth"), [links, ...all.filter((p) => p !== own)].join("\n") + "\n");
  const check = spawnSync(python, ["-c", "import distcheck"], { encoding: "utf8" });
  assert.notEqual(check.status, 0, "the test interpreter must start without distcheck");
  return python;
}

describe("install: the walkthrough's install step installs the bundled wheel", { timeout: 600_000 }, () => {
  let python = "";
  const session = new Session({
    name: "install",
    prepareWorkspace: () => undefined,
  });

  before(async () => {
    python = venvWithoutDistcheck(session.tmp);
    session.options.settings = { "distcheck.interpreter": python };
    process.env["PIP_NO_INDEX"] = "1"; // code-server, its extension host and pip inherit it
    await session.start();
  });

  after(async () => {
    delete process.env["PIP_NO_INDEX"];
    await session.close();
  });

  it("the set-up notification installs distcheck, and the server starts", () =>
    session.step("install", async () => {
      const toast = session.toasts().filter({ hasText: "distcheck is not importable" }).first();
      await toast.waitFor({ timeout: 90_000 });
      await session.shot("not-importable");
      await toast.hover();
      await toast.locator(".monaco-button", { hasText: "Install distcheck" }).click();
      await session.palette("Distcheck: Show output");
      await session.page.locator(".part.panel .monaco-editor .view-lines").first().waitFor();
      const deadline = Date.now() + 180_000;
      let started = "";
      while (Date.now() < deadline && !started.includes("server started")) {
        await sleep(1000);
        started = await session.outputLines("server started");
      }
      assert.match(started, /server started/, "the server starts once distcheck is installed");
      assert.match(await session.outputLines("installed distcheck into"), /installed distcheck into /);
      const installed = spawnSync(python, ["-c", "import distcheck, sys; print(distcheck.__file__)"], { encoding: "utf8" });
      assert.equal(installed.status, 0, installed.stderr);
      assert.ok(installed.stdout.includes(path.join(session.tmp, "venv")), `installed into the chosen interpreter: ${installed.stdout}`);
      await session.shot("installed");
    }));

  it("the walkthrough ticks the steps that succeeded, and only those", () =>
    session.step("walkthrough", async () => {
      await session.palette("Welcome: Open Walkthrough...");
      await session.quickPick("Get started with Distcheck");
      const page = session.page.locator(".gettingStartedContainer");
      await page.waitFor({ timeout: 30_000 });
      const step = (title: string) => page.locator(".getting-started-step", { hasText: title }).first();
      for (const title of ["Pick the interpreter", "Install distcheck"]) {
        await step(title).waitFor({ timeout: 30_000 });
        await page.locator('.getting-started-step[aria-checked="true"]', { hasText: title }).first().waitFor({ timeout: 30_000 });
      }
      for (const title of ["Validate an example", "Apply a fix"]) {
        assert.equal(await page.locator('.getting-started-step[aria-checked="true"]', { hasText: title }).count(), 0, `${title} has not happened`);
      }
      await session.shot("walkthrough-ticked");
    }));
});
