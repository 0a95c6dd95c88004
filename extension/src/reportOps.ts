/**
 * The first torch operation whose value departs (`DivergentOp`: `layer_divergence.first_op`,
 * `rank_disagreements[].first_op`): the op, its file:line as a link that opens it, its function and
 * what it departs from. Pure; read through `reportCheck.Reader`, built with the escaping `html` template.
 */

import { type Reader } from "./reportCheck";
import { NOTHING, type SafeHtml, fmt, html, link } from "./reportMarkup";

function baseName(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

/** `aimnet/nbops.py:742`: a path inside an installed package from the package down, else the file's name. */
function packagePath(site: string): string {
  const parts = site.split(/[\\/]/);
  const at = Math.max(parts.lastIndexOf("site-packages"), parts.lastIndexOf("dist-packages"));
  return at >= 0 ? parts.slice(at + 1).join("/") : baseName(site);
}

/** `` `matmul` (Tensor.matmul) at model.py:24 in reduce, against the reference on ranks 0, 1, rel diff 0.25 ``, or NOTHING without one. */
export function renderFirstOp(op: Reader | undefined): SafeHtml {
  if (!op) {
    return NOTHING;
  }
  const name = op.str("op", { required: true });
  const file = op.str("file", { required: true });
  const line = op.count("line", { required: true });
  if (!name || !file || line === undefined) {
    return NOTHING;
  }
  const symbol = op.str("symbol") ?? name;
  const fn = op.str("function");
  const call = op.count("call");
  const against = op.str("against") === "ranks" ? "rank 0's value" : "the single-process value";
  const ranks = op
    .items("ranks")
    .filter((r) => typeof r === "number")
    .join(", ");
  const compared = op.count("compared");
  const site = op.str("site");
  return html`<code>${symbol}</code>${symbol !== name ? html` <span class="dim">${name}</span>` : NOTHING} at ${link(
    `${baseName(file)}:${fmt(line)}`,
    "openFile",
    { file, line },
    file,
  )}${fn ? html` in <code>${fn}</code>` : NOTHING}${call ? ` (call ${fmt(call + 1)} there)` : ""}${
    site ? html` <span class="dim">issued inside the package it calls, at ${packagePath(site)}</span>` : NOTHING
  } — leaves ${against}${
    ranks ? ` on rank${ranks.includes(",") ? "s" : ""} ${ranks}` : ""
  }, rel diff ${fmt(op.num("rel_diff"))}${compared ? html` <span class="dim">(${fmt(compared)} ops before it match)</span>` : NOTHING}`;
}
