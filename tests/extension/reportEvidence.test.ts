// The report panel's evidence sections on real reports (tests/extension/fixtures/regenerate_evidence.py):
// unrouted aggregations, suspicious outputs, ranks that disagree, and what was checked when the cause
// is unknown; each section escaped, total over malformed fields, and absent when there is no evidence.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type AttemptJson, type ReportJson, bestAttempt } from "../../extension/src/report";
import { Problems, Reader } from "../../extension/src/reportCheck";
import { causeUnknown } from "../../extension/src/reportEvidence";
import { renderReportHtml } from "../../extension/src/reportHtml";
import { FIXTURES, loadReport, message } from "./fixtures";

const OPTIONS = { nonce: "N0NCE", cspSource: "vscode-webview://abc", scriptUri: "vscode-webview://abc/report.js" };
const EVIL = "<img src=x onerror=alert(1)>";
const ERROR_LINE = "this part of the report could not be shown: ";

type Json = Record<string, unknown>;

function section(html: string, id: string): string {
  const m = new RegExp(`<section id="${id}">([\\s\\S]*?)</section>`).exec(html);
  return m?.[1] ?? "";
}

function render(name: string, edit?: (report: Json) => void): string {
  const m = message(name);
  edit?.(m.report as unknown as Json);
  return renderReportHtml(m, OPTIONS);
}

function attempt(report: Json, i = 0): Json {
  return (report.attempts as Json[])[i] as Json;
}

function openFileArgs(html: string): Array<{ file: string; line: number }> {
  return [...html.matchAll(/data-action="openFile" data-args="([^"]*)"/g)].map(
    (m) => JSON.parse((m[1] ?? "").replace(/&quot;/g, '"').replace(/&amp;/g, "&")) as { file: string; line: number },
  );
}

describe("unrouted aggregations", () => {
  it("a Python-level op: op, count, ranks, file:line link, unrouted in the best attempt", () => {
    const s = section(render("unrouted_python"), "unrouted");
    assert.match(s, /<code>scatter_reduce\(prod\)<\/code>/);
    assert.match(s, /<td>atoms → systems<\/td>\s*<td>2<\/td><td>0, 1<\/td>/);
    assert.match(s, /<code>NamedOnly\.extra_outputs<\/code> <a href="#" data-action="openFile"/);
    assert.ok(s.includes(">named_only.py:21</a>"));
    assert.deepEqual(
      openFileArgs(s).map((a) => [a.file.split("/").pop(), a.line]),
      [["named_only.py", 21]],
    );
    assert.match(s, /unrouted in the best attempt/);
  });

  it("scripted functions imported by name: op line and caller line, routed by the passing fix", () => {
    const s = section(render("unrouted_fixed"), "unrouted");
    assert.equal((s.match(/<tr class="pass">/g) ?? []).length, 2);
    for (const where of ["scripted_ops.py:20", "scripted_ops.py:25", "scripted_imported.py:18", "scripted_imported.py:21"]) {
      assert.ok(s.includes(`>${where}</a>`), where);
    }
    assert.match(s, /<code>scatter_receivers<\/code>/);
    assert.match(s, /<td>torchscript<\/td>/);
    // attempts numbered from 1, as the diagnostics and the report's text number them: index 1 is attempt 2
    assert.match(s, /routed by attempt 2 \(run_torchscript_eagerly\)/);
    assert.ok(!s.includes("unrouted in the best attempt"));
  });

  it("the same report without the fix: still unrouted; no location: 'unknown'", () => {
    const s = section(
      render("unrouted_fixed", (r) => {
        r.attempts = [(r.attempts as Json[])[0]];
        r.best_attempt = 0;
        const op = (attempt(r).unrouted as Json[])[0] as Json;
        Object.assign(op, { file: null, line: null, call_file: null, call_line: null });
      }),
      "unrouted",
    );
    assert.equal((s.match(/unrouted in the best attempt/g) ?? []).length, 2);
    assert.match(s, /<span class="dim">unknown<\/span>/);
  });

  it("escapes every text and keeps rendering on malformed ops", () => {
    const html = render("unrouted_python", (r) => {
      const op = (attempt(r).unrouted as Json[])[0] as Json;
      Object.assign(op, { op: EVIL, function: EVIL, file: `/x/${EVIL}.py`, ranks: [EVIL] });
    });
    assert.ok(!html.includes("<img"));
    assert.ok(section(html, "unrouted").includes("&lt;img src=x onerror=alert(1)&gt;"));
    const bad = render("unrouted_python", (r) => {
      ((attempt(r).unrouted as Json[])[0] as Json).count = "many";
      (attempt(r).unrouted as unknown[]).push(EVIL);
    });
    const s = section(bad, "unrouted");
    assert.ok(s.includes(`${ERROR_LINE}report.attempts[0].unrouted[0].count is a string`), s);
    assert.ok(s.includes(`${ERROR_LINE}report.attempts[0].unrouted[1] is a string`), s);
    assert.match(bad, /<section id="spec">/);
  });
});

