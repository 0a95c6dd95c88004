/**
 * The report panel's detail sections: third-party helpers, layer divergence, worker errors and the
 * partition chart. Pure; every field is read through `reportCheck.Reader`.
 */

import { type AttemptJson, attemptNumber, freeString, isRecord } from "./report";
import { Problems, Reader, capped } from "./reportCheck";
import { NOTHING, type SafeHtml, UNTRUSTED, button, fmt, html, joinHtml, link } from "./reportMarkup";
import { type ModuleError, moduleDivergenceChart } from "./reportCharts";
import { type Obj, checkedCount } from "./reportSections";
import { renderFirstOp } from "./reportOps";
import { PARTITION_ROW_PX } from "./reportStyle";

// ------------------------------------------------------------------------------------------------
// helpers

interface Helper {
  h: Reader;
  attempt: Reader;
  name: string;
}

/** The watched third-party helpers (latest diagnosis of each, the best attempt's first), with "Declare adapter". */
export function renderHelpers(
  attempts: AttemptJson[],
  best: AttemptJson | undefined,
  target: string,
  trusted: boolean,
  p: Problems,
  at: (a: AttemptJson) => string,
): SafeHtml {
  const latest = new Map<string, Helper & { isBest: boolean }>();
  for (const attempt of attempts) {
    const a = new Reader(attempt as unknown as Obj, at(attempt), p);
    a.items("helper_diagnostics").forEach((value, i) => {
      const h = Reader.of(value, `${a.pathOf("helper_diagnostics")}[${i}]`, p);
      if (!h) {
        return;
      }
      const name = h.str("qualname") ?? `${h.str("module", { required: true }) ?? "?"}.${h.str("function", { required: true }) ?? "?"}`;
      const prev = latest.get(name);
      if (!prev || attempt === best || !prev.isBest) {
        latest.set(name, { h, attempt: a, name, isBest: attempt === best });
      }
    });
  }
  if (latest.size === 0) {
    return NOTHING;
  }
  const cards = capped([...latest.values()], "the helpers", p).map(({ h, attempt, name }) => renderHelper(h, attempt, name, target, trusted));
  return html`<section id="helpers"><h2>Third-party helpers</h2>${joinHtml(cards, "\n")}</section>`;
}

