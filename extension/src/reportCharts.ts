/**
 * Inline SVG charts of the report panel, built through the escaping `html` template (no external
 * scripts, no raw strings): the per-atom |Δ| against position along the cut axis (points coloured by
 * the rank that owned the atom, each rank's owned slab and its halo bands shaded) and the per-module
 * divergence bars of the layer diagnostic. Colours are theme CSS variables. Pure (no `vscode` import).
 */

import { fmt, html, joinHtml, NOTHING, type SafeHtml } from "./reportMarkup";
import { MODULE_ROW_PX } from "./reportStyle";

/** One of the worst atoms of `report.atoms.AtomErrors`. */
export interface WorstAtomData {
  index: number;
  rank: number;
  position: number;
  abs_diff: number;
  component: number;
}

/** The per-atom error record (`report.atoms.AtomErrors`) as the chart reads it. */
export interface AtomErrorsData {
  output: string;
  axis: number;
  length: number;
  periodic: boolean;
  halo_width: number | null;
  ranks: Array<{ rank: number; lo: number; hi: number }>;
  worst: WorstAtomData[];
  profile: number[];
}

/** One module of the layer diagnostic (`layer_divergence`: module -> error). */
export interface ModuleError {
  module: string;
  error: number;
}

const W = 640;
const H = 220;
const PAD = { left: 56, right: 12, top: 12, bottom: 36 };
const RANK_COLOURS = [
  "var(--vscode-charts-blue)",
  "var(--vscode-charts-orange)",
  "var(--vscode-charts-green)",
  "var(--vscode-charts-purple)",
  "var(--vscode-charts-red)",
  "var(--vscode-charts-yellow)",
];
const AXES = ["a", "b", "c"];
const COMPONENTS = ["x", "y", "z"];

/** The theme colour of rank `rank` (cycled over the chart palette). */
export function rankColour(rank: number): string {
  return RANK_COLOURS[((rank % RANK_COLOURS.length) + RANK_COLOURS.length) % RANK_COLOURS.length] ?? "var(--vscode-foreground)";
}

function finite(x: number): boolean {
  return typeof x === "number" && Number.isFinite(x);
}

/**
 * The |Δ| chart of one per-atom output: one `<circle class="atom">` per worst atom (an infinite |Δ| is
 * drawn at the top edge), one `<rect class="owned">` per rank and, when the ranks hold halos, one
 * `<rect class="halo">` on each inner side of each slab; the binned profile as a step line. Returns
 * NOTHING when there is nothing to draw.
 */
