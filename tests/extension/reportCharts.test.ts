// The panel's SVG charts: a point per worst atom, bands per rank (owned + halo), module names escaped.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { atomErrorChart, moduleDivergenceChart, type AtomErrorsData } from "../../extension/src/reportCharts";
import { NOTHING } from "../../extension/src/reportMarkup";

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
      assert.equal(count(atomErrorChart({ ...data(ranks, worst, 2.0), periodic: true }).toString(), /<rect class="halo"/g), 2 * ranks);
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
  it("escapes the output name and draws nothing for an empty record", () => {
    const d = data(2, 1, 1.0);
    d.output = EVIL;
    const svg = atomErrorChart(d).toString();
    assert.ok(!svg.includes(EVIL));
    assert.match(svg, /&lt;img src=x onerror=alert\(1\)&gt;/);
    assert.equal(atomErrorChart({ ...d, worst: [], profile: [] }), NOTHING);
  });
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
});
