/**
 * What the status bar item says. Pure (no `vscode` import): `StatusModel` holds the running validations
 * (with their current step, from `$/progress`) and the last verdict per target (from `distcheck/report`);
 * `statusView` turns it into text, tooltip and a tone. The verdict shown is the report's `state` (never
 * re-derived here); a cancelled run and a verdict made stale by an edit are shown as such.
 */

import { type ReportState, type ReportSummary, type Verdict } from "./report";
import { forDisplay } from "./safeText";

export interface TargetStatus {
  summary: ReportSummary;
  at: number;
  /** The run after this report was cancelled: the report is no longer the target's verdict. */
  cancelled?: boolean;
  /** What changed after the report (the spec or model file), so its verdict may no longer hold. */
  stale?: string;
}

/** A progress end message that says the run was cancelled (runs.py ends a cancelled run with "cancelled"). */
export function endedCancelled(message: string | undefined): boolean {
  return (message ?? "").trim() === "cancelled";
}

export type Tone = "normal" | "error" | "warning";

export interface StatusView {
  text: string;
  tooltip: string;
  tone: Tone;
}

/** `✓ target`, `$(lightbulb) target: fix available — apply`, `✗ target: N outputs failing`,
 * `⚠ target: inconclusive`, `✗ target: error` (by the report's `state`, else its verdict). */
export function verdictText(target: string, summary: Pick<ReportSummary, "verdict" | "nFailing"> & { state?: ReportState }): string {
  switch (summary.state ?? summary.verdict) {
    case "passed_after_fix":
      return `$(lightbulb) ${target}: fix available — apply`;
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

export function verdictTone(verdict: Verdict | ReportState): Tone {
  return verdict === "passed" ? "normal" : verdict === "inconclusive" || verdict === "passed_after_fix" ? "warning" : "error";
}

/** The status text of one target's last entry: cancelled, stale, else its verdict. */
export function entryText(target: string, st: TargetStatus): string {
  if (st.cancelled) {
    return `$(circle-slash) ${target}: cancelled`;
  }
  if (st.stale) {
    return `$(history) ${target}: stale — validate again`;
  }
  return verdictText(target, st.summary);
}

function entryTone(st: TargetStatus): Tone {
  return st.cancelled ? "normal" : st.stale ? "warning" : verdictTone(st.summary.state);
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

  /** The run of `target` was cancelled: recorded as such, not as its previous verdict. */
  cancelled(target: string): void {
    this.running.delete(target);
    const prev = this.last.get(target);
    const summary: ReportSummary = prev?.summary ?? { verdict: "error", state: "error", nFailing: 0, failing: [], headline: "" };
    this.last.set(target, { summary: { ...summary, headline: "cancelled — validate again for a verdict" }, at: ++this.clock, cancelled: true });
  }

  /** `what` (a file) changed after the last report of `target`: its verdict goes stale. */
  stale(target: string, what: string): void {
    const prev = this.last.get(target);
    if (prev && !prev.cancelled) {
      this.last.set(target, { ...prev, stale: what });
    }
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

/** What the status item shows for `model`; text from the user's code (target names, headlines) by the one rule (`safeText.forDisplay`). */
export function statusView(model: StatusModel): StatusView {
  const view = composeStatus(model);
  return { ...view, text: forDisplay(view.text).replace(/\n/g, " "), tooltip: forDisplay(view.tooltip) };
}

function composeStatus(model: StatusModel): StatusView {
  const lines: string[] = [];
  for (const [target, step] of model.running) {
    lines.push(`$(sync~spin) ${target}: ${step || "starting"}`);
  }
  for (const [target, st] of [...model.last].sort((a, b) => b[1].at - a[1].at)) {
    if (!model.running.has(target)) {
      const why = st.stale ? `${st.stale} changed after the run` : st.summary.headline;
      lines.push(`${entryText(target, st)}${why ? ` — ${why}` : ""}`);
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
    text: entryText(target, st),
    tooltip: `Distcheck — click to show the report\n${lines.join("\n")}`,
    tone: entryTone(st),
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

/** Local paths of the files a report's verdict rests on: its spec file and the model (factory) file. */
export function reportFiles(message: { specUri: string | null; report: { target?: unknown } }): string[] {
  const out: string[] = [];
  const add = (p: unknown): void => {
    if (typeof p === "string" && p) {
      const path = p.startsWith("file://") ? decodeURIComponent(p.replace(/^file:\/\//, "")) : p;
      if (!out.includes(path)) {
        out.push(path);
      }
    }
  };
  add(message.specUri);
  const target = message.report.target;
  if (typeof target === "object" && target !== null) {
    const t = target as Record<string, unknown>;
    add(t.spec_path);
    const factory = t.factory;
    if (typeof factory === "object" && factory !== null) {
      add((factory as Record<string, unknown>).file);
    }
  }
  return out;
}
