import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";

import { STEP_CONTEXTS, type SetupStep, bundledWheel, installArgs, installCommandLine, installFailure, stepCompletion } from "../../extension/src/setupSteps";

const ROOT = path.resolve(__dirname, "..", "..", "..");

interface Step {
  id: string;
  completionEvents?: string[];
  description: string;
}

function walkthroughSteps(): Step[] {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
    contributes: { walkthroughs: Array<{ steps: Step[] }> };
  };
  return manifest.contributes.walkthroughs.flatMap((w) => w.steps);
}

describe("walkthrough steps tick only on success", () => {
  it("every step completes on its own context key and nothing else", () => {
    const steps = walkthroughSteps();
    assert.deepEqual(
      steps.map((s) => s.id),
      Object.keys(STEP_CONTEXTS),
    );
    for (const step of steps) {
      assert.deepEqual(step.completionEvents, [stepCompletion(step.id as SetupStep)], `${step.id}: a command run or a setting change is not success`);
    }
  });

  it("every step's key is set by the extension once its work succeeded", () => {
    const src = path.join(ROOT, "extension", "src");
    const text = fs
      .readdirSync(src)
      .filter((f) => f.endsWith(".ts"))
      .map((f) => fs.readFileSync(path.join(src, f), "utf8"))
      .join("\n");
    for (const id of Object.keys(STEP_CONTEXTS)) {
      assert.ok(text.includes(`completeStep("${id}")`), `no completeStep("${id}") in extension/src`);
    }
  });

  it("the install step runs the install command, and the command is contributed", () => {
    const install = walkthroughSteps().find((s) => s.id === "distcheck.installDistcheck");
    assert.ok(install?.description.includes("command:distcheck.installServer"));
    const manifest = fs.readFileSync(path.join(ROOT, "package.json"), "utf8");
    assert.match(manifest, /"command": "distcheck.installServer"/);
  });
});

describe("the bundled wheel", () => {
  it("the .vsix carries it: packaging builds it and .vscodeignore keeps it", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
    assert.match(manifest.scripts["package"] ?? "", /node extension\/bundleWheel\.mjs && vsce package/);
    const ignore = fs.readFileSync(path.join(ROOT, ".vscodeignore"), "utf8").split("\n");
    assert.ok(ignore.includes("!extension/bundled/*.whl"), ".vscodeignore must keep the wheel");
  });

  it("picks distcheck's newest wheel and nothing else", () => {
    assert.equal(bundledWheel([]), undefined);
    assert.equal(bundledWheel(["torch-2.13.0-cp312-none-any.whl", "README.md"]), undefined);
    assert.equal(
      bundledWheel(["distcheck-0.1.0-py3-none-any.whl", "distcheck-0.10.2-py3-none-any.whl", "distcheck-0.9.0-py3-none-any.whl"]),
      "distcheck-0.10.2-py3-none-any.whl",
    );
  });

  it("installs with pip into the interpreter, and shows a command that pastes", () => {
    assert.deepEqual(installArgs("/x/d.whl"), ["-m", "pip", "install", "--upgrade", "--disable-pip-version-check", "/x/d.whl"]);
    assert.equal(
      installCommandLine("/v/bin/python", "/ext/extension/bundled/distcheck-0.1.0-py3-none-any.whl"),
      "/v/bin/python -m pip install --upgrade --disable-pip-version-check /ext/extension/bundled/distcheck-0.1.0-py3-none-any.whl",
    );
    assert.equal(installCommandLine("/my env/python", "/e x/d.whl"), '"/my env/python" -m pip install --upgrade --disable-pip-version-check "/e x/d.whl"');
    assert.match(installCommandLine("python3", undefined), /checkout or wheel/);
    assert.ok(!installCommandLine("python3", "/w.whl").includes("pip install distcheck"), "distcheck is on no registry");
  });

  it("says what to do next when pip fails or is cancelled", () => {
    const noPip = installFailure("/v/bin/python", 1, "/v/bin/python: No module named pip\n", false);
    assert.match(noPip, /No module named pip/);
    assert.match(noPip, /ensurepip/);
    const resolver = installFailure("/v/bin/python", 1, "Collecting x\nERROR: Could not find a version that satisfies the requirement vesin>=0.3\n", false);
    assert.match(resolver, /exit 1\): ERROR: Could not find a version/);
    assert.match(resolver, /Distcheck output/);
    assert.match(installFailure("/v/bin/python", null, "", true), /cancelled.*again/);
  });
});
