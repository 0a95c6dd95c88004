import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type ReportMessage, headline, stateOf, summarize } from "../../extension/src/report";
import {
  escapeHtml,
  fileUriToPath,
  firstDivergentModule,
  fmt,
  isLibraryFrame,
  jsonForScript,
  logDomain,
  partitionComposition,
  renderReportHtml,
} from "../../extension/src/reportHtml";
import { STATE_LABEL } from "../../extension/src/reportSections";
import { FIXTURES, loadReport, message } from "./fixtures";

const OPTIONS = { nonce: "TESTNONCE123", cspSource: "vscode-webview://abc", scriptUri: "vscode-webview://abc/report.js" };

/** Tag names the renderer is allowed to emit; anything else in the output came from report data. */
const ALLOWED_TAGS = new Set(
  "!doctype html head meta title style body main header h1 h2 h3 p span b code ul ol li div button a table thead tbody tr th td svg line rect text title figure figcaption g polyline circle section details summary pre script".split(
    " ",
  ),
);

const ALLOWED_ATTRIBUTES = new Set(
  "html lang charset http-equiv content name id class type nonce src href title role aria-label width height viewBox xmlns x y x1 y1 x2 y2 text-anchor data-action data-args data-verdict data-key data-helper disabled data-rank fill fill-opacity stroke stroke-width points cx cy r font-size".split(
    " ",
  ),
);

function tagsOf(html: string): string[] {
  return [...html.matchAll(/<\/?([!a-zA-Z][\w:-]*)/g)].map((m) => (m[1] ?? "").toLowerCase());
}

/**
 * Every element of the page with its attribute names, read strictly: each `<` must open a well-formed
 * tag whose attribute values are double-quoted, so text that escaped escaping shows up as a failure.
 */
