import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type ReportJson, type ReportMessage, stateOf, summarize } from "../../extension/src/report";
import { renderReportHtml } from "../../extension/src/reportHtml";
import { SAVE_AND_VALIDATE, VALIDATE_SAVED, saveDecision, saveMode, targetDirtyFiles } from "../../extension/src/saveFirst";
import { StatusModel, endedCancelled, reportFiles, statusView } from "../../extension/src/status";
import { loadReport } from "./fixtures";

const OPTIONS = { nonce: "N0NCE", cspSource: "vscode-webview://abc", scriptUri: "vscode-webview://abc/report.js" };

/** A real report with the `state` the engine writes (`TraceReport.state`). */
function withState(name: string, state: ReportJson["state"]): ReportJson {
  return { ...loadReport(name), state };
}

function buttons(html: string): string[] {
  const actions = /<div class="actions">([\s\S]*?)<\/div>/.exec(html)?.[1] ?? "";
  return [...actions.matchAll(/data-action="(\w+)"/g)].map((m) => m[1] ?? "");
}

describe("verdict states", () => {
  it("reads the written state, never re-derives it; an older report without one shows its verdict", () => {
    assert.equal(stateOf(withState("helper_model_autofix", "passed_after_fix")), "passed_after_fix");
    assert.equal(stateOf(withState("helper_model_failed", "failed")), "failed");
    const older = loadReport("helper_model_autofix");
    delete older.state;
    assert.equal(stateOf(older), "passed");
  });

  it("a pass after a fix is not a green pass in the status item", () => {
    const model = new StatusModel();
    model.reported("m", summarize(withState("helper_model_autofix", "passed_after_fix")));
    const view = statusView(model);
    assert.equal(view.text, "$(lightbulb) m: fix available — apply");
    assert.equal(view.tone, "warning");
    model.reported("m", summarize(withState("helper_model_autofix", "passed")));
    assert.deepEqual([statusView(model).text, statusView(model).tone], ["✓ m", "normal"]);
  });

  it("a cancelled run is recorded as cancelled, not as the previous verdict or a failure", () => {
    assert.ok(endedCancelled("cancelled") && !endedCancelled("interrupted: the runner stopped") && !endedCancelled(undefined));
    for (const before of ["helper_model_autofix", "helper_model_failed", undefined]) {
      const model = new StatusModel();
      if (before) {
        model.reported("m", summarize(loadReport(before)));
      }
      model.started("m", "attempt 1/8");
      model.cancelled("m");
      const view = statusView(model);
      assert.equal(view.text, "$(circle-slash) m: cancelled", String(before));
      assert.notEqual(view.tone, "error");
      assert.doesNotMatch(view.text, /✓|✗|fix available/);
    }
  });

  it("an edit after the run makes the verdict stale, for every state; a new report clears it", () => {
    for (const state of ["passed", "passed_after_fix", "failed", "inconclusive", "error"] as const) {
      const model = new StatusModel();
      model.reported("m", summarize(withState("helper_model_autofix", state)));
      model.stale("m", "helper_model.py");
      const view = statusView(model);
      assert.equal(view.text, "$(history) m: stale — validate again", state);
      assert.match(view.tooltip, /helper_model\.py changed after the run/);
      model.reported("m", summarize(withState("helper_model_autofix", state)));
      assert.doesNotMatch(statusView(model).text, /stale/);
    }
  });

  it("the files a verdict rests on: the spec and the model file", () => {
    const report = { ...loadReport("helper_model_autofix"), target: { factory: { file: "/ws/m.py", line: 3, qualname: "f" }, spec_path: "/ws/m.distspec.json" } };
    const files = reportFiles({ specUri: "file:///ws/m.distspec.json", report });
    assert.deepEqual(files.sort(), ["/ws/m.distspec.json", "/ws/m.py"]);
  });
});

describe("panel badge and buttons per state", () => {
  const render = (report: ReportJson, extra: Partial<ReportMessage> = {}): string =>
    renderReportHtml({ target: "m", specUri: null, report, ...extra }, OPTIONS);

  it("passed after fix: its own badge, Apply best spec first", () => {
    const html = render(withState("helper_model_autofix", "passed_after_fix"));
    assert.match(html, /<span class="badge passed_after_fix" id="verdict">💡 fix available — apply<\/span>/);
    assert.doesNotMatch(html, /✓ passed/);
    assert.deepEqual(buttons(html), ["applyBestSpec", "validate", "exportJson"]);
  });

  it("no attempt passed: Apply best spec is not offered", () => {
    for (const [name, state] of [
      ["helper_model_failed", "failed"],
      ["degenerate", "inconclusive"],
      ["worker_error", "error"],
    ] as const) {
      const html = render(withState(name, state));
      assert.deepEqual(buttons(html), ["validate", "exportJson"], name);
    }
    assert.deepEqual(buttons(render(withState("helper_model_autofix", "passed"))), ["validate", "applyBestSpec", "exportJson"]);
  });

  it("stale and unsaved are said on the panel", () => {
    const html = render(withState("helper_model_autofix", "passed_after_fix"), { stale: "m.py", unsaved: ["file:///ws/m.distspec.json"] });
    assert.match(html, /class="badge stale"[^>]*>⟲ stale — validate again</);
    assert.match(html, /m\.py changed after this run/);
    assert.match(html, /unsaved edits in m\.distspec\.json were not validated/);
    assert.equal(buttons(html)[0], "validate");
  });
});

describe("saveBeforeValidate", () => {
  const target = { name: "m", specUri: "file:///ws/m.distspec.json", factoryUri: "file:///ws/m.py", uri: "file:///ws/pyproject.toml", source: "pyproject" as const };

  it("only the target's model and spec count, and unknown values are the default", () => {
    const dirty = ["file:///ws/m.py", "file:///ws/other.py", "file:///ws/m.distspec.json"];
    assert.deepEqual(targetDirtyFiles(target, dirty), ["file:///ws/m.py", "file:///ws/m.distspec.json"]);
    assert.deepEqual(targetDirtyFiles(target, ["file:///ws/other.py"]), []);
    assert.deepEqual(targetDirtyFiles(undefined, dirty), []);
    assert.equal(saveMode(undefined), "always");
    assert.equal(saveMode("Prompt"), "always");
    assert.equal(saveMode("never"), "never");
  });

  it("always saves, prompt follows the answer (dismissed: cancel), never validates the disk", () => {
    const dirty = ["file:///ws/m.py"];
    assert.equal(saveDecision("always", dirty), "save");
    assert.equal(saveDecision("prompt", dirty, SAVE_AND_VALIDATE), "save");
    assert.equal(saveDecision("prompt", dirty, VALIDATE_SAVED), "validate");
    assert.equal(saveDecision("prompt", dirty, undefined), "cancel");
    assert.equal(saveDecision("never", dirty), "validate");
    for (const mode of ["always", "prompt", "never"] as const) {
      assert.equal(saveDecision(mode, []), "validate");
    }
  });
});
