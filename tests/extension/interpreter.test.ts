import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";

import {
  RestartBudget,
  describeSource,
  expandSetting,
  interpretProbe,
  resolveInterpreter,
  settingFromLayers,
} from "../../extension/src/interpreter";

describe("interpreter resolution order", () => {
  it("the distcheck.interpreter setting wins", async () => {
    let asked = false;
    const got = await resolveInterpreter({
      setting: "/opt/venv/bin/python",
      pythonExtension: () => {
        asked = true;
        return Promise.resolve("/from/extension/python");
      },
    });
    assert.deepEqual(got, { command: "/opt/venv/bin/python", source: "setting" });
    assert.equal(asked, false, "the Python extension is not consulted when the setting is set");
  });

  it("then the Python extension's active interpreter", async () => {
    const got = await resolveInterpreter({ setting: "  ", pythonExtension: () => Promise.resolve("/from/extension/python") });
    assert.deepEqual(got, { command: "/from/extension/python", source: "python-extension" });
  });

  it("then python3 (no extension, no interpreter, or an extension that fails)", async () => {
    const expected = { command: "python3", source: "default" };
    assert.deepEqual(await resolveInterpreter({ setting: "" }), expected);
    assert.deepEqual(await resolveInterpreter({ setting: undefined, pythonExtension: () => Promise.resolve(undefined) }), expected);
    assert.deepEqual(await resolveInterpreter({ setting: "", pythonExtension: () => Promise.reject(new Error("boom")) }), expected);
  });

  it("expands ${workspaceFolder} and ~", async () => {
    assert.equal(expandSetting("${workspaceFolder}/.venv/bin/python", "/ws", "/home/me"), "/ws/.venv/bin/python");
    assert.equal(expandSetting("~/venv/bin/python", "/ws", "/home/me"), "/home/me/venv/bin/python");
    assert.equal(expandSetting("~user/python", "/ws", "/home/me"), "~user/python");
    const got = await resolveInterpreter({ setting: "${workspaceFolder}/py", workspaceFolder: "/w" });
    assert.deepEqual(got, { command: "/w/py", source: "setting" });
  });
});

describe("import check", () => {
  const py = { command: "/x/python", source: "setting" } as const;

  it("passes on exit code 0", () => {
    assert.deepEqual(interpretProbe(py, { code: 0, stderr: "" }), { ok: true });
  });

  it("no interpreter", () => {
    const got = interpretProbe(py, { code: null, stderr: "", spawnError: "ENOENT: spawn /x/python ENOENT" });
    assert.ok(!got.ok && got.reason === "not-found");
    assert.ok(!got.ok && got.message.includes("/x/python") && got.message.includes("distcheck.interpreter"));
  });

  it("distcheck not importable names the last line of the error", () => {
    const got = interpretProbe(
      { command: "python3", source: "default" },
      { code: 1, stderr: "Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'distcheck'\n" },
    );
    assert.ok(!got.ok && got.reason === "not-importable");
    assert.ok(!got.ok && got.message.includes("No module named 'distcheck'") && got.message.includes("default python3"));
  });

  it("timeout", () => {
    const got = interpretProbe(py, { code: null, stderr: "", timedOut: true });
    assert.ok(!got.ok && got.reason === "timeout");
  });

});

describe("restart budget", () => {
  it("allows max restarts per window, then refuses until the window passes or a reset", () => {
    let now = 0;
    const budget = new RestartBudget(3, 1000, () => now);
    assert.deepEqual([budget.allow(), budget.allow(), budget.allow(), budget.allow()], [true, true, true, false]);
    now = 1500;
    assert.equal(budget.allow(), true);
    assert.equal(budget.allow(), true);
    assert.equal(budget.allow(), true);
    assert.equal(budget.allow(), false);
    budget.reset();
    assert.equal(budget.allow(), true);
  });
});

describe("the setting survives every start", () => {
  // VS Code does not apply `machine` / `machine-overridable` settings from (local) User settings in a
  // remote window (Remote-SSH, WSL, containers): the interpreter a user set there would be ignored.
  // (In code-server 4.100.3 such a User setting did survive a restart: tests/e2e/settings.e2e.ts.)
  const manifest = JSON.parse(fs.readFileSync(path.resolve(__dirname, "../../../package.json"), "utf8")) as {
    contributes: { configuration: { properties: Record<string, { scope?: string }> } | Array<{ properties: Record<string, { scope?: string }> }> };
  };
  const sections = Array.isArray(manifest.contributes.configuration) ? manifest.contributes.configuration : [manifest.contributes.configuration];
  const property = sections.map((c) => c.properties["distcheck.interpreter"]).find((p) => p !== undefined);

  it("distcheck.interpreter is readable from User settings in every window", () => {
    assert.ok(property, "package.json contributes distcheck.interpreter");
    assert.ok(
      !["machine", "machine-overridable", "application"].includes(property.scope ?? "window"),
      `scope ${property.scope} drops User settings in remote windows or ignores workspace settings`,
    );
  });

  it("the most specific settings that set it win; empty layers do not hide the ones below", () => {
    assert.deepEqual(settingFromLayers({ globalValue: "/u/python" }), { value: "/u/python", scope: "User settings" });
    assert.deepEqual(settingFromLayers({ globalValue: "/u/python", workspaceValue: "/w/python" }), {
      value: "/w/python",
      scope: "Workspace settings",
    });
    assert.deepEqual(settingFromLayers({ globalValue: "/u/python", workspaceValue: "/w/python", workspaceFolderValue: "/f/python" }), {
      value: "/f/python",
      scope: "Folder settings",
    });
    assert.deepEqual(settingFromLayers({ globalValue: "/u/python", workspaceValue: "  " }), { value: "/u/python", scope: "User settings" });
    assert.deepEqual(settingFromLayers({ globalValue: "/u/python", workspaceValue: 3 }), { value: "/u/python", scope: "User settings" });
    assert.deepEqual(settingFromLayers({}), { value: "", scope: undefined });
    assert.deepEqual(settingFromLayers(undefined), { value: "", scope: undefined });
  });

  it("resolution carries the scope, and the log names the source", async () => {
    const fromUser = settingFromLayers({ globalValue: "/u/python" });
    const got = await resolveInterpreter({ setting: fromUser.value, settingScope: fromUser.scope });
    assert.deepEqual(got, { command: "/u/python", source: "setting", scope: "User settings" });
    assert.equal(describeSource(got), "the distcheck.interpreter setting (User settings)");
    assert.match(describeSource({ command: "python3", source: "default" }), /default python3 \(distcheck.interpreter is not set\)/);
    assert.match(describeSource({ command: "/x", source: "python-extension" }), /Python extension/);
  });

  it("resolving twice from the same settings gives the same interpreter (no cached or second path)", async () => {
    const deps = { setting: "/u/python", settingScope: "User settings", pythonExtension: () => Promise.resolve("/ext/python") };
    assert.deepEqual(await resolveInterpreter(deps), await resolveInterpreter(deps));
  });
});