function elements(html: string): Array<{ tag: string; attributes: string[] }> {
  const out: Array<{ tag: string; attributes: string[] }> = [];
  const tag = /^<(\/?)([!a-zA-Z][\w:-]*)((?:\s+[^\s=>"'/]+(?:="[^"<]*")?)*)\s*\/?>/;
  let i = html.indexOf("<");
  while (i >= 0) {
    const m = tag.exec(html.slice(i));
    assert.ok(m, `malformed markup at ${JSON.stringify(html.slice(i, i + 60))}`);
    const attributes = [...(m[3] ?? "").matchAll(/\s+([^\s=>"'/]+)(?:="[^"]*")?/g)].map((a) => a[1] ?? "");
    out.push({ tag: (m[2] ?? "").toLowerCase(), attributes });
    i = html.indexOf("<", i + m[0].length);
  }
  return out;
}

function dataArgs(html: string, actionName: string): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  const re = new RegExp(`data-action="${actionName}" data-args="([^"]*)"`, "g");
  for (const m of html.matchAll(re)) {
    const raw = (m[1] ?? "").replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&#96;/g, "`").replace(/&amp;/g, "&");
    out.push(JSON.parse(raw) as Record<string, unknown>);
  }
  return out;
}

describe("renderReportHtml on real reports", () => {
  for (const name of FIXTURES) {
    it(`renders ${name} with only known tags, a strict CSP and no remote content`, () => {
      const html = renderReportHtml(message(name), OPTIONS);
      for (const el of elements(html)) {
        assert.ok(ALLOWED_TAGS.has(el.tag), `unexpected tag <${el.tag}>`);
        for (const a of el.attributes) {
          assert.ok(ALLOWED_ATTRIBUTES.has(a), `unexpected attribute ${a} on <${el.tag}>`);
        }
      }
      assert.match(html, /<meta http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;; /);
      assert.match(html, /script-src &#39;nonce-TESTNONCE123&#39;/);
      assert.match(html, /style-src &#39;nonce-TESTNONCE123&#39;/);
      assert.ok(!/unsafe-inline|unsafe-eval/.test(html));
      assert.ok(!/(src|href)="https?:/i.test(html), "no remote src/href");
      assert.ok(!/@import|url\(/i.test(html), "no CSS imports or remote urls");
      const scripts = [...html.matchAll(/<script\b([^>]*)>/g)].map((m) => m[1] ?? "");
      for (const attrs of scripts) {
        assert.ok(attrs.includes('nonce="TESTNONCE123"') || attrs.includes('type="application/json"'), attrs);
      }
      assert.ok(!/\son[a-z]+\s*=/i.test(html.replace(/<script type="application\/json"[\s\S]*?<\/script>/, "")), "no inline handlers");
      assert.match(html, /var\(--vscode-/);
    });
  }

  it("shows the verdict, next action, attempts, outputs chart, helper and layer divergence of a failed run", () => {
    const html = renderReportHtml(message("helper_model_failed", "helper_model"), OPTIONS);
    assert.match(html, /id="verdict">✗ failed</);
    // the headline is the first line of the report's next_action (the engine's words, whatever they are)
    const first = headline(loadReport("helper_model_failed"));
    assert.ok(first, "the fixture's next_action has a first line");
    assert.ok(html.includes(`<p class="headline" id="headline">${escapeHtml(first)}</p>`), first);
    assert.match(html, /<div class="helper flagged" data-helper="examples\.thirdparty\.nbops\.mol_sum">/);
    assert.match(html, /<table class="attempts">/);
    assert.match(html, /halo_scatter_correction\[index_add\]<\/code> ×4/);
    assert.match(html, /class="chart diff-chart"/);
    for (const output of ["energy", "forces", "charges"]) {
      assert.match(html, new RegExp(`>${output} abs<`));
      assert.match(html, new RegExp(`>${output} rel<`));
    }
    assert.match(html, /class="bar bad"/);
    assert.match(html, /class="tol"/);
    assert.match(html, /<svg class="partition-chart"/);
    assert.match(html, /class="seg owned"/);
    assert.match(html, /class="seg halo"/);
    assert.match(html, /class="seg remote"/);
    assert.match(html, /160 \/ 64 \/ 96/);
    const declare = dataArgs(html, "declareAdapter");
    assert.equal(declare.length, 1);
    assert.equal(declare[0]?.qualname, "examples.thirdparty.nbops.mol_sum");
    assert.equal(declare[0]?.target, "helper_model");
    assert.deepEqual(declare[0]?.remedy, {
      kind: "reduction",
      module_path: "examples.thirdparty.nbops",
      attr_name: "mol_sum",
      atom_arg: 0,
      atom_dim: 0,
    });
    const goTo = dataArgs(html, "goToModule");
    assert.equal(goTo[0]?.module, "readout");
    assert.equal(goTo[0]?.cls, "examples.helper_readout.MoleculeEnergyReadout");
    const open = dataArgs(html, "openFile");
    assert.ok(open.some((a) => a.file === "/work/main/examples/thirdparty/nbops.py" && a.line === 34));
    assert.deepEqual(dataArgs(html, "applyBestSpec"), [], "no attempt passed: nothing proven to apply");
    assert.deepEqual(dataArgs(html, "exportJson"), [{ target: "helper_model" }]);
  });

  it("shows a passing auto-fixed run without a Declare adapter button", () => {
    const report = loadReport("helper_model_autofix");
    const html = renderReportHtml(message("helper_model_autofix", "helper_model"), OPTIONS);
    // passed only after auto-fix: its own state and badge, "Apply best spec" the primary button
    assert.equal(stateOf(report), "passed_after_fix");
    assert.ok(html.includes(`<span class="badge passed_after_fix" id="verdict">${escapeHtml(STATE_LABEL.passed_after_fix)}</span>`));
    assert.equal(/data-action="(\w+)"/.exec(html.slice(html.indexOf('<div class="actions">')))?.[1], "applyBestSpec");
    assert.match(html, /Fix applied: /);
    assert.match(html, /adapter declared/);
    assert.equal(dataArgs(html, "declareAdapter").length, 0);
    assert.ok(!html.includes('class="bar bad"'));
  });

  it("makes every traceback frame of a worker error clickable and marks the user's frames", () => {
    const report = loadReport("worker_error");
    const html = renderReportHtml({ target: "buggy", specUri: null, report }, OPTIONS);
    assert.match(html, /id="verdict">✗ error</);
    assert.match(html, /RuntimeError on rank 1 during forward/);
    const frames = report.attempts[0]?.error?.frames ?? [];
    assert.ok(frames.length > 3);
    const links = dataArgs(html, "openFile");
    for (const f of frames) {
      assert.ok(links.some((l) => l.file === f.file && l.line === f.line), `${f.file}:${f.line}`);
    }
    // the user's frame (the error's user_frame, in the model file) is marked; the library frames are not
    const user = report.attempts[0]?.error?.user_frame;
    assert.equal(user?.file, "/tmp/fx/buggy_models.py");
    assert.ok(frames.some((f) => f.file === user?.file && f.line === user?.line));
    assert.equal((html.match(/<li class="user">/g) ?? []).length, 1);
    assert.ok(
      html.includes(`<li class="user"><a href="#" data-action="openFile" data-args="{&quot;file&quot;:&quot;/tmp/fx/buggy_models.py&quot;,&quot;line&quot;:${user?.line}}"`),
    );
    assert.match(html, /Shape mismatch during the forward on rank 1/);
  });

  it("flags a degenerate partition as inconclusive", () => {
    const html = renderReportHtml(message("degenerate"), OPTIONS);
    assert.match(html, /id="verdict">⚠ inconclusive</);
    assert.match(html, /class="warning">⚠ rank 0 has no remote atoms/);
  });

  it("renders the empty state and a minimal report without throwing", () => {
    assert.match(renderReportHtml(undefined, OPTIONS), /No report yet/);
    const minimal: ReportMessage = {
      target: "t",
      specUri: null,
      report: { report_version: 1, ok: false, next_action: "", spec: {}, attempts: [], meta: {} },
    };
    const html = renderReportHtml(minimal, OPTIONS);
    assert.match(html, /No attempt ran/);
    assert.match(html, /✗ error/);
  });

  it("disables the buttons that run or edit in an untrusted workspace", () => {
    const html = renderReportHtml(message("helper_model_failed"), { ...OPTIONS, trusted: false });
    for (const name of ["validate", "declareAdapter"]) {
      assert.match(html, new RegExp(`data-action="${name}"[^>]*title="Disabled in Restricted Mode[^"]*" disabled>`));
    }
    const fixed = renderReportHtml(message("helper_model_autofix"), { ...OPTIONS, trusted: false });
    assert.match(fixed, /data-action="applyBestSpec"[^>]*title="Disabled in Restricted Mode[^"]*" disabled>/);
    assert.doesNotMatch(html, /data-action="exportJson"[^>]*disabled/);
  });
});

describe("escaping (XSS)", () => {
  const EVIL = "<img src=x onerror=alert(1)>";

  function evilMessage(): ReportMessage {
    const report = loadReport("helper_model_failed");
    const attempt = report.attempts[0];
    assert.ok(attempt);
    const rename = <T>(rec: Record<string, T>): Record<string, T> =>
      Object.fromEntries(Object.entries(rec).map(([k, v]) => [k === "energy" ? EVIL : k, v]));
    attempt.verdicts = rename(attempt.verdicts);
    const v = attempt.verdicts[EVIL];
    assert.ok(v);
    v.name = EVIL;
    v.kind = EVIL;
    attempt.max_abs_diff = rename(attempt.max_abs_diff);
    attempt.max_rel_diff = rename(attempt.max_rel_diff);
    attempt.failing_outputs = [EVIL];
    attempt.handler_counts = { [EVIL]: 1 };
    attempt.rationale = EVIL;
    attempt.rule = EVIL;
    const h = attempt.helper_diagnostics[0];
    assert.ok(h);
    h.qualname = `${EVIL}"'\``;
    h.suspected_gap = EVIL;
    h.divergence_notes = [EVIL];
    h.source = { file: `${EVIL}.py`, line: 3 };
    h.likely_remedy = { module_path: EVIL };
    attempt.layer_divergence = { first_divergent: { module: EVIL, class: EVIL } };
    attempt.partition_health = { per_rank: { [EVIL]: { owned: 1, halo: 1, remote: 1 } }, degenerate: [EVIL] };
    attempt.error = { type: EVIL, message: EVIL, rank: 0, phase: EVIL, frames: [{ file: EVIL, line: 1, function: EVIL }], hint: EVIL, traceback: `</script>${EVIL}` };
    report.next_action = `${EVIL}\nsecond ${EVIL}`;
    // a string where the schema says number (world_size): the panel must still escape it
    report.meta = { world_size: EVIL, device: EVIL, atol: { [EVIL]: 1 }, versions: { [EVIL]: EVIL } } as unknown as typeof report.meta;
    report.spec = { evil: `</script>${EVIL}` };
    report.fix_applied = EVIL;
    return { target: EVIL, specUri: `file:///${EVIL}`, report, notice: EVIL };
  }

  it("escapes an output named <img src=x onerror=alert(1)> and every other report string", () => {
    const html = renderReportHtml(evilMessage(), OPTIONS);
    assert.ok(!html.includes("<img"), "an unescaped <img tag is in the page");
    for (const el of elements(html)) {
      assert.ok(ALLOWED_TAGS.has(el.tag), `unexpected tag <${el.tag}>`);
      for (const a of el.attributes) {
        assert.ok(ALLOWED_ATTRIBUTES.has(a), `unexpected attribute ${a} on <${el.tag}>`);
      }
    }
    assert.ok(html.includes("&lt;img src=x onerror=alert(1)&gt;"), "the name is shown, escaped");
    assert.match(html, /<code>&lt;img src=x onerror=alert\(1\)&gt;<\/code>/);
    for (const tag of tagsOf(html)) {
      assert.ok(ALLOWED_TAGS.has(tag), `unexpected tag <${tag}>`);
    }
    // the data block holding the report for state restore cannot be closed by report text
    const block = /<script type="application\/json" id="distcheck-state">([\s\S]*?)<\/script>/.exec(html);
    assert.ok(block);
    assert.ok(!(block[1] ?? "").includes("<"));
    assert.equal((JSON.parse(block[1] ?? "") as ReportMessage).target, EVIL);
    assert.equal(html.match(/<\/script>/g)?.length, 2);
  });

  it("keeps quotes from breaking out of attribute values", () => {
    const html = renderReportHtml(evilMessage(), OPTIONS);
    const declare = dataArgs(html, "declareAdapter");
    assert.equal(declare[0]?.qualname, `${EVIL}"'\``);
  });

  it("escapeHtml and jsonForScript", () => {
    assert.equal(escapeHtml(`<a href="x">'&\`</a>`), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#96;&lt;/a&gt;");
    assert.equal(escapeHtml(undefined), "");
    assert.equal(escapeHtml(null), "");
    assert.equal(escapeHtml(3), "3");
    assert.equal(jsonForScript({ a: "</script><!--\u2028" }), '{"a":"\\u003c/script\\u003e\\u003c!--\\u2028"}');
    assert.deepEqual(JSON.parse(jsonForScript({ a: "</script>&" })), { a: "</script>&" });
  });
});

describe("pieces", () => {
  it("fmt", () => {
    assert.equal(fmt(null), "–");
    assert.equal(fmt("NaN"), "NaN");
    assert.equal(fmt("Infinity"), "inf");
    assert.equal(fmt("-Infinity"), "-inf");
    assert.equal(fmt(1e-5), "1e-5");
    assert.equal(fmt(0.13377166799398243), "0.134");
    assert.equal(fmt(113.28782656257016), "113");
    assert.equal(fmt(160), "160");
    assert.equal(fmt(1.234e-17), "1.23e-17");
  });

  it("logDomain covers values and tolerances", () => {
    assert.deepEqual(logDomain([1e-5, 1e-4, 0.13, 113]), [-6, 3]);
    assert.deepEqual(logDomain([undefined, 0, Number.NaN]), [-8, 0]);
    const [lo, hi] = logDomain([1e-5]);
    assert.ok(hi - lo >= 3);
  });

  it("partitionComposition sorts ranks numerically", () => {
    const got = partitionComposition({ per_rank: { "10": { owned: 1, halo: 2, remote: 3 }, "2": { owned: 4 } } });
    assert.deepEqual(got, [
      { rank: "2", owned: 4, halo: 0, remote: 0 },
      { rank: "10", owned: 1, halo: 2, remote: 3 },
    ]);
  });

  it("firstDivergentModule reads both shapes", () => {
    assert.deepEqual(firstDivergentModule({ first_divergent: { module: "readout", class: "a.B", rel_diff: 0.1 } }), {
      module: "readout",
      cls: "a.B",
      file: undefined,
      line: undefined,
      relDiff: 0.1,
      absDiff: undefined,
    });
    assert.equal(firstDivergentModule({ first_module: "m", file: "/x.py", line: 7 })?.line, 7);
    assert.equal(firstDivergentModule(null), undefined);
    assert.equal(firstDivergentModule({ checked: 3 }), undefined);
  });

  it("fileUriToPath", () => {
    assert.equal(fileUriToPath("file:///tmp/ws/helper_model.distspec.json"), "/tmp/ws/helper_model.distspec.json");
    assert.equal(fileUriToPath("file:///c%3A/ws/a%20b.json"), "c:/ws/a b.json");
    assert.equal(fileUriToPath("untitled:x"), undefined);
  });

  it("links the spec file", () => {
    const html = renderReportHtml({ ...message("helper_model_failed"), specUri: "file:///ws/helper_model.distspec.json" }, OPTIONS);
    assert.ok(dataArgs(html, "openFile").some((a) => a.file === "/ws/helper_model.distspec.json" && a.line === 1));
  });

  it("isLibraryFrame", () => {
    assert.ok(isLibraryFrame("/v/.venv/lib/python3.11/site-packages/torch/_ops.py"));
    assert.ok(isLibraryFrame("/work/main/server/distcheck/runtime/launch.py"));
    assert.ok(isLibraryFrame("<string>"));
    assert.ok(!isLibraryFrame("/home/me/model/forward.py"));
  });

  it("summarize on the fixtures", () => {
    assert.deepEqual(summarize(loadReport("helper_model_failed")).failing, ["energy", "forces", "charges"]);
    assert.equal(summarize(loadReport("helper_model_autofix")).verdict, "passed");
    assert.equal(summarize(loadReport("worker_error")).verdict, "error");
    assert.equal(summarize(loadReport("degenerate")).verdict, "inconclusive");
  });
});
