/**
 * Inline SVG charts of the report panel, built through the escaping `html` template (no external
 * scripts, no raw strings): the per-atom |Δ| against position along the cut axis (points coloured by
 * the rank that owned the atom, each rank's owned slab and its halo bands shaded, a halo that crosses
 * a periodic box edge drawn where it wraps to, a legend of the ranks' colours) and the per-module
 * divergence bars of the layer diagnostic. Colours are theme CSS variables. Pure (no `vscode` import).
 */

import { fmt, html, joinHtml, NOTHING, type SafeHtml } from "./reportMarkup";
import { ATOM_PLOT_PX, MODULE_ROW_PX } from "./reportStyle";

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

const RANK_COLOURS = [
  "var(--vscode-charts-blue, #3794ff)",
  "var(--vscode-charts-orange, #d18616)",
  "var(--vscode-charts-green, #89d185)",
  "var(--vscode-charts-purple, #b180d7)",
  "var(--vscode-charts-red, #f14c4c)",
  "var(--vscode-charts-yellow, #cca700)",
];
const AXES = ["a", "b", "c"];
const COMPONENTS = ["x", "y", "z"];
/** Room above the largest |Δ| in the plot, in percent of its height, so the top points are not cut. */
const TOP_INSET = 5;

/** The theme colour of rank `rank` (cycled over the chart palette). */
export function rankColour(rank: number): string {
  return RANK_COLOURS[((rank % RANK_COLOURS.length) + RANK_COLOURS.length) % RANK_COLOURS.length] ?? "var(--vscode-foreground, #ccc)";
}

function finite(x: number): boolean {
  return typeof x === "number" && Number.isFinite(x);
}

function pct(value: number): string {
  return `${value.toFixed(2)}%`;
}

/**
 * The parts of the interval `[lo, hi)` inside the box `[0, length)` along the cut axis: cut at the
 * ends of an open axis; on a periodic one, what lies past an edge wraps around to the other side
 * (`wrapped`), and a band as deep as the box covers all of it. Empty parts are left out.
 */
export function bandParts(lo: number, hi: number, length: number, periodic: boolean): Array<{ lo: number; hi: number; wrapped: boolean }> {
  if (!(hi > lo) || !(length > 0)) {
    return [];
  }
  if (!periodic) {
    const a = Math.max(lo, 0);
    const b = Math.min(hi, length);
    return b > a ? [{ lo: a, hi: b, wrapped: false }] : [];
  }
  if (hi - lo >= length) {
    return [{ lo: 0, hi: length, wrapped: lo < 0 || hi > length }];
  }
  const parts: Array<{ lo: number; hi: number; wrapped: boolean }> = [];
  const inside = { lo: Math.max(lo, 0), hi: Math.min(hi, length) };
  if (inside.hi > inside.lo) {
    parts.push({ ...inside, wrapped: false });
  }
  if (lo < 0) {
    parts.push({ lo: lo + length, hi: Math.min(hi, 0) + length, wrapped: true });
  }
  if (hi > length) {
    parts.push({ lo: Math.max(lo, length) - length, hi: hi - length, wrapped: true });
  }
  return parts.filter((p) => p.hi > p.lo);
}

/** The legend under the per-atom chart: one entry per rank (its colour, its slab, how many of the worst atoms it owned) and what the shading means. */
function rankLegend(data: AtomErrorsData, halo: number): SafeHtml {
  const entries = data.ranks.map((r) => {
    const owned = data.worst.filter((w) => w.rank === r.rank).length;
    const colour = rankColour(r.rank);
    return html`<li class="legend-rank" data-rank="${r.rank}"><svg class="swatch" width="10" height="10" xmlns="http://www.w3.org/2000/svg"><rect width="10" height="10" fill="${colour}"/></svg> rank ${r.rank}: owns [${fmt(r.lo)}, ${fmt(r.hi)}) Å, ${owned} of the worst atoms</li>`;
  });
  const shading =
    halo > 0 && data.ranks.length > 1
      ? html`<li class="legend-halo">light band: a rank's own slab; darker band: its halo, ${fmt(halo)} Å deep${
          data.periodic ? html`, continued across the periodic edge (outlined where it wraps around)` : NOTHING
        }</li>`
      : html`<li class="legend-halo">band: a rank's own slab${halo > 0 ? NOTHING : html` (every rank holds every atom: no halo)`}</li>`;
  return html`<ul class="atom-legend">${joinHtml(entries, "")}${shading}</ul>`;
}

