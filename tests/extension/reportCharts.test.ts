// The panel's SVG charts: a point per worst atom, bands per rank (owned + halo), module names escaped.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { atomErrorChart, bandParts, moduleDivergenceChart, rankColour, type AtomErrorsData } from "../../extension/src/reportCharts";
import { type ReportMessage, bestAttempt } from "../../extension/src/report";
import { NOTHING } from "../../extension/src/reportMarkup";
import { ATOM_PLOT_PX, ATOM_TEXT_PX, MODULE_ROW_PX, MODULE_TEXT_PX, STYLE } from "../../extension/src/reportStyle";
import { renderReportHtml } from "../../extension/src/reportHtml";
import { FIXTURES, message } from "./fixtures";

const EVIL = "<img src=x onerror=alert(1)>";

function data(ranks: number, worst: number, halo: number | null): AtomErrorsData {
  const length = 30;
  return {
    output: "forces",
    axis: 0,
    length,
    periodic: false,
    halo_width: halo,
    ranks: Array.from({ length: ranks }, (_, r) => ({ rank: r, lo: (r * length) / ranks, hi: ((r + 1) * length) / ranks })),
    worst: Array.from({ length: worst }, (_, i) => ({ index: i * 7, rank: i % ranks, position: (i * 3) % length, abs_diff: 1 / (i + 1), component: i % 3 })),
    profile: Array.from({ length: 64 }, (_, i) => (i % 5) * 0.01),
  };
}

function count(svg: string, re: RegExp): number {
  return (svg.match(re) ?? []).length;
}

