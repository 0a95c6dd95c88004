// The first op whose value departs (issue 32, item 8), in the report panel: the layer section and the
// rank-disagreement table name the op, its function and its file:line as a link that opens that line
// (several ops and a helper's own file), say what it departs from, and stay escaped and total over a
// malformed record. Real reports: `divergent_op` (regenerate_evidence.divergent_op) and `rank_disagreement`.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { renderReportHtml } from "../../extension/src/reportHtml";
import { message } from "./fixtures";

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

function openFileArgs(html: string): Array<[string, number]> {
  return [...html.matchAll(/data-action="openFile" data-args="([^"]*)"/g)].map((m) => {
    const a = JSON.parse((m[1] ?? "").replace(/&quot;/g, '"').replace(/&amp;/g, "&")) as { file: string; line: number };
    return [a.file.split("/").pop() ?? "", a.line];
  });
}

const SHAPES: Array<[string, string, string, number, string]> = [
  ["Tensor.matmul", "matmul", "/w/op_trace_models.py", 26, "reduce"],
  ["torch.einsum", "einsum", "/w/op_trace_models.py", 28, "reduce"],
  ["torch.cumsum", "cumsum", "/w/op_trace_models.py", 32, "reduce"],
  ["Tensor.sum", "sum", "/w/op_trace_helper.py", 10, "total"],
];

function op(name: string, symbol: string, file: string, line: number, fn: string, against = "reference"): Json {
  return { op: name, symbol, file, line, function: fn, call: 0, level: "small", against, ranks: [0, 1], rel_diff: 0.25, compared: 6 };
}

describe("the first op whose value departs", () => {
  it("the layer section of a real report names the matrix product and links its line", () => {
    const s = section(render("divergent_op"), "layers");
    assert.match(s, /First divergent module: <code>readout<\/code>/);
    assert.match(s, /First op whose value departs: <code>matmul<\/code> <span class="dim">Tensor\.matmul<\/span> at <a href="#" data-action="openFile"/);
    assert.ok(s.includes(">op_trace_models.py:26</a> in <code>reduce</code> — leaves the single-process value on ranks 0, 1"), s);
    assert.deepEqual(openFileArgs(s).slice(0, 1), [["op_trace_models.py", 26]]);
    assert.match(s, /\(6 ops before it match\)/);
  });

  for (const [name, symbol, file, line, fn] of SHAPES) {
    it(`${symbol} at ${file.split("/").pop()}:${line}: in the disagreement table and the layer section`, () => {
      const html = render("rank_disagreement", (r) => {
        const a = attempt(r);
        ((a.rank_disagreements as Json[])[0] as Json).first_op = op(name, symbol, file, line, fn);
        (a.layer_divergence as Json).first_op = op(name, symbol, file, line, fn);
      });
      const where = `>${file.split("/").pop()}:${line}</a> in <code>${fn}</code>`;
      for (const id of ["disagreements", "layers"]) {
        const s = section(html, id);
        assert.ok(s.includes(`<code>${symbol}</code> <span class="dim">${name}</span> at `), `${id}: ${s}`);
        assert.ok(s.includes(where), `${id}: ${s}`);
        assert.ok(openFileArgs(s).some(([f, l]) => f === file.split("/").pop() && l === line), id);
      }
    });
  }

  it("an op a third-party package issued shows where inside the package", () => {
    const s = section(
      render("divergent_op", (r) => {
        ((attempt(r).layer_divergence as Json).first_op as Json).site = "/v/lib/python3.11/site-packages/aimnet/nbops.py:742";
      }),
      "layers",
    );
    assert.match(s, /<span class="dim">issued inside the package it calls, at aimnet\/nbops\.py:742<\/span> — leaves/);
  });

  it("an op the ranks disagree on says rank 0's value; none found without one", () => {
    const ranks = section(
      render("rank_disagreement", (r) => {
        ((attempt(r).rank_disagreements as Json[])[0] as Json).first_op = op("Tensor.sum", "sum", "/w/m.py", 3, "f", "ranks");
      }),
      "disagreements",
    );
    assert.match(ranks, /leaves rank 0&#39;s value on ranks 0, 1/);
    assert.match(section(render("rank_disagreement"), "disagreements"), /<th>first op that departs<\/th>[\s\S]*<span class="dim">none found<\/span><\/td><td>1<\/td>/);
  });

  it("escapes the op's text and reports a malformed record", () => {
    const html = render("divergent_op", (r) => {
      const first = (attempt(r).layer_divergence as Json).first_op as Json;
      first.op = EVIL;
      first.symbol = EVIL;
      first.function = EVIL;
    });
    assert.ok(!html.includes("<img"));
    const bad = render("divergent_op", (r) => {
      ((attempt(r).layer_divergence as Json).first_op as Json).line = "twenty";
    });
    assert.ok(bad.includes(`${ERROR_LINE}report.attempts[0].layer_divergence.first_op.line`), bad);
  });
});
