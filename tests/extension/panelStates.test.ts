// The panel's cancelled state, attempt numbering, class names that style only their own elements and
// the partition chart's width (issue 16 items 1 and 6).
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type ReportJson, type ReportMessage, attemptNumber, attemptsOf, keepStanding } from "../../extension/src/report";
import { renderCancelledHtml, renderReportHtml } from "../../extension/src/reportHtml";
import { STYLE } from "../../extension/src/reportStyle";
import { FIXTURES, loadReport, message } from "./fixtures";

const OPTIONS = { nonce: "N0NCE", cspSource: "vscode-webview://abc", scriptUri: "vscode-webview://abc/report.js" };

function withState(name: string, state: ReportJson["state"]): ReportJson {
  return { ...loadReport(name), state };
}

function render(report: ReportJson, extra: Partial<ReportMessage> = {}, trusted = true): string {
  return renderReportHtml({ target: "m", specUri: null, report, ...extra }, { ...OPTIONS, trusted });
}

function buttons(html: string): string[] {
  const actions = /<div class="actions">([\s\S]*?)<\/div>/.exec(html)?.[1] ?? "";
  return [...actions.matchAll(/data-action="(\w+)"/g)].map((m) => m[1] ?? "");
}

function section(html: string, id: string): string {
  const start = html.indexOf(`<section id="${id}">`);
  return start < 0 ? "" : html.slice(start, html.indexOf("</section>", start));
}

const STATES = [
  ["helper_model_autofix", "passed_after_fix"],
  ["helper_model_autofix", "passed"],
  ["helper_model_failed", "failed"],
  ["degenerate", "inconclusive"],
  ["worker_error", "error"],
] as const;

describe("the panel after a cancelled validation", () => {
  it("says the last validation was cancelled and leads with Validate again, whatever the report before it said", () => {
    for (const [name, state] of STATES) {
      const html = render(withState(name, state), { cancelled: true });
      assert.match(html, /<span class="badge cancelled" id="verdict"[^>]*>⊘ cancelled — validate again<\/span>/, state);
      assert.match(html, /<p class="notice" id="cancelled">The last validation of m was cancelled/, state);
      assert.deepEqual(buttons(html), ["validate", "exportJson"], state);
      assert.doesNotMatch(html, /id="verdict">(✓ passed|💡 fix available|✗ failed|⚠ inconclusive|✗ error)/, state);
    }
  });

  it("cancelled wins over stale (the cancel came last), and without the mark the report's own state shows", () => {
    const html = render(withState("helper_model_autofix", "passed_after_fix"), { cancelled: true, stale: "m.py" });
    assert.match(html, /class="badge cancelled"/);
    assert.doesNotMatch(html, /id="stale"/);
    for (const cancelled of [false, null, undefined]) {
      const plain = render(withState("helper_model_autofix", "passed_after_fix"), { cancelled });
      assert.doesNotMatch(plain, /id="cancelled"|class="badge cancelled"/);
      assert.deepEqual(buttons(plain), ["applyBestSpec", "validate", "exportJson"]);
    }
  });

  it("a cancelled run with no report to show gets its own page with Validate again (disabled when untrusted)", () => {
    const html = renderCancelledHtml("water<&>", OPTIONS);
    assert.match(html, /class="badge cancelled"/);
    assert.match(html, /The last validation of water&lt;&amp;&gt; was cancelled before it reported, so there is no verdict yet/);
    assert.deepEqual(buttons(html), ["validate"]);
    assert.match(html, /data-args="\{&quot;target&quot;:&quot;water&lt;&amp;&gt;&quot;\}"/);
    assert.doesNotMatch(html, /data-action="validate"[^>]*disabled/);
    assert.match(renderCancelledHtml("w", { ...OPTIONS, trusted: false }), /data-action="validate"[^>]*disabled/);
    assert.match(html, /<script type="application\/json" id="distcheck-state">null<\/script>/);
  });

  it("showing the same report again keeps its marks; a new report or another target's does not", () => {
    const shown: ReportMessage = { ...message("helper_model_autofix", "m"), cancelled: true, stale: "m.py" };
    const again: ReportMessage = { target: "m", specUri: null, report: shown.report };
    assert.deepEqual([keepStanding(again, shown).cancelled, keepStanding(again, shown).stale], [true, "m.py"]);
    const fresh = message("helper_model_autofix", "m");
    assert.deepEqual([keepStanding(fresh, shown).cancelled, keepStanding(fresh, shown).stale], [undefined, undefined]);
    const other: ReportMessage = { target: "other", specUri: null, report: shown.report };
    assert.equal(keepStanding(other, shown).cancelled, undefined);
    assert.equal(keepStanding(again, undefined), again);
  });
});

