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
 * - colours are VS Code theme variables (`--vscode-*`), with fallbacks.
 *
 * Clickable things are elements with `data-action` (the command the page script posts) and `data-args`
 * (a JSON object): openFile {file, line}, goToModule {module, cls, file, line}, declareAdapter
 * {target, qualname, module, function, remedy}, applyBestSpec {target}, exportJson {target}, validate {target}.
 */

import {
  type AttemptJson,
  type HelperDiagnosisJson,
  type OutputVerdictJson,
  type ReportMessage,
  type WorkerErrorJson,
  attemptsOf,
  bestAttempt,
  degenerate,
  failingOutputs,
  freeString,
  headline,
  isRecord,
  textOf,
  toNumber,
  toleranceFor,
  verdictOf,
} from "./report";

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
  const body = message ? renderBody(message, options.trusted !== false) : renderEmpty();
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
<script type="application/json" id="distcheck-state">${jsonForScript(message ?? null)}</script>
<script nonce="${nonce}" src="${escapeHtml(options.scriptUri)}"></script>
</body>
</html>
`;
}

function renderEmpty(): string {
  return `<main class="empty"><h1>Distcheck report</h1>
<p>No report yet. Run <b>Distcheck: Validate distribution</b> from the Command Palette or a CodeLens above a model factory.</p></main>`;
}

function renderBody(message: ReportMessage, trusted: boolean): string {
  const report = message.report;
  const verdict = verdictOf(report);
  const best = bestAttempt(report);
  const target = message.target;
  const parts: string[] = [];
  parts.push(`<main data-verdict="${escapeHtml(verdict)}">`);
  parts.push(`<header class="head">
