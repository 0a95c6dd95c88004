import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type AttemptJson, type ReportJson, bestAttempt, headline, summarize, verdictOf } from "../../extension/src/report";
import { StatusModel, statusView, targetFromProgressTitle, verdictText } from "../../extension/src/status";
import { loadReport } from "./fixtures";

describe("status text per verdict", () => {
  it("passed, failed with N outputs, inconclusive, error", () => {
    assert.equal(verdictText("mpnn", { verdict: "passed", nFailing: 0 }), "✓ mpnn");
    assert.equal(verdictText("mpnn", { verdict: "failed", nFailing: 3 }), "✗ mpnn: 3 outputs failing");
    assert.equal(verdictText("mpnn", { verdict: "failed", nFailing: 1 }), "✗ mpnn: 1 output failing");
    assert.equal(verdictText("mpnn", { verdict: "failed", nFailing: 0 }), "✗ mpnn: failed");
    assert.equal(verdictText("mpnn", { verdict: "inconclusive", nFailing: 0 }), "⚠ mpnn: inconclusive");
    assert.equal(verdictText("mpnn", { verdict: "error", nFailing: 0 }), "✗ mpnn: error");
  });

  it("from real reports", () => {
    const text = (name: string): string => verdictText("t", summarize(loadReport(name)));
    assert.equal(text("helper_model_failed"), "✗ t: 3 outputs failing");
    // passed only after auto-fix (state passed_after_fix): the fix is not in the spec on disk yet
    assert.equal(text("helper_model_autofix"), "$(lightbulb) t: fix available — apply");
    assert.equal(text("receptive_fixed"), "✓ t");
    assert.equal(text("degenerate"), "⚠ t: inconclusive");
    assert.equal(text("worker_error"), "✗ t: error");
  });

  it("derives the verdict from the report's best attempt when the report does not write it", () => {
    for (const [name, expected] of [
      ["helper_model_failed", "failed"],
      ["helper_model_autofix", "passed"],
      ["degenerate", "inconclusive"],
      ["worker_error", "error"],
    ] as const) {
      const report: ReportJson = loadReport(name);
      delete report.verdict;
      delete report.attempts[0]?.failing_outputs;
      assert.equal(verdictOf(report), expected, name);
    }
  });

  it("reads the best attempt from the report and never picks one itself", () => {
    // Two failing attempts, the second worse: the engine stands on the first (best_attempt 0); a rule
    // of its own (fewest failing, latest on ties) would pick the worse one.
    const report: ReportJson = loadReport("helper_model_failed");
    const first = report.attempts[0] as AttemptJson;
    const worse: AttemptJson = { ...first, index: 1, rationale: "a mutation that made it worse" };
    report.attempts = [first, worse];
    report.best_attempt = 0;
    assert.equal(bestAttempt(report), first);
    report.best_attempt = 1;
    assert.equal(bestAttempt(report), worse);
    delete report.best_attempt; // an older or malformed report: no best attempt, none made up
    assert.equal(bestAttempt(report), undefined);
    report.best_attempt = 7;
    assert.equal(bestAttempt(report), undefined);
  });
});

describe("status bar view", () => {
  it("idle, running with the current step, then the last verdict", () => {
    const model = new StatusModel();
    assert.equal(statusView(model).text, "$(beaker) Distcheck");
    model.started("helper_model");
    assert.equal(statusView(model).text, "$(sync~spin) Distcheck helper_model: starting");
    model.step("helper_model", "attempt 1/8: initial spec");
    assert.equal(statusView(model).text, "$(sync~spin) Distcheck helper_model: attempt 1/8: initial spec");
    const report = loadReport("helper_model_failed");
    model.reported("helper_model", summarize(report));
    const view = statusView(model);
    assert.equal(view.text, "✗ helper_model: 3 outputs failing");
    assert.equal(view.tone, "error");
    // the tooltip carries the report's headline (the first line of its next_action)
    assert.ok(headline(report) && view.tooltip.includes(headline(report)), view.tooltip);
  });

  it("shows the most recent target and lists the others in the tooltip", () => {
    const model = new StatusModel();
    model.reported("a", summarize(loadReport("helper_model_failed")));
    model.reported("b", summarize(loadReport("degenerate")));
    let view = statusView(model);
    assert.equal(view.text, "⚠ b: inconclusive");
    assert.equal(view.tone, "warning");
    assert.match(view.tooltip, /✗ a: 3 outputs failing/);
    model.reported("a", summarize(loadReport("helper_model_autofix")));
    view = statusView(model);
    assert.equal(view.text, "$(lightbulb) a: fix available — apply");
    assert.equal(view.tone, "warning");
    model.reported("a", summarize(loadReport("receptive_fixed")));
    view = statusView(model);
    assert.equal(view.text, "✓ a");
    assert.equal(view.tone, "normal");
    model.started("b", "reference run");
    model.started("a", "rank 0 started");
    assert.equal(statusView(model).text, "$(sync~spin) Distcheck a: rank 0 started (+1)");
    model.finished("a");
    model.finished("b");
    assert.equal(statusView(model).text, "✓ a");
  });

  it("a server problem wins", () => {
    const model = new StatusModel();
    model.problem = "distcheck is not importable";
    assert.deepEqual(statusView(model), { text: "$(warning) Distcheck", tooltip: "distcheck is not importable", tone: "warning" });
  });

  it("reads the target from the progress title", () => {
    assert.equal(targetFromProgressTitle("Distcheck: helper_model"), "helper_model");
    assert.equal(targetFromProgressTitle("Distcheck:  models/x.py "), "models/x.py");
    assert.equal(targetFromProgressTitle("something else"), undefined);
    assert.equal(targetFromProgressTitle(undefined), undefined);
  });
  it("a hostile target name or headline never reaches the status item unescaped", () => {
    const model = new StatusModel();
    model.started("evil\u001b[2J\u202e");
    const view = statusView(model);
    // eslint-disable-next-line no-control-regex -- the check is that no control character is left
    assert.ok(!/[\u0000-\u0008\u000b-\u001f\u202e]/.test(view.text + view.tooltip), JSON.stringify(view));
    assert.match(view.text, /evil\\x1b\[2J\\u202e/);
  });
});