describe("attempt numbers", () => {
  it("count from 1 as the diagnostics, the progress and the report's text do; the JSON index from 0", () => {
    assert.deepEqual([0, 1, 7].map(attemptNumber), ["1", "2", "8"]);
    for (const bad of [-1, 1.5, "0", null, undefined, Number.NaN]) {
      assert.equal(attemptNumber(bad), "?", String(bad));
    }
  });

  /** Every attempt number the panel itself writes (the server's next_action text excluded). */
  function panelNumbers(html: string): number[] {
    const body = html.slice(html.indexOf('<section id="attempts">'), html.indexOf('<section id="spec">'));
    const out = [...body.matchAll(/attempt (\d+)/g)].map((m) => Number(m[1]));
    const table = section(html, "attempts");
    out.push(...[...table.matchAll(/<tr class="\w+">\n<td>(\d+)<\/td>/g)].map((m) => Number(m[1])));
    return out;
  }

  it("every section of every report numbers its attempts 1..n, the best attempt as best_attempt + 1", () => {
    for (const name of FIXTURES) {
      const report = loadReport(name);
      const n = attemptsOf(report).length;
      const html = renderReportHtml(message(name), OPTIONS);
      const numbers = panelNumbers(html);
      assert.ok(numbers.length > 0, name);
      for (const k of numbers) {
        assert.ok(k >= 1 && k <= n, `${name}: attempt ${k} of ${n}`);
      }
      const table = [...section(html, "attempts").matchAll(/<tr class="\w+">\n<td>(\d+)<\/td>/g)].map((m) => Number(m[1]));
      assert.deepEqual(table, Array.from({ length: n }, (_, i) => i + 1), name);
      const best = report.best_attempt;
      if (typeof best === "number" && section(html, "outputs")) {
        assert.match(section(html, "outputs"), new RegExp(`\\(attempt ${best + 1}\\)`), name);
      }
      if (section(html, "partition") && typeof best === "number") {
        assert.match(section(html, "partition"), new RegExp(`<h2>Partition \\(attempt ${best + 1}\\)</h2>`), name);
      }
    }
  });

  it("the worker-error card, the helper cards and the evidence tables follow the same rule", () => {
    assert.match(section(render(loadReport("worker_error")), "errors"), /<span class="dim">\(attempt 1\)<\/span><\/h3>/);
    const helpers = section(render(loadReport("helper_model_autofix")), "helpers");
    assert.match(helpers, /\(attempt 2\)/);
    assert.doesNotMatch(helpers, /\(attempt 0\)/);
    const unrouted = section(render(loadReport("unrouted_python")), "unrouted");
    assert.match(unrouted, /<td>1<\/td><td>/);
  });
});

/** The class-only rules of the stylesheet: selectors whose subject is one bare class (`.x`, `a .x`). */
function bareClassRules(css: string): Set<string> {
  const out = new Set<string>();
  for (const rule of css.matchAll(/([^{}]+)\{[^}]*\}/g)) {
    for (const selector of (rule[1] ?? "").split(",")) {
      const subject = selector.trim().split(/\s+/).pop() ?? "";
      const m = /^\.([\w-]+)(?::[\w-]+)?$/.exec(subject);
      if (m) {
        out.add(m[1] ?? "");
      }
    }
  }
  return out;
}

describe("class names style only their own elements", () => {
  const bare = bareClassRules(STYLE);

  it("no element carries two classes that each have a rule of their own (a badge is not a card)", () => {
    const pages = [
      ...FIXTURES.map((name) => renderReportHtml(message(name), OPTIONS)),
      ...STATES.map(([name, state]) => render(withState(name, state))),
      render(withState("worker_error", "error"), { stale: "m.py" }),
      render(withState("worker_error", "error"), { cancelled: true }),
      renderCancelledHtml("m", OPTIONS),
    ];
    for (const html of pages) {
      for (const m of html.matchAll(/class="([^"]*)"/g)) {
        const styled = (m[1] ?? "").split(/\s+/).filter((c) => bare.has(c));
        assert.ok(styled.length <= 1, `class="${m[1]}" is styled by ${styled.map((c) => `.${c}`).join(" and ")}`);
      }
    }
  });

  it("the error badge and the worker-error card have their own names, each styled", () => {
    const html = render(withState("worker_error", "error"));
    assert.match(html, /<span class="badge error" id="verdict">/);
    assert.match(html, /<div class="worker-error">/);
    assert.ok(bare.has("worker-error") && bare.has("badge"));
    assert.ok(!bare.has("error"), "a bare .error rule would style the error badge and the attempts' error rows too");
  });
});

describe("the partition chart", () => {
  const html = render(loadReport("helper_model_failed"));
  const chart = section(html, "partition");

  it("takes the panel's width: no fixed pixel width, bars in percent of the plot", () => {
    const svg = /<svg class="partition-chart"[^>]*>/.exec(chart)?.[0] ?? "";
    assert.match(svg, /width="100%"/);
    assert.doesNotMatch(svg, /viewBox/);
    const widths = [...chart.matchAll(/<rect class="seg \w+" x="([\d.]+)%" y="(\d+)" width="([\d.]+)%"/g)];
    assert.ok(widths.length >= 2);
    const perRow = new Map<string, number>();
    for (const w of widths) {
      perRow.set(w[2] ?? "", (perRow.get(w[2] ?? "") ?? 0) + Number(w[3]));
    }
    const totals = [...perRow.values()];
    assert.ok(Math.abs(Math.max(...totals) - 100) < 0.05, String(totals));
    assert.ok(totals.every((t) => t <= 100.05));
  });

  it("renders as a block under its heading, its labels and counts in their own columns of the same rows", () => {
    assert.match(STYLE, /svg\.partition-chart \{[^}]*display: block/);
    assert.match(STYLE, /\.partition-grid \{[^}]*display: grid/);
    assert.match(chart, /<h2>Partition \(attempt 1\)<\/h2><div class="partition-grid">/);
    assert.match(chart, /<div class="partition-labels"><div class="partition-row">rank 0<\/div><div class="partition-row">rank 1<\/div><\/div>/);
    assert.match(chart, /<div class="partition-values"><div class="partition-row">160 \/ 64 \/ 96<\/div>/);
  });
});