describe("atomErrorChart", () => {
  const shapes: Array<[number, number]> = [
    [2, 16],
    [3, 5],
    [4, 1],
  ];
  for (const [ranks, worst] of shapes) {
    it(`${ranks} ranks, ${worst} worst atoms: one point per atom, a slab per rank, a halo band on each inner side (none past the open ends)`, () => {
      const svg = atomErrorChart(data(ranks, worst, 2.0)).toString();
      assert.equal(count(svg, /<circle class="atom"/g), worst);
      assert.equal(count(svg, /<rect class="owned"/g), ranks);
      assert.equal(count(svg, /<rect class="halo"/g), 2 * (ranks - 1));
      const periodic = atomErrorChart({ ...data(ranks, worst, 2.0), periodic: true }).toString();
      assert.equal(count(periodic, /<rect class="halo"/g), 2 * (ranks - 1));
      assert.equal(count(periodic, /<rect class="halo wrapped"/g), 2, "the outer ranks' halos wrap around the box edge");
      for (let r = 0; r < ranks; r++) {
        assert.match(svg, new RegExp(`class="owned" data-rank="${r}"`));
      }
      assert.match(svg, /atom 0, component x/);
      assert.doesNotMatch(svg, /<script/);
    });
  }
  it("draws no halo bands when every rank holds every atom", () => {
    const svg = atomErrorChart(data(2, 3, null)).toString();
    assert.equal(count(svg, /<rect class="halo"/g), 0);
    assert.equal(count(svg, /<rect class="owned"/g), 2);
  });
  it("an infinite |Δ| is drawn at the top, not lost", () => {
    const d = data(2, 2, 1.0);
    d.worst[0] = { ...d.worst[0], index: 0, rank: 0, position: 1, component: 0, abs_diff: Infinity };
    const svg = atomErrorChart(d).toString();
    assert.equal(count(svg, /<circle class="atom"/g), 2);
    assert.doesNotMatch(svg, /NaN/);
  });
  it("its text keeps a fixed CSS pixel size at any panel width: HTML axis text around an SVG without a viewBox", () => {
    const d = data(3, 6, 2.0);
    d.worst[0] = { index: 279, rank: 2, position: 28.2, component: 1, abs_diff: Infinity };
    const chart = atomErrorChart(d).toString();
    const svg = /^<figure class="chart atom-chart">[\s\S]*?(<svg [^>]*>[\s\S]*?<\/svg>)/.exec(chart)?.[1] ?? "";
    assert.ok(svg, chart);
    // a viewBox with width="100%" scales everything inside it, text included, with the panel's width
    assert.doesNotMatch(svg, /viewBox/i);
    assert.doesNotMatch(svg, /<text|<foreignObject/i);
    assert.match(svg, /^<svg class="atom-plot" [^>]*width="100%"/);
    assert.match(svg, new RegExp(`^<svg [^>]*height="${ATOM_PLOT_PX}"`));
    // the marks stretch instead: every position and extent in percent of the plot; the points keep a
    // pixel radius, so they stay round at any width
    const geometry = [...svg.matchAll(/\s(x|y|x1|y1|x2|y2|cx|cy|width|height)="([^"]*)"/g)].slice(2); // after the svg's own size
    assert.ok(geometry.length > 0);
    for (const [, name, value] of geometry) {
      assert.match(value ?? "", /^(0|\d+(\.\d+)?%)$/, `${name}="${value}"`);
    }
    assert.deepEqual([...new Set([...svg.matchAll(/<circle [^>]*\br="([^"]+)"/g)].map((m) => m[1]))], ["4"]);
    // still what it shows: a point per worst atom coloured by its rank (the infinite one at the top), a
    // slab per rank, its halo bands, the profile steps from one end of the axis to the other
    assert.equal(count(svg, /<circle class="atom"/g), 6);
    assert.match(svg, /<circle class="atom" data-rank="2" cx="94\.00%" cy="5\.00%" r="4" fill="var\(--vscode-charts-green, #89d185\)"><title>atom 279, component y:/);
    assert.equal(count(svg, /<rect class="owned"/g), 3);
    assert.equal(count(svg, /<rect class="halo"/g), 4);
    const steps = [...svg.matchAll(/<line class="profile" x1="([^"]+)" y1="[^"]+" x2="([^"]+)"/g)];
    assert.equal(steps.length, 64);
    assert.equal(steps[0]?.[1], "0.00%");
    assert.equal(steps[63]?.[2], "100.00%");
    // the axis text is HTML beside and below the plot, sized by the stylesheet in px
    assert.match(chart, /<div class="atom-y"><span class="atom-tick">[^<]+<\/span><span class="atom-tick">0<\/span><\/div>/);
    assert.match(chart, /<div class="atom-x"><span class="atom-tick">0<\/span><span class="atom-axis">position along cut axis a \(Å\)<\/span><span class="atom-tick">30<\/span><\/div>/);
    for (const cls of ["atom-tick", "atom-axis"]) {
      const rule = new RegExp(`\\.${cls} \\{([^}]*)\\}`).exec(STYLE)?.[1] ?? "";
      assert.match(rule, new RegExp(`font-size: ${ATOM_TEXT_PX}px`), cls);
      assert.doesNotMatch(rule, /em\b|%|vw/, cls);
    }
    assert.match(/\.atom-y \{([^}]*)\}/.exec(STYLE)?.[1] ?? "", new RegExp(`height: ${ATOM_PLOT_PX}px`));
  });
  it("escapes the output name and draws nothing for an empty record", () => {
    const d = data(2, 1, 1.0);
    d.output = EVIL;
    const svg = atomErrorChart(d).toString();
    assert.ok(!svg.includes(EVIL));
    assert.match(svg, /&lt;img src=x onerror=alert\(1\)&gt;/);
    assert.equal(atomErrorChart({ ...d, worst: [], profile: [] }), NOTHING);
  });
});

describe("the per-atom chart's halo across a periodic edge", () => {
  const L = 30;
  const cases: Array<[string, number, number, boolean, Array<{ lo: number; hi: number; wrapped: boolean }>]> = [
    ["below 0, wholly", -2, 0, true, [{ lo: 28, hi: 30, wrapped: true }]],
    ["below 0, partly", -1, 3, true, [{ lo: 0, hi: 3, wrapped: false }, { lo: 29, hi: 30, wrapped: true }]],
    ["past the end, partly", 29, 32, true, [{ lo: 29, hi: 30, wrapped: false }, { lo: 0, hi: 2, wrapped: true }]],
    ["past the end, wholly", 30, 32.5, true, [{ lo: 0, hi: 2.5, wrapped: true }]],
    ["deeper than the box", -5, 40, true, [{ lo: 0, hi: 30, wrapped: true }]],
    ["inside", 10, 12, true, [{ lo: 10, hi: 12, wrapped: false }]],
    ["open axis, below 0", -2, 0, false, []],
    ["open axis, partly past the end", 29, 32, false, [{ lo: 29, hi: 30, wrapped: false }]],
  ];
  for (const [what, lo, hi, periodic, parts] of cases) {
    it(`${what}: ${JSON.stringify(parts)}`, () => {
      assert.deepEqual(bandParts(lo, hi, L, periodic), parts);
    });
  }

  function haloRects(svg: string): Array<{ rank: number; x: number; width: number; wrapped: boolean }> {
    return [...svg.matchAll(/<rect class="(halo(?: wrapped)?)" data-rank="(\d+)" x="([\d.]+)%" y="0" width="([\d.]+)%"/g)].map((m) => ({
      wrapped: m[1] === "halo wrapped",
      rank: Number(m[2]),
      x: Number(m[3]),
      width: Number(m[4]),
    }));
  }

  for (const ranks of [2, 3, 5]) {
    it(`${ranks} ranks on a periodic axis: the first rank's lower halo is drawn at the far end, the last rank's upper halo at the start`, () => {
      const rects = haloRects(atomErrorChart({ ...data(ranks, 4, 2.0), periodic: true }).toString());
      const wrapped = rects.filter((r) => r.wrapped);
      assert.deepEqual(
        wrapped.map((r) => [r.rank, r.x, r.width]),
        [
          [0, 93.33, 6.67],
          [ranks - 1, 0, 6.67],
        ],
      );
      assert.ok(rects.every((r) => r.width > 0), "no band of zero width (a halo clamped to the edge)");
      const open = haloRects(atomErrorChart(data(ranks, 4, 2.0)).toString());
      assert.ok(open.every((r) => !r.wrapped) && open.length === 2 * (ranks - 1));
    });
  }
});

describe("the per-atom chart's rank legend", () => {
  for (const ranks of [1, 2, 4, 7]) {
    it(`${ranks} ranks: one entry per rank in its points' colour, its slab and its count of worst atoms`, () => {
      const d = data(ranks, 9, ranks > 1 ? 1.5 : null);
      const chart = atomErrorChart(d).toString();
      const entries = [...chart.matchAll(/<li class="legend-rank" data-rank="(\d+)">[\s\S]*?fill="([^"]+)"[\s\S]*?<\/svg> rank (\d+): owns \[([^,]+), ([^)]+)\) Å, (\d+) of the worst atoms<\/li>/g)];
      assert.equal(entries.length, ranks);
      entries.forEach((m, r) => {
        assert.equal(Number(m[1]), r);
        assert.equal(m[2], rankColour(r));
        assert.equal(Number(m[3]), r);
        assert.equal(Number(m[6]), d.worst.filter((w) => w.rank === r).length);
        const point = new RegExp(`<circle class="atom" data-rank="${r}"[^>]*fill="([^"]+)"`).exec(chart);
        if (point) {
          assert.equal(point[1], m[2], "the legend's colour is the points' colour");
        }
      });
      assert.match(chart, ranks > 1 ? /<li class="legend-halo">light band: a rank's own slab; darker band: its halo, 1\.5 Å deep<\/li>/ : /no halo/);
      const periodic = atomErrorChart({ ...d, periodic: true }).toString();
      assert.equal(/continued across the periodic edge/.test(periodic), ranks > 1);
    });
  }
});

describe("moduleDivergenceChart", () => {
  it("one bar per module, module names escaped", () => {
    const svg = moduleDivergenceChart([
      { module: "embed", error: 1e-9 },
      { module: EVIL, error: 1e-3 },
      { module: 'readout"x', error: Infinity },
    ]).toString();
    assert.equal(count(svg, /<rect class="module"/g), 3);
    assert.ok(!svg.includes(EVIL) && !svg.includes('readout"x'));
    assert.match(svg, /&lt;img/);
    assert.match(svg, /readout&quot;x/);
    assert.doesNotMatch(svg, /NaN/);
  });
  it("draws nothing without modules", () => {
    assert.equal(moduleDivergenceChart([]), NOTHING);
  });
  it("its text keeps a fixed CSS pixel size at any panel width: HTML rows beside an SVG without a viewBox", () => {
    const chart = moduleDivergenceChart([
      { module: "embed", error: 1e-9 },
      { module: "interaction.0", error: 1e-3 },
      { module: "readout", error: Infinity },
    ]).toString();
    const svg = /<svg class="module-bars"[^>]*>[\s\S]*?<\/svg>/.exec(chart)?.[0] ?? "";
    assert.ok(svg, chart);
    // a viewBox with width="100%" scales everything inside it, text included, with the panel's width
    assert.doesNotMatch(svg, /viewBox/i);
    assert.doesNotMatch(svg, /<text/);
    assert.match(svg, new RegExp(`height="${3 * MODULE_ROW_PX}"`));
    // the bars stretch instead: widths in percent of their column, the worst one the full column
    const widths = [...svg.matchAll(/<rect class="module"[^>]* width="([^"]+)"/g)].map((m) => m[1] ?? "");
    assert.equal(widths.length, 3);
    assert.ok(widths.every((w) => /^\d+(\.\d+)?%$/.test(w)), widths.join(" "));
    assert.equal(widths[2], "100.00%");
    // names and values are HTML rows, sized by the stylesheet in px
    assert.equal(count(chart, /<div class="module-row"/g), 6);
    assert.match(chart, /<div class="module-row" title="interaction.0">interaction.0<\/div>/);
    const rule = /\.module-row \{([^}]*)\}/.exec(STYLE)?.[1] ?? "";
    assert.match(rule, new RegExp(`font-size: ${MODULE_TEXT_PX}px`));
    assert.match(rule, new RegExp(`height: ${MODULE_ROW_PX}px`));
    assert.doesNotMatch(rule, /em\b|%|vw/);
  });
});

describe("the panel draws the charts", () => {
  const OPTIONS = { nonce: "N0NCE", cspSource: "vscode-webview://abc", scriptUri: "vscode-webview://abc/report.js" };

  function withAtomErrors(name: string, output: string): ReportMessage {
    const msg = message("helper_model_failed");
    const best = bestAttempt(msg.report) ?? msg.report.attempts?.[msg.report.attempts.length - 1];
    assert.ok(best);
    (best as unknown as Record<string, unknown>).atom_errors = [{ ...data(2, 5, 2.0), output, system: 0, n_atoms: 40, n_components: 3 }];
    (best as unknown as Record<string, unknown>).layer_divergence = { first_divergent: { module: name, class: "pkg.M", rel_diff: 0.3 }, checked: 4 };
    return msg;
  }

  it("a report with atom_errors: the best attempt's |Δ| chart, one point per worst atom, the output name escaped", () => {
    const html = renderReportHtml(withAtomErrors("interaction.0", EVIL), OPTIONS);
    assert.ok(html.includes('<section id="atom-errors">'));
    assert.equal(count(html, /<figure class="chart atom-chart"><div class="atom-grid">/g), 1);
    assert.equal(count(html, /<svg class="atom-plot"/g), 1);
    assert.equal(count(html, /<circle class="atom"/g), 5);
    assert.equal(count(html, /<rect class="owned"/g), 2);
    assert.ok(!html.includes("<img"));
  });

  it("the layer divergence section draws the module bars, the module name escaped", () => {
    const html = renderReportHtml(withAtomErrors(EVIL, "forces"), OPTIONS);
    assert.equal(count(html, /<figure class="chart module-chart"><div class="module-grid">/g), 1);
    assert.equal(count(html, /<svg class="module-bars"/g), 1);
    assert.equal(count(html, /<rect class="module"/g), 1);
    assert.ok(!html.includes("<img"));
  });

  for (const name of FIXTURES) {
    // the panel charts the per-atom records of the best attempt, else the last (renderAtomErrors)
    const report = message(name).report;
    const attempts = report.attempts ?? [];
    const shown = bestAttempt(report) ?? attempts[attempts.length - 1];
    const records = (shown?.atom_errors ?? []).filter((r) => (r.worst ?? []).length > 0 || (r.profile ?? []).length > 0);
    const worst = records.reduce((n, r) => n + (r.worst ?? []).length, 0);
    it(`${name}: a per-atom section exactly when its shown attempt has atom_errors (${records.length}), a point per worst atom (${worst})`, () => {
      const html = renderReportHtml(message(name), OPTIONS);
      assert.equal(html.includes('<section id="atom-errors">'), records.length > 0);
      assert.equal(count(html, /<figure class="chart atom-chart">/g), records.length);
      assert.equal(count(html, /<circle class="atom"/g), worst);
    });
  }
  it("the fixtures hold both: reports with per-atom records and reports without", () => {
    const has = FIXTURES.map((name) => {
      const report = message(name).report;
      const attempts = report.attempts ?? [];
      return ((bestAttempt(report) ?? attempts[attempts.length - 1])?.atom_errors ?? []).length > 0;
    });
    assert.ok(has.includes(true) && has.includes(false), FIXTURES.join(", "));
  });
});
