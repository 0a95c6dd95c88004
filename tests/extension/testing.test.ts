// The Testing view's mapping report -> test outcome (testingResults.ts), on real reports re-encoded by
// the installed distcheck (so they carry the derived `failures`), checked against the CLI's JUnit of the
// same reports: the per-output messages must be the same text.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";

import { type ReportJson } from "../../extension/src/report";
import { failureMessages, outcomeOf, outcomeWithoutReport, stateOf } from "../../extension/src/testingResults";
import { FIXTURES, loadReport } from "./fixtures";

const ROOT = join(__dirname, "..", "..", "..");
const PYTHON = join(ROOT, ".venv", "bin", "python");

// Python re-encodes each fixture (adding the derived keys of this distcheck) and writes the JUnit
// failure (message, text) of each, as the CLI would.
const SCRIPT = `
import json, sys
from distcheck.report.document import TraceReport
from distcheck.report.junit import junit_xml
out = {}
for name, text in json.load(sys.stdin).items():
    r = TraceReport.from_json(text)
    failures = [(f.get("message"), f.text) for f in junit_xml(r, name).iter("failure") if f.get("type", "").startswith("output:")]
    fixed = [f.get("message") for f in junit_xml(r, name).iter("failure") if f.get("type") == "fixed-pass"]
    out[name] = {"report": r.to_dict(), "junit": failures, "fixed": fixed}
print(json.dumps(out))
`;

interface Encoded {
  report: ReportJson;
  junit: [string, string][];
  /** The messages of the JUnit's `fixed-pass` failures. */
  fixed: string[];
}

let encoded: Record<string, Encoded> = {};

const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;