describe("unrouted aggregations inside a watched helper", () => {
  function withHelperOp(wrapped: boolean): string {
    return render(wrapped ? "helper_model_autofix" : "helper_model_failed", (r) => {
      const attempts = r.attempts as Json[];
      const h = (attempts[0]?.helper_diagnostics as Json[])[0] as Json;
      const file = (h.source as Json).file as string;
      const op = { op: "aten.index_add", aggregation: "per_atom_to_per_system", origin: "torchscript", count: 4, file, line: 26, function: "_mol_sum", call_file: file, call_line: 39, ranks: [0, 1] };
      for (const a of attempts) {
        a.unrouted = [op];
      }
    });
  }

  it("an undeclared helper: points at the helper, never at a spec change that cannot route it", () => {
    const s = section(withHelperOp(false), "unrouted");
    assert.match(s, /inside the undeclared helper <code>examples\.thirdparty\.nbops\.mol_sum<\/code>/);
    assert.ok(!s.includes("unrouted in the best attempt"));
  });

  it("an adapted helper in a passing report: its adapter routes it", () => {
    const s = section(withHelperOp(true), "unrouted");
    assert.match(s, /inside helper <code>examples\.thirdparty\.nbops\.mol_sum<\/code>: its adapter routes it/);
    assert.match(s, /<tr class="pass">/);
  });
});

describe("suspicious outputs", () => {
  it("each output with its max abs, floor, ratio and threshold, and the floor's status", () => {
    const s = section(render("suspicious"), "suspicious");
    assert.match(s, /<code>energy<\/code><\/td><td>per_graph<\/td>\s*<td>1\.47e-5<\/td><td>1e-13<\/td><td><b>1\.47e\+8×<\/b><\/td>\s*<td>100×<\/td>/);
    assert.match(s, /<code>forces<\/code>/);
    assert.match(s, /far above the round-off floor/);
    assert.match(s, /Round-off floor: measured/);
  });

  it("escapes and reports a malformed ratio", () => {
    const html = render("suspicious", (r) => {
      const s = (attempt(r).suspicious as Json[])[0] as Json;
      s.name = EVIL;
      s.ratio = "huge";
    });
    assert.ok(!html.includes("<img"));
    assert.ok(section(html, "suspicious").includes(`${ERROR_LINE}report.attempts[0].suspicious[0].ratio is a string`));
  });
});

describe("ranks that disagree", () => {
  it("which ranks, which output, the first module that disagrees (a link to it)", () => {
    const s = section(render("rank_disagreement"), "disagreements");
    assert.match(s, /<code>energy<\/code><\/td><td>per_graph<\/td>\s*<td>0, 1<\/td><td>1<\/td>\s*<td>1<\/td><td>0<\/td>/);
    assert.match(s, /data-action="goToModule" data-args="\{&quot;module&quot;:&quot;shift&quot;,&quot;cls&quot;:&quot;accuracy_models\.rank_split\.Shift&quot;\}"/);
    assert.match(s, />shift<\/a> <span class="dim">accuracy_models\.rank_split\.Shift<\/span>, rank 1 against rank 0, max \|Δ\| 1/);
  });

  it("no module found; escaped names; a malformed module", () => {
    const none = section(
      render("rank_disagreement", (r) => {
        ((attempt(r).rank_disagreements as Json[])[0] as Json).first_module = null;
      }),
      "disagreements",
    );
    assert.match(none, /<span class="dim">none found<\/span>/);
    const html = render("rank_disagreement", (r) => {
      const d = (attempt(r).rank_disagreements as Json[])[0] as Json;
      d.output = EVIL;
      (d.first_module as Json).module = EVIL;
    });
    assert.ok(!html.includes("<img"));
    const bad = section(
      render("rank_disagreement", (r) => {
        ((attempt(r).rank_disagreements as Json[])[0] as Json).first_module = EVIL;
      }),
      "disagreements",
    );
    assert.ok(bad.includes(`${ERROR_LINE}report.attempts[0].rank_disagreements[0].first_module is a string`));
  });
});

