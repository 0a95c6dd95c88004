/**
 * Report JSON → the report panel's HTML. Pure (no `vscode` import) so unit tests render fixtures directly.
 *
 * Safety rules, all enforced here:
 * - all markup is built with `reportMarkup.html`, which escapes every interpolated value (text and
 *   attribute values alike) unless it is markup `html` made itself (`SafeHtml`): a report string cannot
 *   reach the page unescaped, and the section renderers' `SafeHtml` return type keeps plain strings out;
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
 * (a JSON object): openFile {file, line}, goToModule {module, cls, file?, line?}, declareAdapter
 * {target, qualname, module, function, remedy}, applyBestSpec {target}, exportJson {target}, validate {target}.
 */

import { type AttemptJson, type ReportJson, type ReportMessage, bestAttempt, freeString, headline, isRecord, stateOf, textOf, toNumber, verdictOf } from "./report";
import { Problems, Reader, capped } from "./reportCheck";
import { renderErrors, renderHelpers, renderLayers, renderPartition } from "./reportDetails";
import { renderAtomErrors, renderChecked, renderDisagreements, renderSuspicious, renderUnrouted } from "./reportEvidence";
import {
  NOTHING,
  type SafeHtml,
  UNTRUSTED,
  VERDICT_LABEL,
  button,
  fmt,
  html,
  insertBeforeClosingTag,
  joinHtml,
  jsonForScript,
  link,
  unescaped,
} from "./reportMarkup";
import { type Obj, renderActions, renderAttempts, renderBadge, renderOutputs } from "./reportSections";
import { STYLE } from "./reportStyle";

export { type SafeHtml, escapeHtml, fmt, html, joinHtml, jsonForScript } from "./reportMarkup";
export { logDomain } from "./reportSections";
export { firstDivergentModule, isLibraryFrame, partitionComposition, type ModuleLocation, type RankComposition } from "./reportDetails";

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

// ------------------------------------------------------------------------------------------------
// page

/** The whole page for `message` (or the empty page); total: a malformed report still renders. */
export function renderReportHtml(message: ReportMessage | undefined, options: RenderOptions): string {
  const body = message ? renderBodySafely(message, options.trusted !== false) : renderEmpty();
  const title = message ? `Distcheck: ${message.target}` : "Distcheck report";
  return renderPage(title, body, message, options);
}

/**
 * The page for a target whose validation was cancelled before it had any report to show: says so and
 * offers Validate again (disabled, with the reason, in an untrusted workspace).
 */
export function renderCancelledHtml(target: string, options: RenderOptions): string {
  const untrusted = options.trusted === false ? UNTRUSTED : undefined;
  const body = html`<main data-verdict="cancelled"><header class="head">
<h1>${renderBadge("error", { cancelled: true })} <span class="target">${target}</span></h1>
<p class="notice" id="cancelled">The last validation of ${target} was cancelled before it reported, so there is no verdict yet. Validate again for one.</p>
<div class="actions">${button("Validate again", "validate", { target }, untrusted)}</div>
</header></main>`;
  return renderPage(`Distcheck: ${target}`, body, undefined, options);
}

/** The page around `body`; `message` is embedded for the page script's state restore. */
function renderPage(title: string, body: SafeHtml, message: ReportMessage | undefined, options: RenderOptions): string {
  const nonce = options.nonce;
  const csp = [
    "default-src 'none'",
    `img-src ${options.cspSource} data:`,
    `style-src 'nonce-${options.nonce}'`,
    `script-src 'nonce-${options.nonce}'`,
    `font-src ${options.cspSource}`,
  ].join("; ");
  return html`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>${title}</title>
<style nonce="${nonce}">${unescaped(STYLE)}</style>
</head>
<body>
${body}
<script type="application/json" id="distcheck-state">${unescaped(stateForScript(message))}</script>
<script nonce="${nonce}" src="${options.scriptUri}"></script>
</body>
</html>
`.toString();
}

