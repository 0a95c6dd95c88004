// The report panel on malformed reports: every field the renderer reads, set to each kind of wrong
// value, gives a visible error line in its section while the rest of the report still renders.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type ReportMessage } from "../../extension/src/report";
import { describeValue } from "../../extension/src/reportCheck";
import { renderReportHtml } from "../../extension/src/reportHtml";
import { loadReport } from "./fixtures";

const OPTIONS = { nonce: "N0NCE", cspSource: "vscode-webview://abc", scriptUri: "vscode-webview://abc/report.js" };
const EVIL = "<img src=x onerror=alert(1)>";
const ERROR_LINE = "this part of the report could not be shown: ";

type Json = Record<string, unknown>;
type Check = (v: unknown) => boolean;

const isStr: Check = (v) => typeof v === "string";
const isStrOrNull: Check = (v) => v === null || typeof v === "string";
const isBool: Check = (v) => typeof v === "boolean";
const isBoolOrNull: Check = (v) => v === null || typeof v === "boolean";
const isCount: Check = (v) => typeof v === "number" && Number.isInteger(v) && v >= 0;
const isCountOrNull: Check = (v) => v === null || isCount(v);
const isNum: Check = (v) => typeof v === "number" || v === "NaN" || v === "Infinity" || v === "-Infinity";
const isNumOrNull: Check = (v) => v === null || isNum(v);
const isRec: Check = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const isRecOrNull: Check = (v) => v === null || isRec(v);
const isList: Check = (v) => Array.isArray(v);
const isListOrNull: Check = (v) => v === null || Array.isArray(v);
const isWholeListOrNull: Check = (v) => v === null || (Array.isArray(v) && v.every((i) => Number.isInteger(i)));

/** Wrong values of every kind: null, strings (also numbers as strings), non-finite and fractional numbers, lists, objects, booleans, missing. */
const WRONG: unknown[] = [null, EVIL, "3", 5.5, -1, Number.NaN, Number.POSITIVE_INFINITY, [], [1, EVIL], {}, { a: EVIL }, true, undefined];

interface Field {
  fixture: string;
  path: string;
  ok: Check;
  /** Missing is a problem too (fields every report has). */
  required?: boolean;
}