/**
 * The |Δ| chart of one per-atom output: one `<circle class="atom">` per worst atom (an infinite |Δ| is
 * drawn at the top edge), one `<rect class="owned">` per rank and, when the ranks hold halos, one
 * `<rect class="halo">` on each inner side of each slab; the binned profile as a step line of
 * `<line class="profile">` segments. Returns NOTHING when there is nothing to draw.
 *
 * Like the module chart, nothing in it is scaled with the panel: the plot is an SVG with no viewBox,
 * `ATOM_PLOT_PX` high and as wide as its column, every mark placed in percent of it (the points keep
 * their pixel radius, so they stay round), and the axis text is HTML around it (`.atom-tick`,
 * `.atom-axis`), sized in CSS pixels by the stylesheet.
 */
export function atomErrorChart(data: AtomErrorsData): SafeHtml {
  if (!(data.length > 0) || (!data.worst.length && !data.profile.length)) {
    return NOTHING;
  }
  const values = [...data.worst.map((w) => w.abs_diff), ...data.profile].filter(finite);
  const top = Math.max(...values, 0) || 1;
  // percent of the plot's width and height
  const x = (u: number): number => (Math.min(Math.max(u, 0), data.length) / data.length) * 100;
  const y = (d: number): number => TOP_INSET + (1 - (finite(d) ? Math.min(Math.max(d / top, 0), 1) : 1)) * (100 - TOP_INSET);
  const halo = data.halo_width ?? 0;
  const bands: SafeHtml[] = [];
  for (const r of data.ranks) {
    const colour = rankColour(r.rank);
    bands.push(
      html`<rect class="owned" data-rank="${r.rank}" x="${pct(x(r.lo))}" y="0" width="${pct(Math.max(x(r.hi) - x(r.lo), 0))}" height="100%" fill="${colour}" fill-opacity="0.08"><title>rank ${r.rank} owns [${fmt(r.lo)}, ${fmt(r.hi)}) Å</title></rect>`,
    );
    if (halo > 0 && data.ranks.length > 1) {
      for (const [lo, hi] of [
        [r.lo - halo, r.lo],
        [r.hi, r.hi + halo],
      ] as const) {
        for (const part of bandParts(lo, hi, data.length, data.periodic)) {
          const where = part.wrapped ? html`, wrapped around the periodic edge` : NOTHING;
          bands.push(
            html`<rect class="${part.wrapped ? "halo wrapped" : "halo"}" data-rank="${r.rank}" x="${pct(x(part.lo))}" y="0" width="${pct(Math.max(x(part.hi) - x(part.lo), 0))}" height="100%" fill="${colour}" fill-opacity="0.18"${
              part.wrapped ? html` stroke="${colour}" stroke-width="1"` : NOTHING
            }><title>rank ${r.rank} halo, ${fmt(halo)} Å deep${where}: [${fmt(part.lo)}, ${fmt(part.hi)}) Å</title></rect>`,
          );
        }
      }
    }
  }
  const n = data.profile.length;
  const steps: SafeHtml[] = [];
  data.profile.forEach((d, i) => {
    const x0 = pct(x((i / n) * data.length));
    const x1 = pct(x(((i + 1) / n) * data.length));
    const level = pct(y(d));
    const prev = i > 0 ? data.profile[i - 1] : undefined;
    if (prev !== undefined && y(prev) !== y(d)) {
      steps.push(html`<line class="profile riser" x1="${x0}" y1="${pct(y(prev))}" x2="${x0}" y2="${level}"/>`);
    }
    steps.push(html`<line class="profile" x1="${x0}" y1="${level}" x2="${x1}" y2="${level}"/>`);
  });
  const profile = n
    ? html`<g class="profile" stroke="var(--vscode-descriptionForeground, #999)" stroke-width="1">${joinHtml(steps, "")}</g>`
    : NOTHING;
  const points = data.worst.map(
    (w) =>
      html`<circle class="atom" data-rank="${w.rank}" cx="${pct(x(w.position))}" cy="${pct(y(w.abs_diff))}" r="4" fill="${rankColour(w.rank)}"><title>atom ${w.index}, component ${COMPONENTS[w.component] ?? String(w.component)}: |Δ| ${fmt(w.abs_diff)} (rank ${w.rank}, ${fmt(w.position)} Å)</title></circle>`,
  );
  const axisName = AXES[data.axis] ?? String(data.axis);
  return html`<figure class="chart atom-chart"><div class="atom-grid">
<div class="atom-y"><span class="atom-tick">${fmt(top)}</span><span class="atom-tick">0</span></div>
<svg class="atom-plot" role="img" aria-label="|Δ| of ${data.output} along the cut axis" width="100%" height="${ATOM_PLOT_PX}" xmlns="http://www.w3.org/2000/svg">
<g class="bands">${joinHtml(bands, "")}</g>
${profile}<g class="atoms">${joinHtml(points, "")}</g></svg>
<div></div>
<div class="atom-x"><span class="atom-tick">0</span><span class="atom-axis">position along cut axis ${axisName} (Å)</span><span class="atom-tick">${fmt(data.length)}</span></div>
</div>
${rankLegend(data, halo)}
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
