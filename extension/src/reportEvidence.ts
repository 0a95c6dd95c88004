/**
 * The report panel's evidence sections: unrouted aggregations (op, count, where), suspicious outputs
 * (error far above the measured round-off floor, within tolerance), ranks that disagree on a replicated
 * output (with the first module that does and the first op whose value departs), and — when no cause is known — what was checked, as the
 * report's `next_action` lists it. Pure; every field is read through `reportCheck.Reader`, all markup
 * is built with the escaping `html` template.
 */

import { type AttemptJson, attemptNumber, isRecord, textOf, toNumber } from "./report";
import { Problems, Reader, capped } from "./reportCheck";
import { NOTHING, type SafeHtml, fmt, html, joinHtml, link } from "./reportMarkup";
import { atomErrorChart, type AtomErrorsData } from "./reportCharts";
import { renderFirstOp } from "./reportOps";
import { type Obj } from "./reportSections";

const WHAT: Record<string, string> = {
  per_atom_to_per_system: "atoms → systems",
  per_edge_to_per_atom: "edges → atoms",
  per_edge_to_per_system: "edges → systems",
  per_atom_total: "total over atoms",
};

function attemptLabel(a: Reader): string {
  const rule = a.str("rule");
  return `${attemptNumber(a.count("index"))}${rule ? ` (${rule})` : ""}`;
}