export function atomErrorChart(data: AtomErrorsData): SafeHtml {
  if (!(data.length > 0) || (!data.worst.length && !data.profile.length)) {
    return NOTHING;
  }
  const values = [...data.worst.map((w) => w.abs_diff), ...data.profile].filter(finite);
  const top = Math.max(...values, 0) || 1;
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const x = (u: number): number => PAD.left + (Math.min(Math.max(u, 0), data.length) / data.length) * plotW;
  const y = (d: number): number => PAD.top + plotH - (finite(d) ? Math.min(d / top, 1) : 1) * plotH;
  const halo = data.halo_width ?? 0;
  const bands: SafeHtml[] = [];
  for (const r of data.ranks) {
    const colour = rankColour(r.rank);
    bands.push(
      html`<rect class="owned" data-rank="${r.rank}" x="${x(r.lo).toFixed(1)}" y="${PAD.top}" width="${(x(r.hi) - x(r.lo)).toFixed(1)}" height="${plotH}" fill="${colour}" fill-opacity="0.08"><title>rank ${r.rank} owns [${fmt(r.lo)}, ${fmt(r.hi)}) Å</title></rect>`,
    );
    if (halo > 0 && data.ranks.length > 1) {
      const sides: Array<[number, number]> = [
        [r.lo - halo, r.lo],
        [r.hi, r.hi + halo],
      ];
      for (const [lo, hi] of sides) {
        if (!data.periodic && (hi <= 0 || lo >= data.length)) {
          continue;
        }
        bands.push(
          html`<rect class="halo" data-rank="${r.rank}" x="${x(lo).toFixed(1)}" y="${PAD.top}" width="${Math.max(x(hi) - x(lo), 0).toFixed(1)}" height="${plotH}" fill="${colour}" fill-opacity="0.18"><title>rank ${r.rank} halo, ${fmt(halo)} Å deep</title></rect>`,
        );
      }
    }
  }
  const n = data.profile.length;
  const steps = data.profile
    .map((d, i) => `${x((i / n) * data.length).toFixed(1)},${y(d).toFixed(1)} ${x(((i + 1) / n) * data.length).toFixed(1)},${y(d).toFixed(1)}`)
    .join(" ");
  const profile = n
    ? html`<polyline class="profile" points="${steps}" fill="none" stroke="var(--vscode-descriptionForeground)" stroke-width="1"/>`
    : NOTHING;
  const points = data.worst.map(
    (w) =>
      html`<circle class="atom" data-rank="${w.rank}" cx="${x(w.position).toFixed(1)}" cy="${y(w.abs_diff).toFixed(1)}" r="4" fill="${rankColour(w.rank)}"><title>atom ${w.index}, component ${COMPONENTS[w.component] ?? String(w.component)}: |Δ| ${fmt(w.abs_diff)} (rank ${w.rank}, ${fmt(w.position)} Å)</title></circle>`,
  );
  const axisName = AXES[data.axis] ?? String(data.axis);
  return html`<figure class="chart atom-chart"><svg role="img" viewBox="0 0 ${W} ${H}" width="100%" aria-label="|Δ| of ${data.output} along the cut axis">
<g class="bands">${joinHtml(bands, "")}</g>
<line x1="${PAD.left}" y1="${PAD.top + plotH}" x2="${W - PAD.right}" y2="${PAD.top + plotH}" stroke="var(--vscode-foreground)"/>
<line x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left}" y2="${PAD.top + plotH}" stroke="var(--vscode-foreground)"/>
<text x="${PAD.left - 4}" y="${PAD.top + 10}" text-anchor="end" fill="var(--vscode-foreground)" font-size="10">${fmt(top)}</text>
<text x="${PAD.left - 4}" y="${PAD.top + plotH}" text-anchor="end" fill="var(--vscode-foreground)" font-size="10">0</text>
<text x="${W / 2}" y="${H - 6}" text-anchor="middle" fill="var(--vscode-foreground)" font-size="11">position along cut axis ${axisName} (Å, 0 – ${fmt(data.length)})</text>
${profile}<g class="atoms">${joinHtml(points, "")}</g></svg>
<figcaption>|Δ| of ${data.output} per atom: the ${data.worst.length} worst atoms coloured by owning rank, the line the largest |Δ| per bin; shaded: each rank's slab and its halo.</figcaption></figure>`;
}

/**
 * Horizontal bars of the layer diagnostic: one `<rect class="module">` per module, its length the
 * module's error on a log scale (modules in the order given; a non-finite error is drawn full-length).
 * A grid like the partition chart's: the module names and the values are HTML in columns beside one
 * SVG of bars whose widths are percentages of its column, and the SVG has no viewBox, so nothing is
 * scaled: the text keeps its CSS pixel size (`.module-row`) and the bars stretch with the panel.
 */
export function moduleDivergenceChart(modules: readonly ModuleError[]): SafeHtml {
  if (!modules.length) {
    return NOTHING;
  }
  const row = MODULE_ROW_PX;
  const errs = modules.map((m) => m.error).filter((e) => finite(e) && e > 0);
  const hi = Math.log10(Math.max(...errs, 1e-300));
  const lo = Math.min(Math.log10(Math.min(...errs, 1)), hi - 1);
  // percent of the bars column
  const len = (e: number): number => (!finite(e) ? 100 : e <= 0 ? 0 : Math.min(Math.max(((Math.log10(e) - lo) / (hi - lo)) * 100, 0), 100));
  const bars = modules.map(
    (m, i) =>
      html`<rect class="module" x="0" y="${i * row + 3}" width="${`${Math.max(len(m.error), 0.2).toFixed(2)}%`}" height="${row - 6}" fill="var(--vscode-charts-red)"><title>${m.module}: ${fmt(m.error)}</title></rect>`,
  );
  const labels = modules.map((m) => html`<div class="module-row" title="${m.module}">${m.module}</div>`);
  const values = modules.map((m) => html`<div class="module-row">${fmt(m.error)}</div>`);
  return html`<figure class="chart module-chart"><div class="module-grid">
<div class="module-labels">${joinHtml(labels, "")}</div>
<svg class="module-bars" role="img" aria-label="divergence per module" width="100%" height="${modules.length * row}" xmlns="http://www.w3.org/2000/svg">${joinHtml(bars, "")}</svg>
<div class="module-values">${joinHtml(values, "")}</div>
</div>
<figcaption>Largest difference from the single-process run per module, in call order (log scale).</figcaption></figure>`;
}