function renderHelper(h: Reader, attempt: Reader, name: string, target: string, trusted: boolean): SafeHtml {
  const gap = h.str("suspected_gap");
  const consistency = h.bool("consistency_passed");
  const flagged = Boolean(gap) || consistency === false;
  const perRank = h
    .entries("n_calls_per_rank")
    .map(([r, n]) => `rank ${r}: ${fmt(checkedCount(n, `${h.pathOf("n_calls_per_rank")}[${JSON.stringify(r)}]`, h.problems))}`)
    .join(", ");
  const checkText = h.str("consistency_check");
  const check = checkText
    ? html`<li>check: ${checkText} — <b>${consistency === true ? "passed" : consistency === false ? "failed" : "not run"}</b></li>`
    : NOTHING;
  const source = h.rec("source");
  const file = source?.str("file");
  const line = source?.count("line");
  const src = file ? html`<li>defined at ${link(`${file}:${fmt(line ?? 1)}`, "openFile", { file, line: line ?? 1 })}</li>` : NOTHING;
  const notes = h.items("divergence_notes").map((n) => html`<li>${freeString(n)}</li>`);
  const remedyReader = h.rec("likely_remedy");
  const remedy = remedyReader
    ? html`<div class="remedy">remedy (a <code>third_party_helpers</code> entry):<pre class="json">${JSON.stringify(remedyReader.obj, null, 2)}</pre></div>`
    : NOTHING;
  const wrapped = h.bool("already_wrapped") === true;
  const declare =
    flagged && !wrapped && remedyReader
      ? button(
          "Declare adapter",
          "declareAdapter",
          { target, qualname: name, module: h.str("module"), function: h.str("function"), remedy: remedyReader.obj },
          trusted ? undefined : UNTRUSTED,
        )
      : NOTHING;
  const state = wrapped
    ? html`<span class="tag ok">adapter declared</span>`
    : flagged
      ? html`<span class="tag bad">flagged</span>`
      : html`<span class="tag">ok</span>`;
  return html`<div class="helper ${flagged ? "flagged" : ""}" data-helper="${name}">
<h3><code>${name}</code> ${state} <span class="dim">(attempt ${attemptNumber(attempt.count("index"))})</span></h3>
<ul>
<li>pattern <b>${h.str("pattern") ?? "?"}</b> (confidence ${fmt(h.num("pattern_confidence"))}); calls: reference ${fmt(h.count("n_calls_ref"))}${
    perRank ? `; ${perRank}` : ""
  }</li>
${check}
${gap ? html`<li class="gap">${gap}</li>` : NOTHING}
${src}
${notes}
</ul>
${remedy}
${declare}
</div>`;
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
export function firstDivergentModule(ld: unknown, problems: Problems = new Problems(), path = "layer_divergence"): ModuleLocation | undefined {
  if (!isRecord(ld)) {
    return undefined;
  }
  const outer = new Reader(ld, path, problems);
  const inner = outer.rec("first_divergent");
  const src = inner ?? outer;
  const module = inner ? inner.str("module", { required: true }) : outer.str("first_module");
  if (!module) {
    return undefined;
  }
  const cls = src.has("class") ? src.str("class") : src.str("cls");
  return {
    module,
    cls: cls ?? "",
    file: src.str("file"),
    line: src.count("line"),
    relDiff: src.has("rel_diff") ? src.num("rel_diff") : src.num("max_rel_diff"),
    absDiff: src.has("abs_diff") ? src.num("abs_diff") : src.num("max_abs_diff"),
  };
}

/**
 * Per-module errors to chart: the layer diagnostic's `modules` list (`{module, rel_diff}` in call order)
 * when the report has one, else the first divergent module alone.
 */
export function moduleErrors(ld: Reader, loc: ModuleLocation): ModuleError[] {
  const listed = ld.items("modules").flatMap((v, i) => {
    const m = Reader.of(v, `${ld.pathOf("modules")}[${i}]`, ld.problems);
    const module = m?.str("module", { required: true });
    const error = m?.num("rel_diff", { required: true });
    return module !== undefined && error !== undefined ? [{ module, error }] : [];
  });
  if (listed.length) {
    return listed;
  }
  const error = loc.relDiff ?? loc.absDiff;
  return error !== undefined ? [{ module: loc.module, error }] : [];
}

/** The first module whose outputs diverge (best attempt first, then the latest), with "Go to module", and the first op whose value departs (its line a link). */
export function renderLayers(attempts: AttemptJson[], best: AttemptJson | undefined, p: Problems, at: (a: AttemptJson) => string): SafeHtml {
  const ordered = best ? [best, ...attempts.filter((a) => a !== best).reverse()] : [...attempts].reverse();
  for (const attempt of ordered) {
    const a = new Reader(attempt as unknown as Obj, at(attempt), p);
    const ld = a.rec("layer_divergence");
    const loc = ld ? firstDivergentModule(ld.obj, p, ld.path) : undefined;
    const op = renderFirstOp(ld?.rec("first_op"));
    const opLine = op === NOTHING ? NOTHING : html`<p>First op whose value departs: ${op}</p>`;
    if (ld && !loc && op !== NOTHING) {
      return html`<section id="layers"><h2>Layer divergence (attempt ${attemptNumber(a.count("index"))})</h2>
${opLine}
</section>`;
    }
    if (!ld || !loc) {
      continue;
    }
    const where = loc.file ? ` (${loc.file}:${fmt(loc.line ?? 1)})` : "";
    const diffs = [loc.relDiff !== undefined ? `rel diff ${fmt(loc.relDiff)}` : "", loc.absDiff !== undefined ? `abs diff ${fmt(loc.absDiff)}` : ""]
      .filter(Boolean)
      .join(", ");
    const n = ld.count("checked");
    const checked = n !== undefined ? html` <span class="dim">(${fmt(n)} modules checked)</span>` : NOTHING;
    return html`<section id="layers"><h2>Layer divergence (attempt ${attemptNumber(a.count("index"))})</h2>
<p>First divergent module: <code>${loc.module}</code>${loc.cls ? html` <span class="dim">${loc.cls}</span>` : NOTHING}${where}${
      diffs ? ` — ${diffs}` : ""
    }${checked}</p>
${opLine}
<p>${link("Go to module", "goToModule", { module: loc.module, cls: loc.cls, file: loc.file, line: loc.line })}</p>
${moduleDivergenceChart(moduleErrors(ld, loc))}
</section>`;
  }
  return NOTHING;
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

function renderError(e: Reader, a: Reader): SafeHtml {
  // rank -1 (or none): the failure is the reference run's or the parent's, not a rank's
  const rank = e.int("rank", { nullable: true });
  const where = rank === undefined || rank < 0 ? "reference / parent" : `rank ${fmt(rank)}`;
  const rawIndex = a.count("index");
  const index = fmt(rawIndex ?? "?");
  // The user's frame is stored by the server (runtime/frames.py); the file test is for older reports.
  const stored = e.rec("user_frame", { nullable: true });
  const isUser = (file: string, line: number | undefined): boolean =>
    e.has("user_frame") ? stored?.str("file") === file && stored?.count("line") === line : !isLibraryFrame(file);
  const frameItems = e
    .items("frames")
    .map((value, i) => {
      const f = Reader.of(value, `${e.pathOf("frames")}[${i}]`, e.problems);
      if (!f) {
        return NOTHING;
      }
      const file = f.str("file", { required: true }) ?? "?";
      const line = f.count("line");
      return html`<li class="${isUser(file, line) ? "user" : "lib"}">${link(`${file}:${fmt(line)}`, "openFile", {
        file,
        line: line ?? 1,
      })} in <code>${f.str("function") ?? "?"}</code></li>`;
    });
  const frames = joinHtml(frameItems, "\n");
  const traceback = e.str("traceback");
  const raw = traceback
    ? html`<details data-key="traceback-${index}"><summary>raw traceback</summary><pre>${traceback}</pre></details>`
    : NOTHING;
  const hint = e.str("hint");
  return html`<div class="worker-error">
<h3>${e.str("type", { required: true }) ?? "error"} on ${where} during ${e.str("phase") ?? "?"} <span class="dim">(attempt ${attemptNumber(rawIndex)})</span></h3>
<p class="message">${e.str("message") ?? ""}</p>
${hint ? html`<p class="hint">${hint}</p>` : NOTHING}
${frames.toString() ? html`<ol class="frames">${frames}</ol>` : NOTHING}
${raw}
</div>`;
}

/** One card per attempt that ended in a worker error: where, the message, the frames (user's vs library's), the raw traceback. */
export function renderErrors(attempts: AttemptJson[], p: Problems, at: (a: AttemptJson) => string): SafeHtml {
  const cards: SafeHtml[] = [];
  for (const attempt of attempts) {
    const a = new Reader(attempt as unknown as Obj, at(attempt), p);
    const e = a.rec("error");
    if (e) {
      cards.push(renderError(e, a));
    }
  }
  if (cards.length === 0) {
    return NOTHING;
  }
  return html`<section id="errors"><h2>Worker error</h2>${joinHtml(capped(cards, "the worker errors", p), "\n")}</section>`;
}

// ------------------------------------------------------------------------------------------------
// partition composition

export interface RankComposition {
  rank: string;
  owned: number;
  halo: number;
  remote: number;
}

export function partitionComposition(health: unknown, problems: Problems = new Problems(), path = "partition_health"): RankComposition[] {
  if (!isRecord(health)) {
    return [];
  }
  const h = new Reader(health, path, problems);
  return h
    .entries("per_rank")
    .map(([rank, stats]) => {
      const s = Reader.of(stats, `${h.pathOf("per_rank")}[${JSON.stringify(rank)}]`, problems);
      return { rank, owned: s?.count("owned") ?? 0, halo: s?.count("halo") ?? 0, remote: s?.count("remote") ?? 0 };
    })
    .sort((a, b) => Number(a.rank) - Number(b.rank) || a.rank.localeCompare(b.rank));
}

function degenerateLines(health: Reader | undefined): string[] {
  if (!health) {
    return [];
  }
  const found = health.raw("degenerate");
  if (Array.isArray(found)) {
    return health.items("degenerate").map(freeString);
  }
  if (found === undefined || found === null || found === false) {
    return [];
  }
  if (typeof found === "string") {
    return found ? [freeString(found)] : [];
  }
  health.problems.wrong(health.pathOf("degenerate"), found, "a list of strings");
  return [];
}

/** Owned / halo / remote atoms per rank (a stacked bar chart), degenerate-partition warnings and halo completeness. */
export function renderPartition(a: Reader): SafeHtml {
  const health = a.rec("partition_health");
  const ranks = health ? partitionComposition(health.obj, a.problems, health.path) : [];
  const messages = degenerateLines(health);
  const hc = a.rec("halo_completeness");
  const hcText = hc ? (hc.has("interpretation") ? hc.str("interpretation") : hc.str("message")) ?? "" : "";
  const incomplete = hc?.bool("complete") === false || hc?.bool("matches") === false;
  if (ranks.length === 0 && messages.length === 0 && !hcText) {
    return NOTHING;
  }
  const parts: SafeHtml[] = [];
  if (ranks.length) {
    parts.push(renderPartitionChart(ranks));
    parts.push(html`<p class="legend"><span class="sw owned"></span> owned <span class="sw halo"></span> halo <span class="sw remote"></span> remote (owned / halo / remote atoms)</p>`);
  }
  for (const m of messages) {
    parts.push(html`<p class="warning">⚠ ${m}</p>`);
  }
  if (hcText) {
    parts.push(html`<p class="${incomplete ? "warning" : "dim"}">Halo: ${hcText}</p>`);
  }
  return html`<section id="partition"><h2>Partition (attempt ${attemptNumber(a.count("index"))})</h2>${joinHtml(parts, "\n")}</section>`;
}


/** Pixels per rank row; the labels and values columns use the same line height so the rows line up. */
const PARTITION_ROW = PARTITION_ROW_PX;

/**
 * Owned / halo / remote atoms per rank as stacked bars that take the panel's width: a grid of the rank
 * labels, one SVG of bars (widths in percent of the plot column, so it stretches with the panel) and
 * the counts, laid out under the section heading at any panel width.
 */
function renderPartitionChart(ranks: RankComposition[]): SafeHtml {
  const total = Math.max(
    ranks.reduce((m, r) => Math.max(m, r.owned + r.halo + r.remote), 0),
    1,
  );
  const height = ranks.length * PARTITION_ROW;
  const bars: SafeHtml[] = [];
  ranks.forEach((r, i) => {
    const y = i * PARTITION_ROW;
    let x = 0;
    for (const part of ["owned", "halo", "remote"] as const) {
      const w = (r[part] / total) * 100;
      if (w > 0) {
        bars.push(
          html`<rect class="seg ${part}" x="${`${x.toFixed(2)}%`}" y="${y + 3}" width="${`${w.toFixed(2)}%`}" height="${PARTITION_ROW - 6}"><title>rank ${r.rank}: ${fmt(r[part])} ${part}</title></rect>`,
        );
      }
      x += w;
    }
  });
  const labels = ranks.map((r) => html`<div class="partition-row">rank ${r.rank}</div>`);
  const values = ranks.map((r) => html`<div class="partition-row">${fmt(r.owned)} / ${fmt(r.halo)} / ${fmt(r.remote)}</div>`);
  return html`<div class="partition-grid">
<div class="partition-labels">${joinHtml(labels, "")}</div>
<svg class="partition-chart" role="img" aria-label="atoms per rank: owned, halo, remote" width="100%" height="${height}" xmlns="http://www.w3.org/2000/svg">${joinHtml(bars, "")}</svg>
<div class="partition-values">${joinHtml(values, "")}</div>
</div>`;
}