const A = "attempts.0";
const FIELDS: Field[] = [
  { fixture: "helper_model_failed", path: "next_action", ok: isStr, required: true },
  { fixture: "helper_model_failed", path: "fix_applied", ok: isStrOrNull },
  { fixture: "helper_model_failed", path: "meta", ok: isRec, required: true },
  { fixture: "helper_model_failed", path: "meta.world_size", ok: isCountOrNull },
  { fixture: "helper_model_failed", path: "meta.device", ok: isStrOrNull },
  { fixture: "helper_model_failed", path: "meta.atol", ok: (v) => isNumOrNull(v) || isRec(v) },
  { fixture: "helper_model_failed", path: "meta.versions", ok: isRecOrNull },
  { fixture: "helper_model_failed", path: "attempts", ok: isList, required: true },
  { fixture: "helper_model_failed", path: A, ok: isRec, required: true },
  { fixture: "helper_model_failed", path: `${A}.index`, ok: isCount, required: true },
  { fixture: "helper_model_failed", path: `${A}.rule`, ok: isStrOrNull },
  { fixture: "helper_model_failed", path: `${A}.rationale`, ok: isStrOrNull },
  { fixture: "helper_model_failed", path: `${A}.passed`, ok: isBool, required: true },
  { fixture: "helper_model_failed", path: `${A}.reused_run`, ok: isBoolOrNull },
  { fixture: "helper_model_failed", path: `${A}.failing_outputs`, ok: (v) => v === null || (isList(v) && (v as unknown[]).every(isStr)) },
  { fixture: "helper_model_failed", path: `${A}.handler_counts`, ok: (v) => isRecOrNull(v) && Object.values((v ?? {}) as Json).every(isCount) },
  { fixture: "helper_model_failed", path: `${A}.verdicts`, ok: isRecOrNull },
  { fixture: "helper_model_failed", path: `${A}.verdicts.energy`, ok: isRecOrNull },
  { fixture: "helper_model_failed", path: `${A}.verdicts.energy.worst_index`, ok: isWholeListOrNull },
  { fixture: "helper_model_failed", path: `${A}.verdicts.energy.max_abs_diff`, ok: isNumOrNull },
  { fixture: "helper_model_failed", path: `${A}.verdicts.energy.kind`, ok: isStrOrNull },
  { fixture: "helper_model_failed", path: `${A}.verdicts.energy.status`, ok: isStrOrNull },
  { fixture: "helper_model_failed", path: `${A}.verdicts.energy.passed`, ok: isBool, required: true },
  { fixture: "helper_model_failed", path: `${A}.verdicts.energy.n_failing`, ok: isCountOrNull },
  { fixture: "helper_model_failed", path: `${A}.helper_diagnostics`, ok: isListOrNull },
  { fixture: "helper_model_failed", path: `${A}.helper_diagnostics.0`, ok: isRec, required: true },
  { fixture: "helper_model_failed", path: `${A}.helper_diagnostics.0.qualname`, ok: isStrOrNull },
  { fixture: "helper_model_failed", path: `${A}.helper_diagnostics.0.suspected_gap`, ok: isStrOrNull },
  { fixture: "helper_model_failed", path: `${A}.helper_diagnostics.0.source`, ok: isRecOrNull },
  { fixture: "helper_model_failed", path: `${A}.helper_diagnostics.0.divergence_notes`, ok: isListOrNull },
  { fixture: "helper_model_failed", path: `${A}.helper_diagnostics.0.n_calls_per_rank`, ok: isRecOrNull },
  { fixture: "helper_model_failed", path: `${A}.helper_diagnostics.0.likely_remedy`, ok: isRecOrNull },
  { fixture: "helper_model_failed", path: `${A}.helper_diagnostics.0.pattern_confidence`, ok: isNumOrNull },
  { fixture: "helper_model_failed", path: `${A}.helper_diagnostics.0.already_wrapped`, ok: isBoolOrNull },
  { fixture: "helper_model_failed", path: `${A}.layer_divergence`, ok: isRecOrNull },
  { fixture: "helper_model_failed", path: `${A}.layer_divergence.first_divergent`, ok: isRecOrNull },
  { fixture: "helper_model_failed", path: `${A}.layer_divergence.checked`, ok: isCountOrNull },
  { fixture: "helper_model_failed", path: `${A}.partition_health`, ok: isRecOrNull },
  { fixture: "helper_model_failed", path: `${A}.partition_health.per_rank`, ok: isRecOrNull },
  { fixture: "helper_model_failed", path: `${A}.halo_completeness`, ok: isRecOrNull },
  { fixture: "degenerate", path: `${A}.partition_health.degenerate`, ok: (v) => v === null || v === false || isStr(v) || isList(v) },
  { fixture: "worker_error", path: `${A}.error`, ok: isRecOrNull },
  { fixture: "worker_error", path: `${A}.error.type`, ok: isStr, required: true },
  // -1: the reference run's or the parent's error (what the engine writes for a failure before the ranks)
  { fixture: "worker_error", path: `${A}.error.rank`, ok: (v) => v === null || Number.isInteger(v) },
  { fixture: "worker_error", path: `${A}.error.message`, ok: isStrOrNull },
  { fixture: "worker_error", path: `${A}.error.frames`, ok: isListOrNull },
  { fixture: "worker_error", path: `${A}.error.frames.0`, ok: isRec, required: true },
  { fixture: "worker_error", path: `${A}.error.frames.0.file`, ok: isStr, required: true },
  { fixture: "worker_error", path: `${A}.error.frames.0.line`, ok: isCountOrNull },
];