describe("what was checked when the cause is unknown", () => {
  it("lists the evidence next_action lists, with the receptive field's skipped coupling", () => {
    const s = section(render("unknown_cause"), "checked");
    assert.match(s, /unrouted aggregations: none found/);
    assert.match(s, /ranks disagreeing on a replicated output: none/);
    assert.match(s, /first divergent module: none found/);
    assert.match(s, /watched helpers flagged: none/);
    assert.match(s, /receptive field: forces \(autograd-derived: 2 hops per layer\) also moved \d+ hop\(s\) away/);
    assert.match(s, /<code>pos\[0\]<\/code>/);
  });

  it("is absent whenever a cause is shown, or the report passed", () => {
    for (const name of ["unrouted_python", "rank_disagreement", "suspicious", "unrouted_fixed", "receptive_fixed", "helper_model_failed", "worker_error"]) {
      assert.ok(!render(name).includes('<section id="checked">'), name);
    }
  });

  it("says the layer search was off when it was", () => {
    const s = section(
      render("unknown_cause", (r) => {
        (r.meta as Json).layer_diagnostic = false;
      }),
      "checked",
    );
    assert.match(s, /not searched \(layer_diagnostic is off/);
  });
});

describe("evidence sections are present exactly when the report holds their evidence", () => {
  // what each section reads (reportEvidence): unrouted ops of any attempt; suspicious outputs and rank
  // disagreements of the best and the first attempt; "what was checked" when the best attempt failed
  // with no cause named (causeUnknown)
  function evidence(report: ReportJson): Record<string, boolean> {
    const attempts = report.attempts ?? [];
    const best = bestAttempt(report);
    const shown = [best, attempts[0]].filter((a): a is AttemptJson => a !== undefined);
    return {
      unrouted: attempts.some((a) => (a.unrouted ?? []).length > 0),
      suspicious: shown.some((a) => (a.suspicious ?? []).length > 0),
      disagreements: shown.some((a) => (a.rank_disagreements ?? []).length > 0),
      checked: best !== undefined && causeUnknown(new Reader(best as unknown as Json, "best", new Problems())),
    };
  }
  for (const name of FIXTURES) {
    it(name, () => {
      const report = loadReport(name);
      const html = renderReportHtml({ target: "t", specUri: null, report, notice: null }, OPTIONS);
      for (const [id, present] of Object.entries(evidence(report))) {
        assert.equal(html.includes(`<section id="${id}">`), present, `${name}: ${id}`);
      }
    });
  }

  it("the fixtures show every section and lack every section somewhere", () => {
    const all = FIXTURES.map((name) => evidence(loadReport(name)));
    for (const id of ["unrouted", "suspicious", "disagreements", "checked"]) {
      assert.ok(all.some((e) => e[id]) && all.some((e) => !e[id]), id);
    }
    // a report with no evidence at all: no section
    assert.ok(all.some((e) => Object.values(e).every((present) => !present)));
  });

  it("the undeclared TorchScript helper's own aggregation is named as inside it, not as a bare unrouted op", () => {
    const s = section(render("helper_model_failed"), "unrouted");
    assert.match(s, /<code>aten\.index_add<\/code>/);
    assert.match(s, /inside the undeclared helper <code>examples\.thirdparty\.nbops\.mol_sum<\/code>/);
    const fixed = section(render("helper_model_autofix"), "unrouted");
    assert.match(fixed, /inside helper <code>examples\.thirdparty\.nbops\.mol_sum<\/code>: its adapter routes it/);
  });

  it("new fixtures render with no error line", () => {
    for (const name of ["unrouted_fixed", "unrouted_python", "rank_disagreement", "suspicious", "receptive_fixed", "unknown_cause"]) {
      const html = render(name);
      assert.ok(!html.includes(ERROR_LINE), `${name}: ${[...html.matchAll(/could not be shown: ([^<]*)/g)].map((m) => m[1]).join(" | ")}`);
    }
  });
});
