/**
 * Report JSON → the report panel's HTML. Pure (no `vscode` import) so unit tests render fixtures directly.
 *
 * Safety rules, all enforced here:
 * - every string that comes from a report goes through `escapeHtml` (text and attribute values alike);
 * - the page has a strict CSP: no default source, scripts and styles only with the per-render nonce (the
 *   one script is `extension/media/report.js`), images only from the webview itself or `data:`;
 * - charts are inline SVG drawn here; nothing is fetched from a CDN or any remote origin;
 * - the report is embedded for the page script (state restore) as a JSON data block with `<`, `>`, `&`
 *   and the line separators escaped, so no report text can close the block;
 * - colours are VS Code theme variables (`--vscode-*`), with fallbacks;
 * - the renderer is total: every field is read through `reportCheck.Reader`, a field of the wrong type
 *   becomes an error line ("this part of the report could not be shown: <field> is <what>") in its
 *   section, each section is rendered under a guard that turns an exception into such a line, and long
 *   lists are cut at `MAX_ITEMS` — a malformed report never blanks the panel.
 *
 * Clickable things are elements with `data-action` (the command the page script posts) and `data-args`
 * (a JSON object): openFile {file, line}, goToModule {module, cls, file, line}, declareAdapter
 * {target, qualname, module, function, remedy}, applyBestSpec {target}, exportJson {target}, validate {target}.
 */

import {
  type AttemptJson,
  type ReportJson,
  type ReportMessage,
  bestAttempt,
  freeString,
  headline,
  isRecord,
  textOf,
  toNumber,
  toleranceFor,
  verdictOf,
} from "./report";
import { Problems, Reader, asNumber, capped } from "./reportCheck";

export interface RenderOptions {
  /** Fresh random nonce for this render (CSP). */
  nonce: string;
  /** `webview.cspSource`. */
  cspSource: string;
  /** Webview URI of `extension/media/report.js` (as a string). */
  scriptUri: string;
  /** Is the workspace trusted? Untrusted: buttons that edit specs or run validations are disabled. */
  trusted?: boolean;
}

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
  "`": "&#96;",
};

/** Text safe in HTML element content and in quoted attribute values. */
export function escapeHtml(value: unknown): string {
  const text = textOf(value);
  return text.replace(/[&<>"'`]/g, (c) => HTML_ESCAPES[c] ?? c);
}

/** JSON safe inside a `<script type="application/json">` block. */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value ?? null)
    .replace(/</g, "\\u003c")
    .replace(/>/g, "\\u003e")
    .replace(/&/g, "\\u0026")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

/** A number for people: 3 significant digits, "NaN", "inf", or "–" when absent. */
export function fmt(value: unknown): string {
  const x = toNumber(value);
  if (x === undefined) {
    return value === undefined || value === null ? "–" : freeString(value);
  }
  if (Number.isNaN(x)) {
    return "NaN";
  }
  if (!Number.isFinite(x)) {
    return x > 0 ? "inf" : "-inf";
  }
  if (Number.isInteger(x) && Math.abs(x) < 1e6) {
    return String(x);
  }
  const abs = Math.abs(x);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) {
    return x.toExponential(2).replace(/\.?0+e/, "e");
  }
  return String(Number(x.toPrecision(3)));
}

function attr(name: string, value: unknown): string {
  return ` ${name}="${escapeHtml(value)}"`;
}

function action(name: string, args: Record<string, unknown>): string {
  return `${attr("data-action", name)}${attr("data-args", JSON.stringify(args))}`;
}

function button(label: string, name: string, args: Record<string, unknown>, disabledReason?: string): string {
  const disabled = disabledReason ? `${attr("title", disabledReason)} disabled` : "";
  return `<button type="button"${action(name, args)}${disabled}>${escapeHtml(label)}</button>`;
}

function link(label: string, name: string, args: Record<string, unknown>, title?: string): string {
  return `<a href="#"${action(name, args)}${title ? attr("title", title) : ""}>${escapeHtml(label)}</a>`;
}

const VERDICT_LABEL: Record<string, string> = {
  passed: "✓ passed",
  failed: "✗ failed",
  inconclusive: "⚠ inconclusive",
  error: "✗ error",
};

const UNTRUSTED = "Disabled in Restricted Mode: validation runs this workspace's code. Trust the workspace to enable it.";

// ------------------------------------------------------------------------------------------------
// page