<h1><span class="badge ${escapeHtml(verdict)}" id="verdict">${escapeHtml(VERDICT_LABEL[verdict] ?? verdict)}</span> <span class="target">${escapeHtml(target)}</span></h1>
<p class="headline" id="headline">${escapeHtml(headline(report))}</p>
${renderNextAction(report.next_action)}
${message.notice ? `<p class="notice">${escapeHtml(message.notice)}</p>` : ""}
${renderMeta(report.meta, report.fix_applied, message.specUri)}
<div class="actions">
${button("Apply best spec", "applyBestSpec", { target }, trusted ? undefined : UNTRUSTED)}
${button("Export report JSON", "exportJson", { target })}
${button("Validate again", "validate", { target }, trusted ? undefined : UNTRUSTED)}
</div>
</header>`);
  parts.push(renderAttempts(attemptsOf(report)));
  if (best) {
    parts.push(renderOutputs(best, report.meta));
  }
  parts.push(renderHelpers(attemptsOf(report), best, target, trusted));
  parts.push(renderLayers(attemptsOf(report), best));
  parts.push(renderErrors(attemptsOf(report)));
  if (best) {
    parts.push(renderPartition(best));
  }
  parts.push(`<section id="spec"><details data-key="spec"><summary><h2>Spec (${escapeHtml(
    report.ok ? "working" : "best tried",
  )})</h2></summary><pre class="json">${escapeHtml(JSON.stringify(report.spec, null, 2))}</pre></details></section>`);
  parts.push("</main>");
  return parts.join("\n");
}

function renderNextAction(nextAction: unknown): string {
  const lines = freeString(nextAction).split("\n").filter((l) => l.trim() !== "");
  if (lines.length <= 1) {
    return "";
  }
  return `<ul class="next-action">${lines
    .slice(1)
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

function renderMeta(meta: unknown, fixApplied: unknown, specUri: string | null): string {
  const m = isRecord(meta) ? meta : {};
  const cells: string[] = [];
  for (const key of ["world_size", "device", "backend"]) {
    if (key in m) {
      cells.push(`${escapeHtml(key.replace("_", " "))} <b>${escapeHtml(fmt(m[key]))}</b>`);
    }
  }
  for (const key of ["atol", "rtol"]) {
    if (key in m) {
      const v = m[key];
      cells.push(`${key} <b>${escapeHtml(isRecord(v) ? JSON.stringify(v) : fmt(v))}</b>`);
    }
  }
  const versions = m.versions;
  if (isRecord(versions)) {
    cells.push(
      Object.entries(versions)
        .map(([k, v]) => `${escapeHtml(k)} ${escapeHtml(freeString(v))}`)
        .join(", "),
    );
  }
  const fix = typeof fixApplied === "string" && fixApplied ? `<p class="fix">Fix applied: ${escapeHtml(fixApplied)}</p>` : "";
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

function renderAttempts(attempts: AttemptJson[]): string {
  if (attempts.length === 0) {
    return `<section id="attempts"><h2>Attempts</h2><p>No attempt ran.</p></section>`;
  }
  const rows = attempts.map((a) => {
    const failing = failingOutputs(a);
    const result = a.error && !failing.length ? "error" : a.passed ? "pass" : "fail";
    const counts = isRecord(a.handler_counts) ? Object.entries(a.handler_counts) : [];
    const handlers = counts.length
      ? `<ul class="handlers">${counts.map(([name, n]) => `<li><code>${escapeHtml(name)}</code> ×${escapeHtml(fmt(n))}</li>`).join("")}</ul>`
      : `<span class="dim">none fired</span>`;
    return `<tr class="${result}">
<td>${escapeHtml(fmt(a.index))}</td>
<td>${a.rule ? `<code>${escapeHtml(a.rule)}</code>` : `<span class="dim">initial</span>`}</td>
<td>${escapeHtml(a.rationale)}${a.reused_run ? ` <span class="dim">(re-consolidated)</span>` : ""}</td>
<td class="result ${result}">${result === "pass" ? "✓ pass" : result === "error" ? "✗ error" : "✗ fail"}</td>
<td>${failing.length ? failing.map((n) => `<code>${escapeHtml(n)}</code>`).join(" ") : `<span class="dim">–</span>`}</td>
<td>${handlers}</td>
</tr>`;
  });
  return `<section id="attempts"><h2>Attempts</h2>
<table class="attempts"><thead><tr><th>#</th><th>rule</th><th>rationale</th><th>result</th><th>failing outputs</th><th>handlers fired</th></tr></thead>
<tbody>${rows.join("\n")}</tbody></table></section>`;
}

// ------------------------------------------------------------------------------------------------
// outputs: abs / rel diff against atol / rtol, log scale

interface Bar {
  label: string;
  value: number | undefined;
  tol: number | undefined;
  ok: boolean;
}

function outputNames(a: AttemptJson): string[] {
  const names = [
    ...Object.keys(isRecord(a.verdicts) ? a.verdicts : {}),
    ...Object.keys(isRecord(a.max_abs_diff) ? a.max_abs_diff : {}),
    ...Object.keys(isRecord(a.max_rel_diff) ? a.max_rel_diff : {}),
  ];
  return [...new Set(names)];
}

function renderOutputs(a: AttemptJson, meta: unknown): string {
  const names = outputNames(a);
  if (names.length === 0) {
    return `<section id="outputs"><h2>Outputs</h2><p>No outputs were compared (attempt ${escapeHtml(fmt(a.index))}).</p></section>`;
  }
  const m = isRecord(meta) ? meta : {};
  const rows: string[] = [];
  const bars: Bar[][] = [];
  for (const name of names) {
    const v: OutputVerdictJson | undefined = isRecord(a.verdicts) ? a.verdicts[name] : undefined;
    const kind = v?.kind ?? "?";
    const absDiff = toNumber(v ? v.max_abs_diff : a.max_abs_diff?.[name]);
    const relDiff = toNumber(v ? v.max_rel_diff : a.max_rel_diff?.[name]);
    const atol = toleranceFor(m.atol, name, kind);
    const rtol = toleranceFor(m.rtol, name, kind);
    const passed = v ? v.passed === true : undefined;
    const status = v ? (v.passed ? v.status : `${v.status} (${fmt(v.n_failing)}/${fmt(v.n_total)})`) : "–";
    const worst = v?.worst_index ? ` worst at [${v.worst_index.map((i) => fmt(i)).join(", ")}]` : "";
    rows.push(`<tr class="${passed === false ? "fail" : passed ? "pass" : ""}"><td><code>${escapeHtml(name)}</code></td><td>${escapeHtml(kind)}</td>
<td>${escapeHtml(fmt(absDiff))}</td><td>${escapeHtml(fmt(atol))}</td><td>${escapeHtml(fmt(relDiff))}</td><td>${escapeHtml(fmt(rtol))}</td>
<td class="result">${escapeHtml(status + (passed === false ? worst : ""))}</td></tr>`);
    bars.push([
      { label: `${name} abs`, value: absDiff, tol: atol, ok: isWithin(absDiff, atol, passed) },
      { label: `${name} rel`, value: relDiff, tol: rtol, ok: isWithin(relDiff, rtol, passed) },
    ]);
  }
  return `<section id="outputs"><h2>Outputs (attempt ${escapeHtml(fmt(a.index))})</h2>
<table class="outputs"><thead><tr><th>output</th><th>kind</th><th>max abs</th><th>atol</th><th>max rel</th><th>rtol</th><th>status</th></tr></thead>
<tbody>${rows.join("\n")}</tbody></table>
${renderDiffChart(bars.flat())}
<p class="legend"><span class="sw ok"></span> within tolerance <span class="sw bad"></span> beyond tolerance <span class="sw tolmark"></span> tolerance (log scale)</p>
</section>`;
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
  let lo = Math.floor(Math.log10(Math.min(...finite))) - 1;
  let hi = Math.ceil(Math.log10(Math.max(...finite)));
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

function helperName(h: HelperDiagnosisJson): string {
  return h.qualname ?? `${h.module}.${h.function}`;
}

function isFlagged(h: HelperDiagnosisJson): boolean {
  return (h.suspected_gap !== null && h.suspected_gap !== undefined) || h.consistency_passed === false;
}

function renderHelpers(attempts: AttemptJson[], best: AttemptJson | undefined, target: string, trusted: boolean): string {
  const latest = new Map<string, { h: HelperDiagnosisJson; attempt: AttemptJson }>();
  for (const a of attempts) {
    for (const h of Array.isArray(a.helper_diagnostics) ? a.helper_diagnostics : []) {
      if (isRecord(h)) {
        const name = helperName(h);
        const prev = latest.get(name);
        if (!prev || a === best || prev.attempt !== best) {
          latest.set(name, { h, attempt: a });
        }
      }
    }
  }
  if (latest.size === 0) {
    return "";
  }
  const cards = [...latest.values()].map(({ h, attempt }) => {
    const name = helperName(h);
    const flagged = isFlagged(h);
    const perRank = isRecord(h.n_calls_per_rank)
      ? Object.entries(h.n_calls_per_rank)
          .map(([r, n]) => `rank ${escapeHtml(r)}: ${escapeHtml(fmt(n))}`)
          .join(", ")
      : "";
    const check =
      h.consistency_check
        ? `<li>check: ${escapeHtml(h.consistency_check)} — <b>${
            h.consistency_passed === true ? "passed" : h.consistency_passed === false ? "failed" : "not run"
          }</b></li>`
        : "";
    const src = isRecord(h.source) && typeof h.source.file === "string"
      ? `<li>defined at ${link(`${h.source.file}:${fmt(h.source.line ?? 1)}`, "openFile", {
          file: h.source.file,
          line: toNumber(h.source.line) ?? 1,
        })}</li>`
      : "";
    const notes = (Array.isArray(h.divergence_notes) ? h.divergence_notes : [])
      .map((n) => `<li>${escapeHtml(n)}</li>`)
      .join("");
    const remedy = h.likely_remedy
      ? `<div class="remedy">remedy (a <code>third_party_helpers</code> entry):<pre class="json">${escapeHtml(
          JSON.stringify(h.likely_remedy, null, 2),
        )}</pre></div>`
      : "";
    const canDeclare = flagged && !h.already_wrapped && isRecord(h.likely_remedy);
    const declare = canDeclare
      ? button(
          "Declare adapter",
          "declareAdapter",
          { target, qualname: name, module: h.module, function: h.function, remedy: h.likely_remedy },
          trusted ? undefined : UNTRUSTED,
        )
      : "";
    const state = h.already_wrapped ? `<span class="tag ok">adapter declared</span>` : flagged ? `<span class="tag bad">flagged</span>` : `<span class="tag">ok</span>`;
    return `<div class="helper ${flagged ? "flagged" : ""}" data-helper="${escapeHtml(name)}">
<h3><code>${escapeHtml(name)}</code> ${state} <span class="dim">(attempt ${escapeHtml(fmt(attempt.index))})</span></h3>
<ul>
<li>pattern <b>${escapeHtml(h.pattern)}</b> (confidence ${escapeHtml(fmt(h.pattern_confidence))}); calls: reference ${escapeHtml(fmt(h.n_calls_ref))}${perRank ? `; ${perRank}` : ""}</li>
${check}
${h.suspected_gap ? `<li class="gap">${escapeHtml(h.suspected_gap)}</li>` : ""}
${src}
${notes}
</ul>
${remedy}
${declare}
</div>`;
  });
  return `<section id="helpers"><h2>Third-party helpers</h2>${cards.join("\n")}</section>`;
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
export function firstDivergentModule(ld: unknown): ModuleLocation | undefined {
  if (!isRecord(ld)) {
    return undefined;
  }
  const inner = isRecord(ld.first_divergent) ? ld.first_divergent : undefined;
  const src = inner ?? ld;
  const module = freeString(inner ? src.module : ld.first_module);
  if (!module) {
    return undefined;
  }
  return {
    module,
    cls: freeString(src.class ?? src.cls ?? ""),
    file: typeof src.file === "string" ? src.file : undefined,
    line: toNumber(src.line),
    relDiff: toNumber(src.rel_diff ?? src.max_rel_diff),
    absDiff: toNumber(src.abs_diff ?? src.max_abs_diff),
  };
}

function renderLayers(attempts: AttemptJson[], best: AttemptJson | undefined): string {
  const ordered = best ? [best, ...attempts.filter((a) => a !== best).reverse()] : [...attempts].reverse();
  for (const a of ordered) {
    const loc = firstDivergentModule(a.layer_divergence);
    if (!loc) {
      continue;
    }
    const where = loc.file ? ` (${loc.file}:${fmt(loc.line ?? 1)})` : "";
    const diffs = [
      loc.relDiff !== undefined ? `rel diff ${fmt(loc.relDiff)}` : "",
      loc.absDiff !== undefined ? `abs diff ${fmt(loc.absDiff)}` : "",
    ]
      .filter(Boolean)
      .join(", ");
    const ld = a.layer_divergence ?? {};
    const checked = "checked" in ld ? ` <span class="dim">(${escapeHtml(fmt(ld.checked))} modules checked)</span>` : "";
    return `<section id="layers"><h2>Layer divergence (attempt ${escapeHtml(fmt(a.index))})</h2>
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

function renderError(e: WorkerErrorJson, a: AttemptJson): string {
  const where = e.rank === null || e.rank === undefined ? "reference / parent" : `rank ${fmt(e.rank)}`;
  const frames = (Array.isArray(e.frames) ? e.frames : []).filter(isRecord);
  const frameItems = frames
    .map((f) => {
      const lib = isLibraryFrame(typeof f.file === "string" ? f.file : "");
      return `<li class="${lib ? "lib" : "user"}">${link(`${f.file}:${fmt(f.line)}`, "openFile", {
        file: f.file,
        line: toNumber(f.line) ?? 1,
      })} in <code>${escapeHtml(f.function)}</code></li>`;
    })
    .join("\n");
  const raw = e.traceback
    ? `<details data-key="traceback-${escapeHtml(fmt(a.index))}"><summary>raw traceback</summary><pre>${escapeHtml(e.traceback)}</pre></details>`
    : "";
  return `<div class="error">
<h3>${escapeHtml(e.type)} on ${escapeHtml(where)} during ${escapeHtml(e.phase)} <span class="dim">(attempt ${escapeHtml(fmt(a.index))})</span></h3>
<p class="message">${escapeHtml(e.message)}</p>
${e.hint ? `<p class="hint">${escapeHtml(e.hint)}</p>` : ""}
${frameItems ? `<ol class="frames">${frameItems}</ol>` : ""}
${raw}
</div>`;
}

function renderErrors(attempts: AttemptJson[]): string {
  const errors = attempts.filter((a) => isRecord(a.error));
  if (errors.length === 0) {
    return "";
  }
  return `<section id="errors"><h2>Worker error</h2>${errors.map((a) => renderError(a.error as WorkerErrorJson, a)).join("\n")}</section>`;
}

// ------------------------------------------------------------------------------------------------
// partition composition

export interface RankComposition {
  rank: string;
  owned: number;
  halo: number;
  remote: number;
}

export function partitionComposition(health: unknown): RankComposition[] {
  if (!isRecord(health) || !isRecord(health.per_rank)) {
    return [];
  }
  return Object.entries(health.per_rank)
    .map(([rank, stats]) => {
      const s = isRecord(stats) ? stats : {};
      return {
        rank,
        owned: toNumber(s.owned) ?? 0,
        halo: toNumber(s.halo) ?? 0,
        remote: toNumber(s.remote) ?? 0,
      };
    })
    .sort((a, b) => Number(a.rank) - Number(b.rank) || a.rank.localeCompare(b.rank));
}

function renderPartition(a: AttemptJson): string {
  const ranks = partitionComposition(a.partition_health);
  const messages = degenerate(a);
  const hc = isRecord(a.halo_completeness) ? a.halo_completeness : {};
  const hcText = freeString(hc.interpretation ?? hc.message ?? "");
  const incomplete = hc.complete === false || hc.matches === false;
  if (ranks.length === 0 && messages.length === 0 && !hcText) {
    return "";
  }
  const parts: string[] = [];
  if (ranks.length) {
    const total = Math.max(...ranks.map((r) => r.owned + r.halo + r.remote), 1);
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
      svg.push(`<text class="value" x="${labelW + plotW + 6}" y="${y + 15}">${escapeHtml(
        `${fmt(r.owned)} / ${fmt(r.halo)} / ${fmt(r.remote)}`,
      )}</text>`);
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
  return `<section id="partition"><h2>Partition (attempt ${escapeHtml(fmt(a.index))})</h2>${parts.join("\n")}</section>`;
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
`;