/** The body, or — should a part outside every section throw — one error line instead of a blank page. */
function renderBodySafely(message: ReportMessage, trusted: boolean): SafeHtml {
  try {
    return renderBody(message, trusted);
  } catch (error) {
    const p = new Problems();
    p.failed("the report", error);
    return html`<main data-verdict="error"><h1><span class="badge error" id="verdict">${VERDICT_LABEL.error}</span></h1>
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

function renderEmpty(): SafeHtml {
  return html`<main class="empty"><h1>Distcheck report</h1>
<p>No report yet. Run <b>Distcheck: Validate distribution</b> from the Command Palette or a CodeLens above a model factory.</p></main>`;
}

/** The error lines of one section: what could not be shown, and which lists were cut. */
function problemLines(p: Problems): SafeHtml {
  const shown = p.lines.slice(0, 8).map((l) => html`<p class="report-error">this part of the report could not be shown: ${l}</p>`);
  if (p.lines.length > 8) {
    shown.push(html`<p class="report-error">… and ${p.lines.length - 8} more malformed fields in this part</p>`);
  }
  for (const note of p.notes.slice(0, 8)) {
    shown.push(html`<p class="report-note dim">${note}</p>`);
  }
  return joinHtml(shown, "\n");
}

/**
 * One section, rendered so that nothing in it can blank the page: the section's problems (and any
 * exception its renderer throws) become error lines inside it, and `all` collects them for the header.
 */
function guarded(id: string, title: string, all: Problems, render: (p: Problems) => SafeHtml): SafeHtml {
  const p = new Problems();
  let section: SafeHtml;
  try {
    section = render(p);
  } catch (error) {
    p.failed(`the ${title.toLowerCase()} section`, error);
    section = NOTHING;
  }
  all.lines.push(...p.lines);
  if (p.empty) {
    return section;
  }
  const lines = problemLines(p);
  return (
    insertBeforeClosingTag(section, ["</section>", "</header>"], html`${lines}\n`) ??
    html`${section}<section id="${id}"><h2>${title}</h2>${lines}</section>`
  );
}

function renderBody(message: ReportMessage, trusted: boolean): SafeHtml {
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
  const state = stateOf(view);
  const standing = { cancelled: root.bool("cancelled") === true, stale: root.str("stale") };
  const stale = standing.stale;
  const unsaved = (root.list("unsaved") ?? []).filter((u): u is string => typeof u === "string").map((u) => u.replace(/^.*\//, ""));
  const head = guarded("summary", "Summary", all, (p) => {
    p.lines.push(...top.lines);
    const hr = new Reader(isRecord(raw) ? raw : {}, "report", p);
    const nextAction = hr.str("next_action", { required: true }) ?? "";
    const fix = hr.str("fix_applied");
    hr.bool("ok");
    hr.count("best_attempt");
    hr.str("verdict");
    hr.str("state");
    return html`<header class="head">
<h1>${renderBadge(state, standing)} <span class="target">${target}</span></h1>
${standing.cancelled ? html`<p class="notice" id="cancelled">The last validation of ${target} was cancelled before it reported: what follows is the report of the run before it. Validate again for a verdict.</p>` : NOTHING}
${stale && !standing.cancelled ? html`<p class="notice" id="stale">${stale} changed after this run: the verdict may no longer hold; validate again.</p>` : NOTHING}
${unsaved.length ? html`<p class="notice" id="unsaved">Validated the saved files: unsaved edits in ${unsaved.join(", ")} were not validated. Save and validate again.</p>` : NOTHING}
<p class="headline" id="headline">${headline({ ...view, next_action: nextAction })}</p>
${renderNextAction(nextAction)}
${notice ? html`<p class="notice">${notice}</p>` : NOTHING}
${renderMeta(hr.rec("meta", { required: true }), fix, specUri)}
${renderActions(state, standing, target, trusted ? undefined : UNTRUSTED)}
</header>`;
  });
  const at = (a: AttemptJson): string => paths.get(a) ?? "report.attempts[?]";
  const meta = isRecord(report.meta) ? report.meta : {};
  const parts: SafeHtml[] = [];
  parts.push(
    guarded("attempts", "Attempts", all, (p) => {
      p.lines.push(...listed.lines);
      return renderAttempts(attempts, p, at);
    }),
  );
  if (best) {
    parts.push(guarded("outputs", "Outputs", all, (p) => renderOutputs(new Reader(best as unknown as Obj, at(best), p), meta)));
  }
  parts.push(guarded("atom-errors", "Per-atom errors", all, (p) => renderAtomErrors(attempts, best, p, at)));
  parts.push(guarded("unrouted", "Unrouted aggregations", all, (p) => renderUnrouted(attempts, best, p, at)));
  parts.push(guarded("suspicious", "Suspicious outputs", all, (p) => renderSuspicious(attempts, best, report.roundoff, p, at)));
  parts.push(guarded("disagreements", "Ranks that disagree", all, (p) => renderDisagreements(attempts, best, p, at)));
  parts.push(guarded("checked", "What was checked", all, (p) => renderChecked(best, meta, report.receptive_field, p, at)));
  parts.push(guarded("helpers", "Third-party helpers", all, (p) => renderHelpers(attempts, best, target, trusted, p, at)));
  parts.push(guarded("layers", "Layer divergence", all, (p) => renderLayers(attempts, best, p, at)));
  parts.push(guarded("errors", "Worker error", all, (p) => renderErrors(attempts, p, at)));
  if (best) {
    parts.push(guarded("partition", "Partition", all, (p) => renderPartition(new Reader(best as unknown as Obj, at(best), p))));
  }
  parts.push(
    guarded("spec", "Spec", all, () => {
      const spec = JSON.stringify(report.spec ?? null, null, 2) ?? "null";
      return html`<section id="spec"><details data-key="spec"><summary><h2>Spec (${
        report.ok === true ? "working" : "best tried"
      })</h2></summary><pre class="json">${spec}</pre></details></section>`;
    }),
  );
  const warning = all.lines.length
    ? html`<p class="report-error" id="malformed">Parts of this report are malformed (${`${all.lines.length} field${
        all.lines.length === 1 ? "" : "s"
      }`}) and are marked below; the rest is shown. A report from another distcheck version can do this: run Validate again for a fresh one.</p>`
    : NOTHING;
  return joinHtml([html`<main data-verdict="${verdict}">`, head, warning, ...parts, html`</main>`], "\n");
}

function renderNextAction(nextAction: string): SafeHtml {
  const lines = freeString(nextAction).split("\n").filter((l) => l.trim() !== "");
  if (lines.length <= 1) {
    return NOTHING;
  }
  return html`<ul class="next-action">${capped(lines.slice(1), "report.next_action", new Problems()).map((l) => html`<li>${l}</li>`)}</ul>`;
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

function renderMeta(m: Reader | undefined, fixApplied: string | undefined, specUri: string | null): SafeHtml {
  const cells: SafeHtml[] = [];
  if (m) {
    for (const key of ["world_size", "device", "backend"]) {
      const v = m.raw(key);
      if (v === undefined) {
        continue;
      }
      const ok = key === "world_size" ? m.count(key) !== undefined : m.str(key) !== undefined;
      if (ok) {
        cells.push(html`${key.replace("_", " ")} <b>${fmt(v)}</b>`);
      }
    }
    for (const key of ["atol", "rtol"]) {
      const v = m.raw(key);
      if (v === undefined) {
        continue;
      }
      if (isRecord(v)) {
        const bad = Object.entries(v).filter(([, t]) => toNumber(t) === undefined);
        for (const [name, t] of bad.slice(0, 3)) {
          m.problems.wrong(`${m.pathOf(key)}[${JSON.stringify(name)}]`, t, "a number");
        }
        cells.push(html`${key} <b>${JSON.stringify(v)}</b>`);
      } else if (m.num(key) !== undefined) {
        cells.push(html`${key} <b>${fmt(v)}</b>`);
      }
    }
    const versions = m.entries("versions");
    if (versions.length) {
      cells.push(joinHtml(versions.map(([k, v]) => html`${k} ${freeString(v)}`), ", "));
    }
  }
  const fix = fixApplied ? html`<p class="fix">Fix applied: ${fixApplied}</p>` : NOTHING;
  const specPath = specUri ? fileUriToPath(specUri) : undefined;
  const spec = specUri
    ? html`<p class="spec-uri">Spec file: ${
        specPath ? link(specPath, "openFile", { file: specPath, line: 1 }, "Open the spec file") : html`<code>${specUri}</code>`
      }</p>`
    : NOTHING;
  return html`<p class="meta">${joinHtml(cells, " · ")}</p>${fix}${spec}`;
}

