/**
 * What the status bar item says. Pure (no `vscode` import): `StatusModel` holds the running validations
 * (with their current step, from `$/progress`) and the last verdict per target (from `distcheck/report`);
 * `statusView` turns it into text, tooltip and a tone.
 */

import { type ReportSummary, type Verdict } from "./report";

export interface TargetStatus {
  summary: ReportSummary;
  at: number;
}

export type Tone = "normal" | "error" | "warning";

export interface StatusView {
  text: string;
  tooltip: string;
  tone: Tone;
}

/** `✓ target`, `✗ target: N outputs failing`, `⚠ target: inconclusive`, `✗ target: error`. */
export function verdictText(target: string, summary: Pick<ReportSummary, "verdict" | "nFailing">): string {
  switch (summary.verdict) {
    case "passed":
      return `✓ ${target}`;
    case "failed":
      if (summary.nFailing > 0) {
        return `✗ ${target}: ${summary.nFailing} output${summary.nFailing === 1 ? "" : "s"} failing`;
      }
      return `✗ ${target}: failed`;
    case "inconclusive":
      return `⚠ ${target}: inconclusive`;
    case "error":
      return `✗ ${target}: error`;
  }
}

export function verdictTone(verdict: Verdict): Tone {
  return verdict === "passed" ? "normal" : verdict === "inconclusive" ? "warning" : "error";
}

export class StatusModel {
  /** target → current step ("" until the first progress report). */
  readonly running = new Map<string, string>();
  /** target → last verdict. */
  readonly last = new Map<string, TargetStatus>();
  /** Set when the server is not usable (not importable, crashed too often). */
  problem: string | undefined;
  private clock = 0;

  started(target: string, step = ""): void {
    this.running.set(target, step);
  }

  step(target: string, step: string): void {
    this.running.set(target, step);
  }

  finished(target: string): void {
    this.running.delete(target);
  }

  reported(target: string, summary: ReportSummary): void {
    this.running.delete(target);
    this.last.set(target, { summary, at: ++this.clock });
  }

  latest(): [string, TargetStatus] | undefined {
    let found: [string, TargetStatus] | undefined;
    for (const entry of this.last) {
      if (!found || entry[1].at > found[1].at) {
        found = entry;
      }
    }
    return found;
  }
}

export function statusView(model: StatusModel): StatusView {
  const lines: string[] = [];
  for (const [target, step] of model.running) {
    lines.push(`$(sync~spin) ${target}: ${step || "starting"}`);
  }
  for (const [target, st] of [...model.last].sort((a, b) => b[1].at - a[1].at)) {
    if (!model.running.has(target)) {
      lines.push(`${verdictText(target, st.summary)}${st.summary.headline ? ` — ${st.summary.headline}` : ""}`);
    }
  }
  if (model.problem) {
    return { text: "$(warning) Distcheck", tooltip: model.problem, tone: "warning" };
  }
  const running = [...model.running];
  if (running.length > 0) {
    const [target, step] = running[running.length - 1] as [string, string];
    const more = running.length > 1 ? ` (+${running.length - 1})` : "";
    return {
      text: `$(sync~spin) Distcheck ${target}: ${step || "starting"}${more}`,
      tooltip: `Validating — click to show the report\n${lines.join("\n")}`,
      tone: "normal",
    };
  }
  const latest = model.latest();
  if (!latest) {
    return { text: "$(beaker) Distcheck", tooltip: "Distcheck: no validation yet — run “Distcheck: Validate distribution”", tone: "normal" };
  }
  const [target, st] = latest;
  return {
    text: verdictText(target, st.summary),
    tooltip: `Distcheck — click to show the report\n${lines.join("\n")}`,
    tone: verdictTone(st.summary.verdict),
  };
}

/** The target named by a progress `begin` title ("Distcheck: <target>"). */
export function targetFromProgressTitle(title: string | undefined): string | undefined {
  if (!title) {
    return undefined;
  }
  const m = /^Distcheck:\s*(.+)$/.exec(title.trim());
  return m ? (m[1] as string).trim() : undefined;
}
