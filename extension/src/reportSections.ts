/**
 * The report panel's attempts table and outputs chart (abs / rel diff against atol / rtol, log scale).
 * Pure; every field is read through `reportCheck.Reader`.
 */

import { type AttemptJson, type ReportState, attemptNumber, isRecord, toNumber, toleranceFor } from "./report";
import { type Problems, Reader, capped } from "./reportCheck";
import { type SafeHtml, button, fmt, html, joinHtml } from "./reportMarkup";

// ------------------------------------------------------------------------------------------------
// attempts

export type Obj = Record<string, unknown>;

/** The attempts table: rule, rationale, result, failing outputs and handlers fired per attempt. */
export function renderAttempts(all: AttemptJson[], p: Problems, at: (a: AttemptJson) => string): SafeHtml {
  if (all.length === 0) {
    return html`<section id="attempts"><h2>Attempts</h2><p>No attempt ran.</p></section>`;
  }
  const attempts = capped(all, "report.attempts", p);
  const rows = attempts.map((attempt) => {
    const a = new Reader(attempt as unknown as Obj, at(attempt), p);
    const failing = outputList(a);
    const hasError = a.rec("error") !== undefined;
    const passed = a.bool("passed", { required: true });
    const result = hasError && !failing.length ? "error" : passed ? "pass" : "fail";
    const counts = a.entries("handler_counts");
    const handlers = counts.length
      ? html`<ul class="handlers">${counts.map(
          ([name, n]) => html`<li><code>${name}</code> ×${fmt(checkedCount(n, `${a.pathOf("handler_counts")}[${JSON.stringify(name)}]`, p))}</li>`,
        )}</ul>`
      : html`<span class="dim">none fired</span>`;
    const rule = a.str("rule");
    return html`<tr class="${result}">
<td>${attemptNumber(a.count("index", { required: true }))}</td>
<td>${rule ? html`<code>${rule}</code>` : html`<span class="dim">initial</span>`}</td>
<td>${a.str("rationale") ?? ""}${a.bool("reused_run") ? html` <span class="dim">(re-consolidated)</span>` : ""}</td>
<td class="result ${result}">${result === "pass" ? "✓ pass" : result === "error" ? "✗ error" : "✗ fail"}</td>
<td>${failing.length ? joinHtml(failing.map((n) => html`<code>${n}</code>`), " ") : html`<span class="dim">–</span>`}</td>
<td>${handlers}</td>
</tr>`;
  });
  return html`<section id="attempts"><h2>Attempts</h2>
<table class="attempts"><thead><tr><th>#</th><th>rule</th><th>rationale</th><th>result</th><th>failing outputs</th><th>handlers fired</th></tr></thead>
<tbody>${joinHtml(rows, "\n")}</tbody></table></section>`;
}

/** The failing outputs of an attempt: `failing_outputs` when written (strings), else from its verdicts. */
function outputList(a: Reader): string[] {
  if (a.has("failing_outputs")) {
    const names = a.items("failing_outputs");
    names.forEach((n, i) => {
      if (typeof n !== "string") {
        a.problems.wrong(`${a.pathOf("failing_outputs")}[${i}]`, n, "a string");
      }
    });
    return names.filter((n): n is string => typeof n === "string");
  }
  return a
    .entries("verdicts")
    .filter(([, v]) => isRecord(v) && v.passed !== true)
    .map(([name]) => name);
}

export function checkedCount(value: unknown, path: string, p: Problems): number | undefined {
  if (typeof value === "number" && Number.isInteger(value) && value >= 0) {
    return value;
  }
  p.wrong(path, value, "a whole number");
  return undefined;
}

export function checkedNumber(value: unknown, path: string, p: Problems): number | undefined {
  const x = toNumber(value);
  if (x === undefined && value !== null && value !== undefined) {
    p.wrong(path, value, "a number");
  }
  return x;
}

// ------------------------------------------------------------------------------------------------
// outputs: abs / rel diff against atol / rtol, log scale

interface Bar {
  label: string;
  value: number | undefined;
  tol: number | undefined;
  ok: boolean;
}