/** `attempts.0.verdicts.energy` → `report.attempts[0].verdicts.energy` (how the panel names a field). */
function shownPath(path: string): string {
  return `report.${path}`.replace(/\.(\d+)(?=\.|$)/g, "[$1]");
}

function withField(fixture: string, path: string, value: unknown): ReportMessage {
  const report = loadReport(fixture) as unknown as Json;
  const keys = path.split(".");
  let obj: unknown = report;
  for (const key of keys.slice(0, -1)) {
    obj = (obj as Json)[key];
  }
  const last = keys.at(-1) ?? "";
  if (value === undefined) {
    if (Array.isArray(obj)) {
      obj.splice(Number(last), 1);
    } else {
      Reflect.deleteProperty(obj as Json, last);
    }
  } else {
    (obj as Json)[last] = value;
  }
  return { target: "t", specUri: null, report: report as never, notice: null };
}

function assertSafe(html: string): void {
  assert.ok(!html.includes("<img"), "unescaped report text in the page");
  assert.equal(html.match(/<\/script>/g)?.length, 2);
}

function assertRestRenders(html: string): void {
  assert.match(html, /id="verdict">/);
  assert.match(html, /<section id="spec">/);
  assert.match(html, /data-action="exportJson"/);
}

describe("the report panel on malformed reports", () => {
  for (const field of FIELDS) {
    it(`${field.fixture}: ${field.path} of the wrong type`, () => {
      let checked = 0;
      for (const value of WRONG) {
        if (value === undefined ? !field.required : field.ok(value)) {
          continue;
        }
        if (field.path.endsWith(".0") && value === undefined) {
          continue; // removing a list's only item is an empty list, which is fine
        }
        checked += 1;
        const html = renderReportHtml(withField(field.fixture, field.path, value), OPTIONS);
        assertSafe(html);
        assertRestRenders(html);
        const line = `${ERROR_LINE}${shownPath(field.path)}`;
        assert.ok(
          html.includes(line),
          `no error line for ${field.path} = ${describeValue(value)}; lines: ${[...html.matchAll(/could not be shown: ([^<]*)/g)].map((m) => m[1]).join(" | ")}`,
        );
        assert.match(html, /id="malformed">Parts of this report are malformed/);
      }
      assert.ok(checked > 0);
    });
  }

  it("renders the rest when worst_index is not a list (the blank-panel report)", () => {
    const html = renderReportHtml(withField("helper_model_failed", `${A}.verdicts.energy.worst_index`, "0, 3"), OPTIONS);
    assert.ok(html.includes(`${ERROR_LINE}report.attempts[0].verdicts.energy.worst_index is a string (&quot;0, 3&quot;), expected a list`));
    // the error line sits in the outputs section, and every other section is there
    assert.match(html, /<section id="outputs">[\s\S]*could not be shown: report\.attempts\[0\]\.verdicts\.energy\.worst_index[\s\S]*?<\/section>/);
    for (const id of ["attempts", "outputs", "helpers", "layers", "partition", "spec"]) {
      assert.match(html, new RegExp(`<section id="${id}">`));
    }
    assert.match(html, /<svg class="chart diff-chart"/);
    assert.match(html, /<code>energy<\/code>/);
  });

  it("a good report has no error line", () => {
    for (const fixture of ["helper_model_failed", "helper_model_autofix", "worker_error", "degenerate"]) {
      const html = renderReportHtml({ target: "t", specUri: null, report: loadReport(fixture), notice: null }, OPTIONS);
      assert.ok(!html.includes(ERROR_LINE), fixture);
      assert.ok(!html.includes('id="malformed"'), fixture);
    }
  });

  it("keeps rendering when the message itself is malformed", () => {
    for (const bad of [
      { target: 5, specUri: {}, notice: [EVIL], report: loadReport("helper_model_failed") },
      { target: "t", specUri: null, report: null },
      { target: "t", specUri: null, report: EVIL },
      { target: "t", specUri: null, report: { attempts: EVIL } },
    ]) {
      const html = renderReportHtml(bad as unknown as ReportMessage, OPTIONS);
      assertSafe(html);
      assert.match(html, /id="verdict">/);
      assert.ok(html.includes(ERROR_LINE), JSON.stringify(bad).slice(0, 80));
    }
  });

  it("non-finite numbers render as NaN / inf, not as errors", () => {
    const message = withField("helper_model_failed", `${A}.verdicts.energy.max_abs_diff`, Number.NaN);
    const v = (message.report.attempts[0]?.verdicts as Json).energy as Json;
    v.max_rel_diff = Number.POSITIVE_INFINITY;
    const html = renderReportHtml(message, OPTIONS);
    assert.ok(!html.includes(ERROR_LINE));
    assert.match(html, /<td>NaN<\/td>/);
    assert.match(html, /<td>inf<\/td>/);
  });

  it("a section whose renderer throws shows the error and the others render", () => {
    const message = withField("helper_model_failed", `${A}.rationale`, "x");
    Object.defineProperty(message.report.attempts[0], "rationale", {
      get() {
        throw new Error(`boom ${EVIL}`);
      },
    });
    const html = renderReportHtml(message, OPTIONS);
    assertSafe(html);
    assert.match(html, /<section id="attempts"><h2>Attempts<\/h2><p class="report-error">this part of the report could not be shown: the attempts section failed to render \(Error: boom &lt;img/);
    for (const id of ["outputs", "helpers", "layers", "partition", "spec"]) {
      assert.match(html, new RegExp(`<section id="${id}">`));
    }
  });

  it("huge lists render in bounded time and say what they left out", () => {
    const report = loadReport("helper_model_failed") as unknown as Json;
    const first = (report.attempts as Json[])[0] as Json;
    const verdicts = first.verdicts as Json;
    verdicts.energy = { ...(verdicts.energy as Json), worst_index: Array.from({ length: 1_000_000 }, (_, i) => i) };
    for (let i = 0; i < 20_000; i++) {
      verdicts[`out${i}`] = { kind: "per_node", passed: false, max_abs_diff: i + 1, max_rel_diff: 1, status: "mismatch", worst_index: [i], n_failing: 1, n_total: 1 };
    }
    const perRank: Json = {};
    for (let r = 0; r < 20_000; r++) {
      perRank[String(r)] = { owned: r, halo: 1, remote: 2 };
    }
    first.partition_health = { per_rank: perRank, degenerate: [] };
    const small = Array.from({ length: 150_000 }, (_, i) => ({ index: i + 1, passed: false, rationale: "r", verdicts: { e: { passed: false } } }));
    report.attempts = [...small, first];
    delete report.best_attempt; // no best attempt written: the panel never searches the 150 001 for one
    const t0 = Date.now();
    const html = renderReportHtml({ target: "t", specUri: null, report: report as never, notice: null }, OPTIONS);
    assert.ok(Date.now() - t0 < 20_000, `took ${Date.now() - t0} ms`);
    assertRestRenders(html);
    assert.match(html, /report\.attempts has 150001 items; the first 100 are shown/);
    assert.ok(html.length < 60_000_000, `page of ${html.length} characters`);
    // the attempt with the big fields, alone
    report.attempts = [first];
    report.best_attempt = 0;
    const one = renderReportHtml({ target: "t", specUri: null, report: report as never, notice: null }, OPTIONS);
    assert.match(one, /worst at \[0, 1, 2, 3, 4, 5, 6, 7, …\]/);
    assert.match(one, /report\.attempts\[0\]\.partition_health\.per_rank has 20000 items; the first 100 are shown/);
    assert.match(one, /report\.attempts\[0\]\.verdicts has 20003 items; the first 100 are shown/);
  });
});