function baseName(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

/** `file:line` as a link that opens it (the full path in the title), or a dim "unknown" when absent. */
function fileLink(file: string | undefined, line: number | undefined): SafeHtml {
  if (!file) {
    return html`<span class="dim">unknown</span>`;
  }
  return link(`${baseName(file)}:${fmt(line ?? "?")}`, "openFile", { file, line: line ?? 1 }, file);
}

function ranksText(r: Reader, key: string): string {
  return r
    .items(key)
    .filter((x): x is number => typeof x === "number")
    .map((x) => fmt(x))
    .join(", ");
}

// ------------------------------------------------------------------------------------------------
// unrouted aggregations

interface Unrouted {
  u: Reader;
  attempt: Reader;
  key: string;
}

function unroutedKey(u: Reader): string {
  return JSON.stringify([u.str("op"), u.str("aggregation"), u.str("origin"), u.str("file"), u.count("line"), u.str("call_file"), u.count("call_line")]);
}

function unroutedOf(attempt: AttemptJson, at: (a: AttemptJson) => string, p: Problems): Unrouted[] {
  const a = new Reader(attempt as unknown as Obj, at(attempt), p);
  const out: Unrouted[] = [];
  a.items("unrouted").forEach((value, i) => {
    const u = Reader.of(value, `${a.pathOf("unrouted")}[${i}]`, p);
    if (u) {
      out.push({ u, attempt: a, key: unroutedKey(u) });
    }
  });
  return out;
}

/** Source file → helper name and whether an adapter wraps it in the best attempt (flagged or wrapped helpers only). */
function helperFiles(attempts: AttemptJson[], best: AttemptJson | undefined): Map<string, { name: string; wrapped: boolean }> {
  const out = new Map<string, { name: string; wrapped: boolean }>();
  for (const attempt of attempts) {
    const list = Array.isArray(attempt.helper_diagnostics) ? attempt.helper_diagnostics : [];
    for (const h of list) {
      if (!isRecord(h) || !isRecord(h.source) || typeof h.source.file !== "string") {
        continue; // the helpers section reports malformed entries
      }
      const wrapped = h.already_wrapped === true;
      if (!wrapped && !h.suspected_gap && h.consistency_passed !== false) {
        continue;
      }
      const name = typeof h.qualname === "string" ? h.qualname : `${textOf(h.module)}.${textOf(h.function)}`;
      const prev = out.get(h.source.file);
      out.set(h.source.file, { name, wrapped: (prev?.wrapped ?? false) || (wrapped && attempt === best) });
    }
  }
  return out;
}

/** Every distinct unrouted aggregation of any attempt, with where it ran and what the best attempt did about it. */
export function renderUnrouted(attempts: AttemptJson[], best: AttemptJson | undefined, p: Problems, at: (a: AttemptJson) => string): SafeHtml {
  const seen = new Map<string, Unrouted>();
  for (const attempt of attempts) {
    for (const found of unroutedOf(attempt, at, p)) {
      if (!seen.has(found.key)) {
        seen.set(found.key, found);
      }
    }
  }
  if (seen.size === 0) {
    return NOTHING;
  }
  const still = new Set(best ? unroutedOf(best, at, new Problems()).map((f) => f.key) : []); // its problems are counted above
  const bestReader = best ? new Reader(best as unknown as Obj, at(best), p) : undefined;
  const bestPassed = bestReader?.bool("passed") === true;
  const helpers = helperFiles(attempts, best);
  const rows = capped([...seen.values()], "the unrouted aggregations", p).map(({ u, attempt, key }) => {
    const op = u.str("op", { required: true }) ?? "?";
    const aggregation = u.str("aggregation", { required: true }) ?? "?";
    const fn = u.str("function");
    const file = u.str("file");
    const line = u.count("line");
    const callFile = u.str("call_file");
    const callLine = u.count("call_line");
    const caller = callFile && (callFile !== file || callLine !== line) ? fileLink(callFile, callLine) : html`<span class="dim">–</span>`;
    const helper = (file ? helpers.get(file) : undefined) ?? (callFile ? helpers.get(callFile) : undefined);
    const remains = still.has(key) && !(helper?.wrapped ?? false);
    let status: SafeHtml;
    if (helper) {
      status = helper.wrapped
        ? html`<span class="tag ok">inside helper <code>${helper.name}</code>: its adapter routes it</span>`
        : html`<span class="tag bad">inside the undeclared helper <code>${helper.name}</code> (see Third-party helpers)</span>`;
    } else if (remains) {
      status = bestPassed
        ? html`<span class="tag">still runs in the best attempt, whose outputs match on this sample</span>`
        : html`<span class="tag bad">unrouted in the best attempt</span>`;
    } else {
      status =
        bestPassed && bestReader
          ? html`<span class="tag ok">routed by attempt ${attemptLabel(bestReader)}</span>`
          : html`<span class="tag">not seen in the best attempt</span>`;
    }
    return html`<tr class="${remains && !bestPassed ? "fail" : "pass"}"><td><code>${op}</code></td><td>${WHAT[aggregation] ?? aggregation}</td>
<td>${fmt(u.count("count", { required: true }))}</td><td>${ranksText(u, "ranks")}</td>
<td>${fn ? html`<code>${fn}</code> ` : NOTHING}${fileLink(file, line)}</td><td>${caller}</td>
<td>${u.str("origin") ?? "?"}</td><td>${attemptLabel(attempt)}</td><td>${status}</td></tr>`;
  });
  return html`<section id="unrouted"><h2>Unrouted aggregations</h2>
<p>These ran where no handler routed them, so each rank computed only its partial.</p>
<table class="unrouted"><thead><tr><th>op</th><th>aggregation</th><th>count</th><th>ranks</th><th>where</th><th>called from</th><th>origin</th><th>attempt</th><th>now</th></tr></thead>
<tbody>${joinHtml(rows, "\n")}</tbody></table></section>`;
}

// ------------------------------------------------------------------------------------------------
// suspicious outputs

/** Outputs within tolerance but far above the measured round-off floor (best and first attempt). */
export function renderSuspicious(
  attempts: AttemptJson[],
  best: AttemptJson | undefined,
  roundoff: unknown,
  p: Problems,
  at: (a: AttemptJson) => string,
): SafeHtml {
  const first = attempts[0];
  const shown = [...new Set([best, first].filter((a): a is AttemptJson => a !== undefined))];
  const rows: SafeHtml[] = [];
  for (const attempt of shown) {
    const a = new Reader(attempt as unknown as Obj, at(attempt), p);
    a.items("suspicious").forEach((value, i) => {
      const s = Reader.of(value, `${a.pathOf("suspicious")}[${i}]`, p);
      if (!s) {
        return;
      }
      rows.push(html`<tr class="fail"><td><code>${s.str("name", { required: true }) ?? "?"}</code></td><td>${s.str("kind") ?? "?"}</td>
<td>${fmt(s.num("max_abs_diff"))}</td><td>${fmt(s.num("floor"))}</td><td><b>${fmt(s.num("ratio"))}×</b></td>
<td>${fmt(s.num("threshold"))}×</td><td>${attemptLabel(a)}</td></tr>`);
    });
  }
  if (rows.length === 0) {
    return NOTHING;
  }
  const r = isRecord(roundoff) ? new Reader(roundoff, "report.roundoff", p) : undefined;
  const status = r?.str("status");
  const note = r?.str("note");
  const floor = status ? html`<p class="dim">Round-off floor: ${status}${note ? ` — ${note}` : ""}</p>` : NOTHING;
  return html`<section id="suspicious"><h2>Suspicious outputs</h2>
<p class="warning">⚠ Within atol/rtol, but far above the round-off floor of this comparison (measured by a replicated control run): a real distributed error too small for the tolerances.</p>
<table class="suspicious"><thead><tr><th>output</th><th>kind</th><th>max abs</th><th>floor</th><th>ratio</th><th>threshold</th><th>attempt</th></tr></thead>
<tbody>${joinHtml(capped(rows, "the suspicious outputs", p), "\n")}</tbody></table>${floor}</section>`;
}

// ------------------------------------------------------------------------------------------------
// rank disagreements

function opCell(op: Reader | undefined): SafeHtml {
  const shown = renderFirstOp(op);
  return shown === NOTHING ? html`<span class="dim">none found</span>` : shown;
}

/** Replicated outputs on which ranks disagree (best and first attempt), with the first module that does and the first op whose value departs (its line a link). */
export function renderDisagreements(attempts: AttemptJson[], best: AttemptJson | undefined, p: Problems, at: (a: AttemptJson) => string): SafeHtml {
  const first = attempts[0];
  const shown = [...new Set([best, first].filter((a): a is AttemptJson => a !== undefined))];
  const seen = new Set<string>();
  const rows: SafeHtml[] = [];
  for (const attempt of shown) {
    const a = new Reader(attempt as unknown as Obj, at(attempt), p);
    a.items("rank_disagreements").forEach((value, i) => {
      const d = Reader.of(value, `${a.pathOf("rank_disagreements")}[${i}]`, p);
      const output = d?.str("output", { required: true });
      if (!d || !output || seen.has(output)) {
        return;
      }
      seen.add(output);
      const m = d.rec("first_module");
      const module = m?.str("module");
      const cls = m?.str("class");
      const moduleCell = module
        ? html`${link(module, "goToModule", { module, cls: cls ?? "" }, cls)} <span class="dim">${cls ?? ""}</span>, rank${
            m && m.items("ranks").length > 1 ? "s" : ""
          } ${m ? ranksText(m, "ranks") : ""} against rank 0, max |Δ| ${fmt(m?.num("max_abs"))}`
        : html`<span class="dim">none found</span>`;
      const off = ranksText(d, "off_reference");
      const systems = ranksText(d, "systems");
      rows.push(html`<tr class="fail"><td><code>${output}</code></td><td>${d.str("kind") ?? "?"}</td>
<td>${ranksText(d, "ranks")}</td><td>${off ? off : html`<span class="dim">none</span>`}</td>
<td>${fmt(d.num("max_abs"))}</td><td>${systems ? systems : html`<span class="dim">–</span>`}</td>
<td>${moduleCell}</td><td>${opCell(d.rec("first_op"))}</td><td>${attemptLabel(a)}</td></tr>`);
    });
  }
  if (rows.length === 0) {
    return NOTHING;
  }
  return html`<section id="disagreements"><h2>Ranks that disagree</h2>
<p>A replicated output must come out the same on every rank; consolidation keeps one rank's value, so any disagreement fails the attempt.</p>
<table class="disagreements"><thead><tr><th>output</th><th>kind</th><th>ranks</th><th>off the reference</th><th>max |Δ|</th><th>systems</th><th>first module that disagrees</th><th>first op that departs</th><th>attempt</th></tr></thead>
<tbody>${joinHtml(capped(rows, "the rank disagreements", p), "\n")}</tbody></table></section>`;
}

// ------------------------------------------------------------------------------------------------
// what was checked, when no cause is known

function firstDivergent(a: Reader): string | undefined {
  const ld = a.rec("layer_divergence");
  const fd = ld?.rec("first_divergent");
  return fd?.str("module") ?? ld?.str("first_module");
}

/** True when the best attempt failed and the report names no cause the other sections show. */
export function causeUnknown(a: Reader): boolean {
  if (a.bool("passed") !== false || a.rec("error") !== undefined) {
    return false;
  }
  const hc = a.rec("halo_completeness");
  const flagged = a.items("helper_diagnostics").some((h) => isRecord(h) && (Boolean(h.suspected_gap) || h.consistency_passed === false));
  return (
    a.items("unrouted").length === 0 &&
    a.items("rank_disagreements").length === 0 &&
    a.items("suspicious").length === 0 &&
    firstDivergent(a) === undefined &&
    !flagged &&
    hc?.bool("matches") !== false &&
    hc?.bool("complete") !== false
  );
}

/** When the best attempt failed with no cause the other sections show: what was checked, and what to look at next. */
export function renderChecked(best: AttemptJson | undefined, meta: Obj, receptive: unknown, p: Problems, at: (a: AttemptJson) => string): SafeHtml {
  if (!best) {
    return NOTHING;
  }
  const a = new Reader(best as unknown as Obj, at(best), p);
  if (!causeUnknown(a)) {
    return NOTHING;
  }
  const items = [
    "unrouted aggregations: none found",
    "ranks disagreeing on a replicated output: none",
    meta.layer_diagnostic === false
      ? "first divergent module: not searched (layer_diagnostic is off: turn it on to localise it)"
      : "first divergent module: none found (no sub-module's output differs, or the wrapper has no sub-modules to hook)",
    "watched helpers flagged: none",
  ];
  const halo = a.rec("halo_completeness")?.str("interpretation");
  if (halo) {
    items.push(`halo: ${halo}`);
  }
  const field = isRecord(receptive) ? new Reader(receptive, "report.receptive_field", p) : undefined;
  const skip = (field?.str("note") ?? "").split("; ").find((part) => part.includes("skips the neighbour graph"));
  if (skip) {
    items.push(`receptive field: ${skip}`);
  }
  return html`<section id="checked"><h2>Cause unknown — what was checked</h2>
<p>No auto-fix rule found evidence it could act on (attempt ${attemptLabel(a)}).</p>
<ul class="checked">${items.map((t) => html`<li>${t}</li>`)}</ul>
<p>Next: compare the failing outputs atom by atom (the outputs' worst index) for code that depends on which atoms a rank holds or on their order (e.g. <code>pos[0]</code>, <code>batch.num_atoms</code>, <code>positions.shape[0]</code>).</p>
</section>`;
}

// ------------------------------------------------------------------------------------------------
// per-atom errors

function atomRecord(r: Reader): AtomErrorsData | undefined {
  const output = r.str("output", { required: true });
  const length = r.num("length", { required: true });
  if (output === undefined || length === undefined) {
    return undefined;
  }
  const sub = (key: string): Reader[] =>
    r.items(key).flatMap((v, i) => {
      const s = Reader.of(v, `${r.pathOf(key)}[${i}]`, r.problems);
      return s ? [s] : [];
    });
  return {
    output,
    axis: r.count("axis") ?? 0,
    length,
    periodic: r.bool("periodic") ?? false,
    halo_width: r.num("halo_width", { nullable: true }) ?? null,
    ranks: sub("ranks").map((s) => ({ rank: s.count("rank") ?? 0, lo: s.num("lo") ?? 0, hi: s.num("hi") ?? 0 })),
    worst: sub("worst").map((s) => ({
      index: s.count("index") ?? 0,
      rank: s.count("rank") ?? 0,
      position: s.num("position") ?? 0,
      abs_diff: s.num("abs_diff") ?? 0,
      component: s.count("component") ?? 0,
    })),
    profile: r.items("profile").map((v) => toNumber(v) ?? 0),
  };
}

/** The |Δ| chart of each failing or suspicious per-atom output (`atom_errors`) of the best attempt, else the last. */
export function renderAtomErrors(attempts: AttemptJson[], best: AttemptJson | undefined, p: Problems, at: (a: AttemptJson) => string): SafeHtml {
  const shown = best ?? attempts[attempts.length - 1];
  if (!shown) {
    return NOTHING;
  }
  const a = new Reader(shown as unknown as Obj, at(shown), p);
  const charts = a.items("atom_errors").flatMap((value, i) => {
    const r = Reader.of(value, `${a.pathOf("atom_errors")}[${i}]`, p);
    const data = r ? atomRecord(r) : undefined;
    return data ? [atomErrorChart(data)] : [];
  });
  if (charts.length === 0) {
    return NOTHING;
  }
  return html`<section id="atom-errors"><h2>Per-atom errors (${attemptLabel(a)})</h2>
${joinHtml(capped(charts, "the per-atom charts", p), "\n")}</section>`;
}