/** The best attempt's outputs: max abs / rel diff against atol / rtol per output, as a table and a log-scale chart. */
export function renderOutputs(a: Reader, meta: Obj): SafeHtml {
  const verdicts = a.rec("verdicts");
  const absDiffs = a.rec("max_abs_diff");
  const relDiffs = a.rec("max_rel_diff");
  const names = capped(
    [...new Set([...Object.keys(verdicts?.obj ?? {}), ...Object.keys(absDiffs?.obj ?? {}), ...Object.keys(relDiffs?.obj ?? {})])],
    a.pathOf("verdicts"),
    a.problems,
  );
  const index = attemptNumber(a.count("index"));
  if (names.length === 0) {
    return html`<section id="outputs"><h2>Outputs</h2><p>No outputs were compared (attempt ${index}).</p></section>`;
  }
  const rows: SafeHtml[] = [];
  const bars: Bar[][] = [];
  for (const name of names) {
    const v = verdicts ? Reader.of(verdicts.raw(name), verdicts.pathOf(name), a.problems, false) : undefined;
    const kind = v?.str("kind") ?? "?";
    const absDiff = v ? v.num("max_abs_diff") : absDiffs ? checkedNumber(absDiffs.raw(name), absDiffs.pathOf(name), a.problems) : undefined;
    const relDiff = v ? v.num("max_rel_diff") : relDiffs ? checkedNumber(relDiffs.raw(name), relDiffs.pathOf(name), a.problems) : undefined;
    const atol = toleranceFor(meta.atol, name, kind);
    const rtol = toleranceFor(meta.rtol, name, kind);
    const passed = v ? v.bool("passed", { required: true }) : undefined;
    const statusText = v?.str("status") ?? "?";
    const status = v ? (passed ? statusText : `${statusText} (${fmt(v.count("n_failing"))}/${fmt(v.count("n_total"))})`) : "–";
    const worst = v ? worstIndex(v) : "";
    rows.push(html`<tr class="${passed === false ? "fail" : passed ? "pass" : ""}"><td><code>${name}</code></td><td>${kind}</td>
<td>${fmt(absDiff)}</td><td>${fmt(atol)}</td><td>${fmt(relDiff)}</td><td>${fmt(rtol)}</td>
<td class="result">${status + (passed === false ? worst : "")}</td></tr>`);
    bars.push([
      { label: `${name} abs`, value: absDiff, tol: atol, ok: isWithin(absDiff, atol, passed) },
      { label: `${name} rel`, value: relDiff, tol: rtol, ok: isWithin(relDiff, rtol, passed) },
    ]);
  }
  return html`<section id="outputs"><h2>Outputs (attempt ${index})</h2>
<table class="outputs"><thead><tr><th>output</th><th>kind</th><th>max abs</th><th>atol</th><th>max rel</th><th>rtol</th><th>status</th></tr></thead>
<tbody>${joinHtml(rows, "\n")}</tbody></table>
${renderDiffChart(bars.flat())}
<p class="legend"><span class="sw ok"></span> within tolerance <span class="sw bad"></span> beyond tolerance <span class="sw tolmark"></span> tolerance (log scale)</p>
</section>`;
}

const MAX_WORST = 8;

/** " worst at [i, j]" from a verdict's `worst_index` (a list of whole numbers, or null). */
function worstIndex(v: Reader): string {
  const list = v.list("worst_index");
  if (!list) {
    return "";
  }
  const bad = list.findIndex((i) => !(typeof i === "number" && Number.isInteger(i)));
  if (bad >= 0) {
    v.problems.wrong(`${v.pathOf("worst_index")}[${bad}]`, list[bad], "a whole number");
    return "";
  }
  const shown = list.slice(0, MAX_WORST).map((i) => fmt(i));
  return list.length ? ` worst at [${shown.join(", ")}${list.length > MAX_WORST ? ", …" : ""}]` : "";
}

function isWithin(value: number | undefined, tol: number | undefined, passed: boolean | undefined): boolean {
  if (value === undefined || tol === undefined) {
    return passed !== false;
  }
  if (Number.isNaN(value)) {
    return false;
  }
  return value <= tol;
}

/** Decades [lo, hi] (powers of ten) covering every positive finite value and tolerance. */
export function logDomain(values: Array<number | undefined>): [number, number] {
  const finite = values.filter((v): v is number => v !== undefined && Number.isFinite(v) && v > 0);
  if (finite.length === 0) {
    return [-8, 0];
  }
  const min = finite.reduce((x, y) => Math.min(x, y));
  const max = finite.reduce((x, y) => Math.max(x, y));
  let lo = Math.floor(Math.log10(min)) - 1;
  let hi = Math.ceil(Math.log10(max));
  if (hi <= lo + 2) {
    hi = lo + 3;
  }
  lo = Math.max(lo, -20);
  hi = Math.min(Math.max(hi, lo + 1), 20);
  return [lo, hi];
}