export function renderReportHtml(message: ReportMessage | undefined, options: RenderOptions): string {
  const nonce = escapeHtml(options.nonce);
  const csp = [
    "default-src 'none'",
    `img-src ${options.cspSource} data:`,
    `style-src 'nonce-${options.nonce}'`,
    `script-src 'nonce-${options.nonce}'`,
    `font-src ${options.cspSource}`,
  ].join("; ");
  const body = message ? renderBodySafely(message, options.trusted !== false) : renderEmpty();
  const title = message ? `Distcheck: ${message.target}` : "Distcheck report";
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${escapeHtml(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>${escapeHtml(title)}</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
${body}
<script type="application/json" id="distcheck-state">${stateForScript(message)}</script>
<script nonce="${nonce}" src="${escapeHtml(options.scriptUri)}"></script>
</body>
</html>
`;
}

/** The body, or — should a part outside every section throw — one error line instead of a blank page. */
function renderBodySafely(message: ReportMessage, trusted: boolean): string {
  try {
    return renderBody(message, trusted);
  } catch (error) {
    const p = new Problems();
    p.failed("the report", error);
    return `<main data-verdict="error"><h1><span class="badge error" id="verdict">${escapeHtml(VERDICT_LABEL.error)}</span></h1>
${problemLines(p)}
<p>Run Validate again for a fresh report, or export this one to inspect it.</p>
<div class="actions">${button("Export report JSON", "exportJson", { target: textOf(isRecord(message) ? message.target : "") })}</div></main>`;
  }
}

/** The message for the page script's state restore; null when it cannot be serialised. */
function stateForScript(message: ReportMessage | undefined): string {
  try {
    return jsonForScript(message ?? null);
  } catch {
    return "null";
  }
}

function renderEmpty(): string {
  return `<main class="empty"><h1>Distcheck report</h1>
<p>No report yet. Run <b>Distcheck: Validate distribution</b> from the Command Palette or a CodeLens above a model factory.</p></main>`;
}

/** The error lines of one section: what could not be shown, and which lists were cut. */
function problemLines(p: Problems): string {
  const shown = p.lines.slice(0, 8).map((l) => `<p class="report-error">this part of the report could not be shown: ${escapeHtml(l)}</p>`);
  if (p.lines.length > 8) {
    shown.push(`<p class="report-error">… and ${p.lines.length - 8} more malformed fields in this part</p>`);
  }
  for (const note of p.notes.slice(0, 8)) {
    shown.push(`<p class="report-note dim">${escapeHtml(note)}</p>`);
  }
  return shown.join("\n");
}

/**
 * One section, rendered so that nothing in it can blank the page: the section's problems (and any
 * exception its renderer throws) become error lines inside it, and `all` collects them for the header.
 */
function guarded(id: string, title: string, all: Problems, render: (p: Problems) => string): string {
  const p = new Problems();
  let html: string;
  try {
    html = render(p);
  } catch (error) {
    p.failed(`the ${title.toLowerCase()} section`, error);
    html = "";
  }
  all.lines.push(...p.lines);
  if (p.empty) {
    return html;
  }
  const lines = problemLines(p);
  for (const close of ["</section>", "</header>"]) {
    if (html.endsWith(close)) {
      return `${html.slice(0, -close.length)}${lines}\n${close}`;
    }
  }
  return `${html}<section id="${escapeHtml(id)}"><h2>${escapeHtml(title)}</h2>${lines}</section>`;
}

function renderBody(message: ReportMessage, trusted: boolean): string {
  const all = new Problems();
  const top = new Problems(); // problems of the message itself: shown in the summary
  const root = new Reader(isRecord(message) ? message : {}, "", top);
  const target = root.str("target", { required: true }) ?? "?";
  const specUri = root.str("specUri") ?? null;
  const notice = root.str("notice");
  const raw: unknown = isRecord(message) ? message.report : undefined;
  if (!isRecord(raw)) {
    top.wrong("report", raw, "an object");
  }
  const report: ReportJson = isRecord(raw) ? (raw as unknown as ReportJson) : ({ attempts: [] } as unknown as ReportJson);
  const listed = new Problems(); // problems of the attempts list: shown in the attempts section
  const attemptValues = (isRecord(raw) ? new Reader(raw, "report", listed).list("attempts", { required: true }) : undefined) ?? [];
  const attempts = attemptValues.filter(isRecord) as unknown as AttemptJson[];
  const paths = new Map<AttemptJson, string>();
  attemptValues.forEach((a, i) => {
    if (isRecord(a)) {
      paths.set(a as unknown as AttemptJson, `report.attempts[${i}]`);
    } else {
      listed.wrong(`report.attempts[${i}]`, a, "an object");
    }
  });
  const view: ReportJson = { ...report, attempts };
  const best = bestAttempt(view);
  const verdict = verdictOf(view);
  const head = guarded("summary", "Summary", all, (p) => {
    p.lines.push(...top.lines);
    const hr = new Reader(isRecord(raw) ? raw : {}, "report", p);
    const nextAction = hr.str("next_action", { required: true }) ?? "";
    const fix = hr.str("fix_applied");
    hr.bool("ok");
    hr.count("best_attempt");
    hr.str("verdict");
    return `<header class="head">
<h1><span class="badge ${escapeHtml(verdict)}" id="verdict">${escapeHtml(VERDICT_LABEL[verdict] ?? verdict)}</span> <span class="target">${escapeHtml(target)}</span></h1>
<p class="headline" id="headline">${escapeHtml(headline({ ...view, next_action: nextAction }))}</p>
${renderNextAction(nextAction)}
${notice ? `<p class="notice">${escapeHtml(notice)}</p>` : ""}
${renderMeta(hr.rec("meta", { required: true }), fix, specUri)}
<div class="actions">
${button("Apply best spec", "applyBestSpec", { target }, trusted ? undefined : UNTRUSTED)}
${button("Export report JSON", "exportJson", { target })}
${button("Validate again", "validate", { target }, trusted ? undefined : UNTRUSTED)}
</div>
</header>`;
  });
  const at = (a: AttemptJson): string => paths.get(a) ?? "report.attempts[?]";
  const meta = isRecord(report.meta) ? report.meta : {};
  const parts: string[] = [];
  parts.push(
    guarded("attempts", "Attempts", all, (p) => {
      p.lines.push(...listed.lines);
      return renderAttempts(attempts, p, at);
    }),
  );
  if (best) {
    parts.push(guarded("outputs", "Outputs", all, (p) => renderOutputs(new Reader(best as unknown as Obj, at(best), p), meta)));
  }
  parts.push(guarded("helpers", "Third-party helpers", all, (p) => renderHelpers(attempts, best, target, trusted, p, at)));
  parts.push(guarded("layers", "Layer divergence", all, (p) => renderLayers(attempts, best, p, at)));
  parts.push(guarded("errors", "Worker error", all, (p) => renderErrors(attempts, p, at)));
  if (best) {
    parts.push(guarded("partition", "Partition", all, (p) => renderPartition(new Reader(best as unknown as Obj, at(best), p))));
  }
  parts.push(
    guarded("spec", "Spec", all, () => {
      const spec = JSON.stringify(report.spec ?? null, null, 2) ?? "null";
      return `<section id="spec"><details data-key="spec"><summary><h2>Spec (${escapeHtml(
        report.ok === true ? "working" : "best tried",
      )})</h2></summary><pre class="json">${escapeHtml(spec)}</pre></details></section>`;
    }),
  );
  const warning = all.lines.length
    ? `<p class="report-error" id="malformed">Parts of this report are malformed (${escapeHtml(
        `${all.lines.length} field${all.lines.length === 1 ? "" : "s"}`,
      )}) and are marked below; the rest is shown. A report from another distcheck version can do this: run Validate again for a fresh one.</p>`
    : "";
  return [`<main data-verdict="${escapeHtml(verdict)}">`, head, warning, ...parts, "</main>"].join("\n");
}

function renderNextAction(nextAction: string): string {
  const lines = freeString(nextAction).split("\n").filter((l) => l.trim() !== "");
  if (lines.length <= 1) {
    return "";
  }
  return `<ul class="next-action">${capped(lines.slice(1), "report.next_action", new Problems())
    .map((l) => `<li>${escapeHtml(l)}</li>`)
    .join("")}</ul>`;
}

/** The path of a `file:` URI (`file:///c%3A/x` → `c:/x`), or undefined for other schemes. */
export function fileUriToPath(uri: string): string | undefined {
  const m = /^file:\/\/(?:localhost)?(\/.*)$/i.exec(uri);
  if (!m) {
    return undefined;
  }
  let p: string;
  try {
    p = decodeURIComponent(m[1] ?? "");
  } catch {
    return undefined;
  }
  return /^\/[a-zA-Z]:/.test(p) ? p.slice(1) : p;
}

function renderMeta(m: Reader | undefined, fixApplied: string | undefined, specUri: string | null): string {
  const cells: string[] = [];
  if (m) {
    for (const key of ["world_size", "device", "backend"]) {
      const v = m.raw(key);
      if (v === undefined) {
        continue;
      }
      const ok = key === "world_size" ? m.count(key) !== undefined : m.str(key) !== undefined;
      if (ok) {
        cells.push(`${escapeHtml(key.replace("_", " "))} <b>${escapeHtml(fmt(v))}</b>`);
      }
    }
    for (const key of ["atol", "rtol"]) {
      const v = m.raw(key);
      if (v === undefined) {
        continue;
      }
      if (isRecord(v)) {
        const bad = Object.entries(v).filter(([, t]) => asNumber(t) === undefined);
        for (const [name, t] of bad.slice(0, 3)) {
          m.problems.wrong(`${m.pathOf(key)}[${JSON.stringify(name)}]`, t, "a number");
        }
        cells.push(`${key} <b>${escapeHtml(JSON.stringify(v))}</b>`);
      } else if (m.num(key) !== undefined) {
        cells.push(`${key} <b>${escapeHtml(fmt(v))}</b>`);
      }
    }
    const versions = m.entries("versions");
    if (versions.length) {
      cells.push(versions.map(([k, v]) => `${escapeHtml(k)} ${escapeHtml(freeString(v))}`).join(", "));
    }
  }
  const fix = fixApplied ? `<p class="fix">Fix applied: ${escapeHtml(fixApplied)}</p>` : "";
  const specPath = specUri ? fileUriToPath(specUri) : undefined;
  const spec = specUri
    ? `<p class="spec-uri">Spec file: ${
        specPath ? link(specPath, "openFile", { file: specPath, line: 1 }, "Open the spec file") : `<code>${escapeHtml(specUri)}</code>`
      }</p>`
    : "";
  return `<p class="meta">${cells.join(" · ")}</p>${fix}${spec}`;
}

// ------------------------------------------------------------------------------------------------
// attempts

type Obj = Record<string, unknown>;

function renderAttempts(all: AttemptJson[], p: Problems, at: (a: AttemptJson) => string): string {
  if (all.length === 0) {
    return `<section id="attempts"><h2>Attempts</h2><p>No attempt ran.</p></section>`;
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
      ? `<ul class="handlers">${counts
          .map(([name, n]) => `<li><code>${escapeHtml(name)}</code> ×${escapeHtml(fmt(checkedCount(n, `${a.pathOf("handler_counts")}[${JSON.stringify(name)}]`, p)))}</li>`)
          .join("")}</ul>`
      : `<span class="dim">none fired</span>`;
    const rule = a.str("rule");
    return `<tr class="${result}">
<td>${escapeHtml(fmt(a.count("index", { required: true }) ?? "?"))}</td>
<td>${rule ? `<code>${escapeHtml(rule)}</code>` : `<span class="dim">initial</span>`}</td>
<td>${escapeHtml(a.str("rationale") ?? "")}${a.bool("reused_run") ? ` <span class="dim">(re-consolidated)</span>` : ""}</td>
<td class="result ${result}">${result === "pass" ? "✓ pass" : result === "error" ? "✗ error" : "✗ fail"}</td>
<td>${failing.length ? failing.map((n) => `<code>${escapeHtml(n)}</code>`).join(" ") : `<span class="dim">–</span>`}</td>
<td>${handlers}</td>
</tr>`;
  });
  return `<section id="attempts"><h2>Attempts</h2>
<table class="attempts"><thead><tr><th>#</th><th>rule</th><th>rationale</th><th>result</th><th>failing outputs</th><th>handlers fired</th></tr></thead>
<tbody>${rows.join("\n")}</tbody></table></section>`;
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

function checkedCount(value: unknown, path: string, p: Problems): number | undefined {
  if (typeof value === "number" && Number.isInteger(value) && value >= 0) {
    return value;
  }
  p.wrong(path, value, "a whole number");
  return undefined;
}

function checkedNumber(value: unknown, path: string, p: Problems): number | undefined {
  const x = asNumber(value);
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

function renderOutputs(a: Reader, meta: Obj): string {
  const verdicts = a.rec("verdicts");
  const absDiffs = a.rec("max_abs_diff");
  const relDiffs = a.rec("max_rel_diff");
  const names = capped(
    [...new Set([...Object.keys(verdicts?.obj ?? {}), ...Object.keys(absDiffs?.obj ?? {}), ...Object.keys(relDiffs?.obj ?? {})])],
    a.pathOf("verdicts"),
    a.problems,
  );
  const index = fmt(a.count("index") ?? "?");
  if (names.length === 0) {
    return `<section id="outputs"><h2>Outputs</h2><p>No outputs were compared (attempt ${escapeHtml(index)}).</p></section>`;
  }
  const rows: string[] = [];
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
    rows.push(`<tr class="${passed === false ? "fail" : passed ? "pass" : ""}"><td><code>${escapeHtml(name)}</code></td><td>${escapeHtml(kind)}</td>
<td>${escapeHtml(fmt(absDiff))}</td><td>${escapeHtml(fmt(atol))}</td><td>${escapeHtml(fmt(relDiff))}</td><td>${escapeHtml(fmt(rtol))}</td>
<td class="result">${escapeHtml(status + (passed === false ? worst : ""))}</td></tr>`);
    bars.push([
      { label: `${name} abs`, value: absDiff, tol: atol, ok: isWithin(absDiff, atol, passed) },
      { label: `${name} rel`, value: relDiff, tol: rtol, ok: isWithin(relDiff, rtol, passed) },
    ]);
  }
  return `<section id="outputs"><h2>Outputs (attempt ${escapeHtml(index)})</h2>
<table class="outputs"><thead><tr><th>output</th><th>kind</th><th>max abs</th><th>atol</th><th>max rel</th><th>rtol</th><th>status</th></tr></thead>
<tbody>${rows.join("\n")}</tbody></table>
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

function renderDiffChart(bars: Bar[]): string {
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
  const out: string[] = [];
  out.push(
    `<svg class="chart diff-chart" role="img" aria-label="max differences against tolerances, log scale" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" xmlns="http://www.w3.org/2000/svg">`,
  );
  const every = Math.max(1, Math.ceil((hi - lo) / 8)); // at most ~8 labelled decades
  for (let d = lo; d <= hi; d++) {
    const gx = x(10 ** d).toFixed(1);
    out.push(`<line class="grid" x1="${gx}" y1="${top}" x2="${gx}" y2="${top + bars.length * rowH}"/>`);
    if ((d - lo) % every === 0) {
      out.push(`<text class="axis" x="${gx}" y="${height - 6}" text-anchor="middle">1e${d}</text>`);
    }
  }
  bars.forEach((b, i) => {
    const y = top + i * rowH;
    const cls = b.ok ? "ok" : "bad";
    out.push(`<text class="label" x="${labelW - 6}" y="${y + 14}" text-anchor="end">${escapeHtml(b.label)}</text>`);
    let valueText: string;
    if (b.value === undefined) {
      valueText = "n/a";
    } else if (b.value === 0) {
      valueText = "0";
      out.push(`<rect class="bar ${cls}" x="${labelW}" y="${y + 4}" width="2" height="${rowH - 8}"/>`);
    } else {
      const end = Number.isFinite(b.value) && b.value > 0 ? x(b.value) : labelW + plotW;
      const w = Math.max(end - labelW, 2).toFixed(1);
      out.push(`<rect class="bar ${cls}" x="${labelW}" y="${y + 4}" width="${w}" height="${rowH - 8}"><title>${escapeHtml(
        `${b.label}: ${fmt(b.value)}`,
      )}</title></rect>`);
      valueText = fmt(b.value);
    }
    if (b.tol !== undefined && Number.isFinite(b.tol) && b.tol > 0) {
      const tx = x(b.tol).toFixed(1);
      out.push(`<line class="tol" x1="${tx}" y1="${y + 1}" x2="${tx}" y2="${y + rowH - 1}"><title>${escapeHtml(
        `tolerance ${fmt(b.tol)}`,
      )}</title></line>`);
    }
    const rel = b.tol === undefined ? "" : b.ok ? ` ≤ ${fmt(b.tol)}` : ` > ${fmt(b.tol)}`;
    out.push(`<text class="value ${cls}" x="${labelW + plotW + 6}" y="${y + 14}">${escapeHtml(valueText + rel)}</text>`);
  });
  out.push("</svg>");
  return out.join("");
}

// ------------------------------------------------------------------------------------------------
// helpers

interface Helper {
  h: Reader;
  attempt: Reader;
  name: string;
}

function renderHelpers(
  attempts: AttemptJson[],
  best: AttemptJson | undefined,
  target: string,
  trusted: boolean,
  p: Problems,
  at: (a: AttemptJson) => string,
): string {
  const latest = new Map<string, Helper & { isBest: boolean }>();
  for (const attempt of attempts) {
    const a = new Reader(attempt as unknown as Obj, at(attempt), p);
    a.items("helper_diagnostics").forEach((value, i) => {
      const h = Reader.of(value, `${a.pathOf("helper_diagnostics")}[${i}]`, p);
      if (!h) {
        return;
      }
      const name = h.str("qualname") ?? `${h.str("module", { required: true }) ?? "?"}.${h.str("function", { required: true }) ?? "?"}`;
      const prev = latest.get(name);
      if (!prev || attempt === best || !prev.isBest) {
        latest.set(name, { h, attempt: a, name, isBest: attempt === best });
      }
    });
  }
  if (latest.size === 0) {
    return "";
  }
  const cards = capped([...latest.values()], "the helpers", p).map(({ h, attempt, name }) => renderHelper(h, attempt, name, target, trusted));
  return `<section id="helpers"><h2>Third-party helpers</h2>${cards.join("\n")}</section>`;
}

function renderHelper(h: Reader, attempt: Reader, name: string, target: string, trusted: boolean): string {
  const gap = h.str("suspected_gap");
  const consistency = h.bool("consistency_passed");
  const flagged = Boolean(gap) || consistency === false;
  const perRank = h
    .entries("n_calls_per_rank")
    .map(([r, n]) => `rank ${escapeHtml(r)}: ${escapeHtml(fmt(checkedCount(n, `${h.pathOf("n_calls_per_rank")}[${JSON.stringify(r)}]`, h.problems)))}`)
    .join(", ");
  const checkText = h.str("consistency_check");
  const check = checkText
    ? `<li>check: ${escapeHtml(checkText)} — <b>${consistency === true ? "passed" : consistency === false ? "failed" : "not run"}</b></li>`
    : "";
  const source = h.rec("source");
  const file = source?.str("file");
  const line = source?.count("line");
  const src = file ? `<li>defined at ${link(`${file}:${fmt(line ?? 1)}`, "openFile", { file, line: line ?? 1 })}</li>` : "";
  const notes = h
    .items("divergence_notes")
    .map((n) => `<li>${escapeHtml(freeString(n))}</li>`)
    .join("");
  const remedyReader = h.rec("likely_remedy");
  const remedy = remedyReader
    ? `<div class="remedy">remedy (a <code>third_party_helpers</code> entry):<pre class="json">${escapeHtml(
        JSON.stringify(remedyReader.obj, null, 2),
      )}</pre></div>`
    : "";
  const wrapped = h.bool("already_wrapped") === true;
  const declare =
    flagged && !wrapped && remedyReader
      ? button(
          "Declare adapter",
          "declareAdapter",
          { target, qualname: name, module: h.str("module"), function: h.str("function"), remedy: remedyReader.obj },
          trusted ? undefined : UNTRUSTED,
        )
      : "";
  const state = wrapped ? `<span class="tag ok">adapter declared</span>` : flagged ? `<span class="tag bad">flagged</span>` : `<span class="tag">ok</span>`;
  return `<div class="helper ${flagged ? "flagged" : ""}" data-helper="${escapeHtml(name)}">
<h3><code>${escapeHtml(name)}</code> ${state} <span class="dim">(attempt ${escapeHtml(fmt(attempt.count("index") ?? "?"))})</span></h3>
<ul>
<li>pattern <b>${escapeHtml(h.str("pattern") ?? "?")}</b> (confidence ${escapeHtml(fmt(h.num("pattern_confidence")))}); calls: reference ${escapeHtml(
    fmt(h.count("n_calls_ref")),
  )}${perRank ? `; ${perRank}` : ""}</li>
${check}
${gap ? `<li class="gap">${escapeHtml(gap)}</li>` : ""}
${src}
${notes}
</ul>
${remedy}
${declare}
</div>`;
}

// ------------------------------------------------------------------------------------------------
// layer divergence

export interface ModuleLocation {
  module: string;
  cls: string;
  file: string | undefined;
  line: number | undefined;
  relDiff: number | undefined;
  absDiff: number | undefined;
}

/** The first divergent module, from either shape the engine writes (`first_divergent` or `first_module`). */
export function firstDivergentModule(ld: unknown, problems: Problems = new Problems(), path = "layer_divergence"): ModuleLocation | undefined {
  if (!isRecord(ld)) {
    return undefined;
  }
  const outer = new Reader(ld, path, problems);
  const inner = outer.rec("first_divergent");
  const src = inner ?? outer;
  const module = inner ? inner.str("module", { required: true }) : outer.str("first_module");
  if (!module) {
    return undefined;
  }
  const cls = src.has("class") ? src.str("class") : src.str("cls");
  return {
    module,
    cls: cls ?? "",
    file: src.str("file"),
    line: src.count("line"),
    relDiff: src.has("rel_diff") ? src.num("rel_diff") : src.num("max_rel_diff"),
    absDiff: src.has("abs_diff") ? src.num("abs_diff") : src.num("max_abs_diff"),
  };
}

function renderLayers(attempts: AttemptJson[], best: AttemptJson | undefined, p: Problems, at: (a: AttemptJson) => string): string {
  const ordered = best ? [best, ...attempts.filter((a) => a !== best).reverse()] : [...attempts].reverse();
  for (const attempt of ordered) {
    const a = new Reader(attempt as unknown as Obj, at(attempt), p);
    const ld = a.rec("layer_divergence");
    const loc = ld ? firstDivergentModule(ld.obj, p, ld.path) : undefined;
    if (!ld || !loc) {
      continue;
    }
    const where = loc.file ? ` (${loc.file}:${fmt(loc.line ?? 1)})` : "";
    const diffs = [loc.relDiff !== undefined ? `rel diff ${fmt(loc.relDiff)}` : "", loc.absDiff !== undefined ? `abs diff ${fmt(loc.absDiff)}` : ""]
      .filter(Boolean)
      .join(", ");
    const n = ld.count("checked");
    const checked = n !== undefined ? ` <span class="dim">(${escapeHtml(fmt(n))} modules checked)</span>` : "";
    return `<section id="layers"><h2>Layer divergence (attempt ${escapeHtml(fmt(a.count("index") ?? "?"))})</h2>
<p>First divergent module: <code>${escapeHtml(loc.module)}</code>${loc.cls ? ` <span class="dim">${escapeHtml(loc.cls)}</span>` : ""}${escapeHtml(where)}${diffs ? ` — ${escapeHtml(diffs)}` : ""}${checked}</p>
<p>${link("Go to module", "goToModule", { module: loc.module, cls: loc.cls, file: loc.file, line: loc.line })}</p>
</section>`;
  }
  return "";
}

// ------------------------------------------------------------------------------------------------
// worker errors

/** A traceback frame that belongs to a library (site-packages, distcheck's runtime) rather than the user. */
export function isLibraryFrame(file: string): boolean {
  return (
    file.startsWith("<") ||
    /[\\/](site|dist)-packages[\\/]/.test(file) ||
    /[\\/]distcheck[\\/](runtime|validate|lsp)[\\/]/.test(file) ||
    /[\\/]lib[\\/]python\d/.test(file)
  );
}

function renderError(e: Reader, a: Reader): string {
  const rank = e.count("rank");
  const where = rank === undefined ? "reference / parent" : `rank ${fmt(rank)}`;
  const index = fmt(a.count("index") ?? "?");
  const frameItems = e
    .items("frames")
    .map((value, i) => {
      const f = Reader.of(value, `${e.pathOf("frames")}[${i}]`, e.problems);
      if (!f) {
        return "";
      }
      const file = f.str("file", { required: true }) ?? "?";
      const line = f.count("line");
      return `<li class="${isLibraryFrame(file) ? "lib" : "user"}">${link(`${file}:${fmt(line)}`, "openFile", {
        file,
        line: line ?? 1,
      })} in <code>${escapeHtml(f.str("function") ?? "?")}</code></li>`;
    })
    .join("\n");
  const traceback = e.str("traceback");
  const raw = traceback
    ? `<details data-key="traceback-${escapeHtml(index)}"><summary>raw traceback</summary><pre>${escapeHtml(traceback)}</pre></details>`
    : "";
  const hint = e.str("hint");
  return `<div class="error">
<h3>${escapeHtml(e.str("type", { required: true }) ?? "error")} on ${escapeHtml(where)} during ${escapeHtml(e.str("phase") ?? "?")} <span class="dim">(attempt ${escapeHtml(index)})</span></h3>
<p class="message">${escapeHtml(e.str("message") ?? "")}</p>
${hint ? `<p class="hint">${escapeHtml(hint)}</p>` : ""}
${frameItems ? `<ol class="frames">${frameItems}</ol>` : ""}
${raw}
</div>`;
}

function renderErrors(attempts: AttemptJson[], p: Problems, at: (a: AttemptJson) => string): string {
  const cards: string[] = [];
  for (const attempt of attempts) {
    const a = new Reader(attempt as unknown as Obj, at(attempt), p);
    const e = a.rec("error");
    if (e) {
      cards.push(renderError(e, a));
    }
  }
  if (cards.length === 0) {
    return "";
  }
  return `<section id="errors"><h2>Worker error</h2>${capped(cards, "the worker errors", p).join("\n")}</section>`;
}

// ------------------------------------------------------------------------------------------------
// partition composition

export interface RankComposition {
  rank: string;
  owned: number;
  halo: number;
  remote: number;
}

export function partitionComposition(health: unknown, problems: Problems = new Problems(), path = "partition_health"): RankComposition[] {
  if (!isRecord(health)) {
    return [];
  }
  const h = new Reader(health, path, problems);
  return h
    .entries("per_rank")
    .map(([rank, stats]) => {
      const s = Reader.of(stats, `${h.pathOf("per_rank")}[${JSON.stringify(rank)}]`, problems);
      return { rank, owned: s?.count("owned") ?? 0, halo: s?.count("halo") ?? 0, remote: s?.count("remote") ?? 0 };
    })
    .sort((a, b) => Number(a.rank) - Number(b.rank) || a.rank.localeCompare(b.rank));
}

function degenerateLines(health: Reader | undefined): string[] {
  if (!health) {
    return [];
  }
  const found = health.raw("degenerate");
  if (Array.isArray(found)) {
    return health.items("degenerate").map(freeString);
  }
  if (found === undefined || found === null || found === false) {
    return [];
  }
  if (typeof found === "string") {
    return found ? [freeString(found)] : [];
  }
  health.problems.wrong(health.pathOf("degenerate"), found, "a list of strings");
  return [];
}

function renderPartition(a: Reader): string {
  const health = a.rec("partition_health");
  const ranks = health ? partitionComposition(health.obj, a.problems, health.path) : [];
  const messages = degenerateLines(health);
  const hc = a.rec("halo_completeness");
  const hcText = hc ? (hc.has("interpretation") ? hc.str("interpretation") : hc.str("message")) ?? "" : "";
  const incomplete = hc?.bool("complete") === false || hc?.bool("matches") === false;
  if (ranks.length === 0 && messages.length === 0 && !hcText) {
    return "";
  }
  const parts: string[] = [];
  if (ranks.length) {
    const total = Math.max(
      ranks.reduce((m, r) => Math.max(m, r.owned + r.halo + r.remote), 0),
      1,
    );
    const labelW = 70;
    const plotW = 440;
    const rowH = 24;
    const width = labelW + plotW + 170;
    const height = ranks.length * rowH + 6;
    const svg: string[] = [
      `<svg class="chart partition-chart" role="img" aria-label="atoms per rank: owned, halo, remote" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" xmlns="http://www.w3.org/2000/svg">`,
    ];
    ranks.forEach((r, i) => {
      const y = 3 + i * rowH;
      svg.push(`<text class="label" x="${labelW - 6}" y="${y + 15}" text-anchor="end">rank ${escapeHtml(r.rank)}</text>`);
      let x = labelW;
      for (const part of ["owned", "halo", "remote"] as const) {
        const w = (r[part] / total) * plotW;
        if (w > 0) {
          svg.push(`<rect class="seg ${part}" x="${x.toFixed(1)}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 6}"><title>${escapeHtml(
            `rank ${r.rank}: ${fmt(r[part])} ${part}`,
          )}</title></rect>`);
        }
        x += w;
      }
      svg.push(`<text class="value" x="${labelW + plotW + 6}" y="${y + 15}">${escapeHtml(`${fmt(r.owned)} / ${fmt(r.halo)} / ${fmt(r.remote)}`)}</text>`);
    });
    svg.push("</svg>");
    parts.push(svg.join(""));
    parts.push(`<p class="legend"><span class="sw owned"></span> owned <span class="sw halo"></span> halo <span class="sw remote"></span> remote (owned / halo / remote atoms)</p>`);
  }
  for (const m of messages) {
    parts.push(`<p class="warning">⚠ ${escapeHtml(m)}</p>`);
  }
  if (hcText) {
    parts.push(`<p class="${incomplete ? "warning" : "dim"}">Halo: ${escapeHtml(hcText)}</p>`);
  }
  return `<section id="partition"><h2>Partition (attempt ${escapeHtml(fmt(a.count("index") ?? "?"))})</h2>${parts.join("\n")}</section>`;
}

// ------------------------------------------------------------------------------------------------
// style: theme variables only, with fallbacks for a bare browser

const STYLE = `
body { font-family: var(--vscode-font-family, sans-serif); font-size: var(--vscode-font-size, 13px); color: var(--vscode-foreground, #ccc); background: var(--vscode-editor-background, #1e1e1e); padding: 0 16px 24px; line-height: 1.45; }
h1 { font-size: 1.4em; margin: 14px 0 4px; font-weight: 600; }
h2 { font-size: 1.1em; margin: 20px 0 6px; border-bottom: 1px solid var(--vscode-panel-border, #444); padding-bottom: 2px; display: inline-block; }
h3 { font-size: 1em; margin: 10px 0 4px; }
summary h2 { border: none; margin: 12px 0 4px; }
code, pre { font-family: var(--vscode-editor-font-family, monospace); font-size: var(--vscode-editor-font-size, 12px); }
pre { background: var(--vscode-textCodeBlock-background, rgba(127,127,127,.1)); padding: 6px 8px; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
a { color: var(--vscode-textLink-foreground, #3794ff); text-decoration: none; cursor: pointer; }
a:hover { color: var(--vscode-textLink-activeForeground, #3794ff); text-decoration: underline; }
.badge { padding: 1px 8px; border-radius: 10px; font-size: .85em; vertical-align: middle; }
.badge.passed { background: var(--vscode-testing-iconPassed, #73c991); color: var(--vscode-editor-background, #1e1e1e); }
.badge.failed, .badge.error { background: var(--vscode-testing-iconFailed, #f14c4c); color: var(--vscode-editor-background, #1e1e1e); }
.badge.inconclusive { background: var(--vscode-editorWarning-foreground, #cca700); color: var(--vscode-editor-background, #1e1e1e); }
.headline { font-weight: 600; margin: 6px 0; }
.next-action { margin: 4px 0 8px; padding-left: 18px; }
.meta, .dim, .spec-uri { color: var(--vscode-descriptionForeground, #999); }
.notice { color: var(--vscode-editorInfo-foreground, #3794ff); }
.fix { color: var(--vscode-testing-iconPassed, #73c991); }
.actions { display: flex; gap: 8px; margin: 10px 0; flex-wrap: wrap; }
button { background: var(--vscode-button-background, #0e639c); color: var(--vscode-button-foreground, #fff); border: 1px solid var(--vscode-button-border, transparent); padding: 4px 12px; cursor: pointer; font-family: inherit; border-radius: 2px; }
button:hover { background: var(--vscode-button-hoverBackground, #1177bb); }
button:disabled { opacity: .5; cursor: not-allowed; }
button + button { background: var(--vscode-button-secondaryBackground, #3a3d41); color: var(--vscode-button-secondaryForeground, #fff); }
table { border-collapse: collapse; margin: 4px 0 8px; }
th, td { text-align: left; padding: 3px 10px 3px 0; vertical-align: top; border-bottom: 1px solid var(--vscode-editorWidget-border, #333); }
th { color: var(--vscode-descriptionForeground, #999); font-weight: normal; }
td.result.pass, tr.pass td.result { color: var(--vscode-testing-iconPassed, #73c991); }
td.result.fail, td.result.error, tr.fail td.result { color: var(--vscode-testing-iconFailed, #f14c4c); }
ul.handlers { margin: 0; padding-left: 0; list-style: none; }
svg.chart { max-width: 100%; height: auto; }
.chart text { fill: var(--vscode-foreground, #ccc); font-size: 11px; font-family: var(--vscode-font-family, sans-serif); }
.chart text.axis { fill: var(--vscode-descriptionForeground, #999); font-size: 10px; }
.chart text.value.bad { fill: var(--vscode-testing-iconFailed, #f14c4c); }
.chart .grid { stroke: var(--vscode-editorWidget-border, #444); stroke-width: 1; stroke-dasharray: 2 3; }
.chart .bar.ok { fill: var(--vscode-testing-iconPassed, #73c991); }
.chart .bar.bad { fill: var(--vscode-testing-iconFailed, #f14c4c); }
.chart .tol { stroke: var(--vscode-editorWarning-foreground, #cca700); stroke-width: 2; }
.chart .seg.owned { fill: var(--vscode-charts-blue, #3794ff); }
.chart .seg.halo { fill: var(--vscode-charts-orange, #d18616); }
.chart .seg.remote { fill: var(--vscode-charts-lines, #888); opacity: .6; }
.legend { font-size: .9em; color: var(--vscode-descriptionForeground, #999); }
.sw { display: inline-block; width: 10px; height: 10px; margin: 0 3px 0 10px; vertical-align: middle; }
.sw.ok { background: var(--vscode-testing-iconPassed, #73c991); }
.sw.bad { background: var(--vscode-testing-iconFailed, #f14c4c); }
.sw.tolmark { background: var(--vscode-editorWarning-foreground, #cca700); width: 3px; }
.sw.owned { background: var(--vscode-charts-blue, #3794ff); }
.sw.halo { background: var(--vscode-charts-orange, #d18616); }
.sw.remote { background: var(--vscode-charts-lines, #888); opacity: .6; }
.helper, .error { border-left: 3px solid var(--vscode-editorWidget-border, #444); padding: 2px 0 6px 10px; margin: 8px 0; }
.helper.flagged, .error { border-left-color: var(--vscode-editorWarning-foreground, #cca700); }
.helper ul { margin: 2px 0; padding-left: 18px; }
.tag { font-size: .8em; padding: 0 6px; border-radius: 8px; border: 1px solid var(--vscode-editorWidget-border, #444); }
.tag.ok { color: var(--vscode-testing-iconPassed, #73c991); }
.tag.bad { color: var(--vscode-testing-iconFailed, #f14c4c); }
.gap, .warning { color: var(--vscode-editorWarning-foreground, #cca700); }
.error .message { font-family: var(--vscode-editor-font-family, monospace); color: var(--vscode-errorForeground, #f48771); }
.hint { background: var(--vscode-textBlockQuote-background, rgba(127,127,127,.1)); border-left: 3px solid var(--vscode-textBlockQuote-border, #555); padding: 4px 8px; }
ol.frames { padding-left: 22px; font-family: var(--vscode-editor-font-family, monospace); font-size: .92em; }
ol.frames li.lib { opacity: .6; }
ol.frames li.user { font-weight: 600; }
.empty { margin-top: 40px; }
.report-error { color: var(--vscode-errorForeground, #f48771); border-left: 3px solid var(--vscode-errorForeground, #f48771); padding: 2px 8px; margin: 4px 0; }
`;