describe("testing view outcomes", () => {
  before(() => {
    assert.ok(existsSync(PYTHON), `the test needs the virtualenv at ${PYTHON}`);
    const input = Object.fromEntries(FIXTURES.map((n) => [n, JSON.stringify(loadReport(n))]));
    const r = spawnSync(PYTHON, ["-c", SCRIPT], { cwd: ROOT, input: JSON.stringify(input), encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    encoded = JSON.parse(r.stdout) as Record<string, Encoded>;
  });

  for (const name of ["helper_model_failed", "unknown_cause", "rank_disagreement", "unrouted_python", "suspicious"]) {
    it(`${name}: failed, one diff message per failing output, the JUnit failure text`, () => {
      const { report, junit } = encoded[name] as Encoded;
      const outcome = outcomeOf(report);
      assert.equal(outcome.kind, "failed");
      assert.ok(outcome.kind === "failed");
      const diffs = outcome.messages.filter((m) => m.expected !== undefined);
      assert.ok(junit.length > 0);
      assert.deepEqual(
        diffs.map((m) => m.message),
        junit.map(([message]) => message),
      );
      diffs.forEach((m, i) => {
        const text = (junit[i] as [string, string])[1];
        assert.ok(text.includes(`expected: ${m.expected}\nactual: ${m.actual}`), text);
        assert.ok(m.expected && m.actual && m.expected !== m.actual);
      });
    });
  }

  it("names each failing output with its error and tolerance", () => {
    const messages = failureMessages((encoded["helper_model_failed"] as Encoded).report);
    assert.deepEqual(
      messages.map((m) => m.message.split(":")[0]),
      ["energy", "forces", "charges"],
    );
    for (const m of messages) {
      assert.match(m.message, /max abs diff [\d.e-]+ \(atol 1e-05, rtol 0\.0001\)/);
      assert.match(m.actual ?? "", /max abs diff/);
      assert.match(m.expected ?? "", /within atol 1e-05, rtol 0\.0001/);
    }
  });

  it("a failing output's diff compares numbers, at the line of the first op that departs", () => {
    const report = clone(loadReport("helper_model_failed")) as unknown as Record<string, unknown>;
    const attempts = report["attempts"] as Array<Record<string, unknown>>;
    const best = attempts[report["best_attempt"] as number] as Record<string, unknown>;
    const verdicts = best["verdicts"] as Record<string, Record<string, unknown>>;
    const forces = verdicts["forces"] as Record<string, unknown>;
    forces["worst_index"] = [3, 1];
    Object.assign(forces, { expected_value: -0.125, actual_value: -0.0625 });
    best["layer_divergence"] = {
      ...(best["layer_divergence"] ?? { module: "m", first_rank: 0, max_abs_diff: 1.0, notes: [] }),
      first_op: { op: "torch.einsum", file: "/w/model.py", line: 42, function: "Readout.forward" },
    };
    const r = spawnSync(PYTHON, ["-c", SCRIPT], { cwd: ROOT, input: JSON.stringify({ x: JSON.stringify(report) }), encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    const messages = failureMessages((JSON.parse(r.stdout) as Record<string, Encoded>)["x"]?.report as ReportJson);
    const m = messages.find((x) => x.message.startsWith("forces:"));
    assert.match(m?.expected ?? "", /^forces at atom 3, component y: -0\.125 \(single process/);
    assert.match(m?.actual ?? "", /^forces at atom 3, component y: -0\.0625 \(distributed/);
    assert.ok(messages.every((x) => x.location?.file === "/w/model.py" && x.location.line === 42), JSON.stringify(messages));
  });

  for (const name of ["receptive_fixed"]) {
    it(`${name}: passed`, () => {
      assert.deepEqual(outcomeOf((encoded[name] as Encoded).report), { kind: "passed" });
    });
  }

  for (const name of ["helper_model_autofix", "unrouted_fixed"]) {
    it(`${name}: passed only after auto-fix is a failure with the JUnit's fixed-pass text`, () => {
      const { report, fixed } = encoded[name] as Encoded;
      assert.equal(stateOf(report), "passed_after_fix");
      const outcome = outcomeOf(report);
      assert.ok(outcome.kind === "failed");
      assert.equal(outcome.messages.length, 1);
      assert.match(outcome.messages[0]?.message ?? "", /only after auto-fix.*still fails: save the fixed spec/s);
      assert.deepEqual(
        outcome.messages.map((m) => m.message),
        fixed,
      );
    });
  }

  it("a report without fix_failure (an older distcheck) falls back to its headline", () => {
    const report = clone((encoded["helper_model_autofix"] as Encoded).report);
    delete (report as unknown as Record<string, unknown>)["fix_failure"];
    const outcome = outcomeOf(report);
    assert.ok(outcome.kind === "failed");
    assert.ok((outcome.messages[0]?.message ?? "").length > 0);
  });

  it("the report's own state wins over the fallback rule", () => {
    const report = clone((encoded["helper_model_autofix"] as Encoded).report);
    assert.equal(report.state, "passed_after_fix");
    report.state = "passed";
    assert.deepEqual(outcomeOf(report), { kind: "passed" });
    // a state this extension does not know yet (a newer server) is not read as a pass
    (report as unknown as Record<string, unknown>)["state"] = "cancelled";
    assert.deepEqual(outcomeOf(report), { kind: "skipped", reason: "cancelled" });
  });

  it("worker error: errored at the user's file:line", () => {
    const report = clone((encoded["worker_error"] as Encoded).report);
    const best = report.attempts[report.best_attempt ?? 0];
    assert.ok(best?.error);
    assert.equal(outcomeOf(report).kind, "errored");
    best.error.user_frame = { file: "/ws/model.py", line: 42, function: "forward" };
    const outcome = outcomeOf(report);
    assert.ok(outcome.kind === "errored");
    assert.deepEqual(outcome.messages[0]?.location, { file: "/ws/model.py", line: 42 });
    assert.ok(outcome.messages[0]?.message.startsWith(`${best.error.type}: `));
  });

  it("degenerate partition: a failure saying a pass proves nothing", () => {
    const outcome = outcomeOf((encoded["degenerate"] as Encoded).report);
    assert.ok(outcome.kind === "failed");
    assert.ok(outcome.messages.some((m) => m.message.startsWith("Degenerate partition")));
    assert.ok(outcome.messages.every((m) => m.expected === undefined));
  });

  it("a report from an older server without failures still fails with its headline", () => {
    const report = clone((encoded["helper_model_failed"] as Encoded).report) as unknown as Record<string, unknown>;
    delete report["failures"];
    const outcome = outcomeOf(report as unknown as ReportJson);
    assert.ok(outcome.kind === "failed");
    assert.equal(outcome.messages.length, 1);
    assert.ok((outcome.messages[0]?.message ?? "").length > 0);
  });

  it("no report: cancelled is skipped, anything else errored with the end text", () => {
    assert.deepEqual(outcomeWithoutReport("cancelled"), { kind: "skipped", reason: "cancelled" });
    const outcome = outcomeWithoutReport("interrupted: the runner stopped (exit 9)");
    assert.ok(outcome.kind === "errored");
    assert.match(outcome.messages[0]?.message ?? "", /interrupted: the runner stopped/);
  });
});