function renderDiffChart(bars: Bar[]): SafeHtml {
  const [lo, hi] = logDomain(bars.flatMap((b) => [b.value, b.tol]));
  const labelW = 150;
  const plotW = 380;
  const valueW = 150;
  const rowH = 20;
  const top = 8;
  const axisH = 22;
  const width = labelW + plotW + valueW;
  const height = top + bars.length * rowH + axisH;
  const x = (v: number): number => {
    const lv = Math.min(Math.max(Math.log10(v), lo), hi);
    return labelW + ((lv - lo) / (hi - lo)) * plotW;
  };
  const out: SafeHtml[] = [];
  out.push(
    html`<svg class="chart diff-chart" role="img" aria-label="max differences against tolerances, log scale" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" xmlns="http://www.w3.org/2000/svg">`,
  );
  const every = Math.max(1, Math.ceil((hi - lo) / 8)); // at most ~8 labelled decades
  for (let d = lo; d <= hi; d++) {
    const gx = x(10 ** d).toFixed(1);
    out.push(html`<line class="grid" x1="${gx}" y1="${top}" x2="${gx}" y2="${top + bars.length * rowH}"/>`);
    if ((d - lo) % every === 0) {
      out.push(html`<text class="axis" x="${gx}" y="${height - 6}" text-anchor="middle">1e${d}</text>`);
    }
  }
  bars.forEach((b, i) => {
    const y = top + i * rowH;
    const cls = b.ok ? "ok" : "bad";
    out.push(html`<text class="label" x="${labelW - 6}" y="${y + 14}" text-anchor="end">${b.label}</text>`);
    let valueText: string;
    if (b.value === undefined) {
      valueText = "n/a";
    } else if (b.value === 0) {
      valueText = "0";
      out.push(html`<rect class="bar ${cls}" x="${labelW}" y="${y + 4}" width="2" height="${rowH - 8}"/>`);
    } else {
      const end = Number.isFinite(b.value) && b.value > 0 ? x(b.value) : labelW + plotW;
      const w = Math.max(end - labelW, 2).toFixed(1);
      out.push(html`<rect class="bar ${cls}" x="${labelW}" y="${y + 4}" width="${w}" height="${rowH - 8}"><title>${`${b.label}: ${fmt(b.value)}`}</title></rect>`);
      valueText = fmt(b.value);
    }
    if (b.tol !== undefined && Number.isFinite(b.tol) && b.tol > 0) {
      const tx = x(b.tol).toFixed(1);
      out.push(html`<line class="tol" x1="${tx}" y1="${y + 1}" x2="${tx}" y2="${y + rowH - 1}"><title>tolerance ${fmt(b.tol)}</title></line>`);
    }
    const rel = b.tol === undefined ? "" : b.ok ? ` ≤ ${fmt(b.tol)}` : ` > ${fmt(b.tol)}`;
    out.push(html`<text class="value ${cls}" x="${labelW + plotW + 6}" y="${y + 14}">${valueText + rel}</text>`);
  });
  out.push(html`</svg>`);
  return html`${out}`;
}


/** What, beyond the report's own state, the panel knows of its target: the validation after it was
 * cancelled, or its spec or model changed after it (`stale`: what changed). Cancelled wins: the
 * user's last act was the cancel. */
export interface Standing {
  cancelled?: boolean;
  stale?: string;
}

/** The panel's badge: the report's `state` (`TraceReport.state`, never re-derived), "cancelled" when the
 * validation after it was cancelled, or "stale" when the spec or model changed after the run. */
export function renderBadge(state: ReportState, standing: Standing): SafeHtml {
  if (standing.cancelled) {
    return html`<span class="badge cancelled" id="verdict" title="the last validation was cancelled before it reported">${CANCELLED_LABEL}</span>`;
  }
  if (standing.stale) {
    return html`<span class="badge stale" id="verdict" title="${`${standing.stale} changed after this run`}">⟲ stale — validate again</span>`;
  }
  return html`<span class="badge ${state}" id="verdict">${STATE_LABEL[state]}</span>`;
}

export const CANCELLED_LABEL = "⊘ cancelled — validate again";

export const STATE_LABEL: Record<ReportState, string> = {
  passed: "✓ passed",
  passed_after_fix: "💡 fix available — apply",
  failed: "✗ failed",
  inconclusive: "⚠ inconclusive",
  error: "✗ error",
};

/** The panel's buttons, the primary first: "Apply best spec" leads only when an auto-fixed spec passed
 * (and nothing happened since), and is not offered when no attempt passed (there is nothing proven to
 * apply); "Validate again" leads otherwise, and alone (with the export) after a cancelled run. */
export function renderActions(state: ReportState, standing: Standing, target: string, untrusted: string | undefined): SafeHtml {
  const apply = button("Apply best spec", "applyBestSpec", { target }, untrusted);
  const again = button("Validate again", "validate", { target }, untrusted);
  const exportJson = button("Export report JSON", "exportJson", { target });
  const order = standing.cancelled
    ? [again, exportJson]
    : state === "passed_after_fix" && !standing.stale
      ? [apply, again, exportJson]
      : state === "passed"
        ? [again, apply, exportJson]
        : [again, exportJson];
  return html`<div class="actions">
${joinHtml(order, "\n")}
</div>`;
}
