/**
 * The TraceReport JSON (`TraceReport.to_dict()` in server/distcheck/report/; its types generated into
 * reportSchema.ts) as the extension reads it, and the messages of docs/protocol.md that carry it. Pure: no `vscode` import, so unit tests load it.
 *
 * Reading is lenient on purpose: the panel must show what it can of a report written by a newer or older
 * distcheck instead of failing; every accessor tolerates a missing or mistyped field.
 */

import { type AttemptJson, type ReportJson } from "./reportSchema";

// The report's JSON types are generated from its JSON Schema (reportSchema.ts); re-exported here so the
// extension keeps importing them from one place.
export type {
  AttemptJson,
  CrashTraceJson,
  DeadlineReachedJson,
  FrameJson,
  HaloCompletenessJson,
  HelperDiagnosisJson,
  JsonNumber,
  LayerDivergenceJson,
  OutputVerdictJson,
  PartitionHealthJson,
  RankDisagreementJson,
  ReceptiveFieldJson,
  ReportJson,
  ReportMetaJson,
  RoundoffFloorJson,
  SampleWarningJson,
  SuspiciousOutputJson,
  SystemHealthJson,
  TargetInfoJson,
  UnroutedOpJson,
  WorkerErrorJson,
} from "./reportSchema";

/** The report's verdict (`TraceReport.verdict`, `REPORT_VERDICTS` in distcheck.report). */
export type Verdict = NonNullable<ReportJson["verdict"]>;

/** Params of the `distcheck/report` notification (and the result of `distcheck/lastReport`). */
export interface ReportMessage {
  target: string;
  specUri: string | null;
  report: ReportJson;
  notice?: string | null;
  /** URIs of the target's files whose unsaved edits the run did not see (it validated the saved files). */
  unsaved?: string[];
  /** Set by the extension when the spec or model changed after the run: what changed. */
  stale?: string | null;
  /** Set by the extension when the target's validation after this report was cancelled. */
  cancelled?: boolean | null;
}

/** The report's verdict state (`TraceReport.state`, `REPORT_STATES` in distcheck.report). */
export type ReportState = NonNullable<ReportJson["state"]>;

/** The report's state as written (`report_state` in Python is the one rule); a report from an older
 * distcheck that lacks it has its verdict as its state. */
export function stateOf(report: ReportJson): ReportState {
  const written = report.state;
  if (written === "passed" || written === "passed_after_fix" || written === "failed" || written === "inconclusive" || written === "error") {
    return written;
  }
  return verdictOf(report);
}

/**
 * One entry of the `distcheck/targets` result. `uri` / `line` (0-based) locate where the target is
 * defined (the `[[tool.distcheck.targets]]` table of a pyproject.toml, or the Python file of a file
 * target); `factoryUri` / `factoryLine` (0-based) the factory's `def`.
 */
export interface TargetInfo {
  name: string;
  factory?: string;
  sample?: string;
  spec?: string | null;
  specUri?: string | null;
  specConfigured?: boolean;
  /** Which rule of the one spec rule (`distcheck.jobs.spec_source`) names `spec`: "explicit", "pyproject", "beside-model" or "wrapper" (no file yet: the wrapper's own spec; fixes create `spec`). */
  specRule?: string;
  source?: "pyproject" | "file";
  uri?: string;
  line?: number;
  factoryUri?: string | null;
  factoryLine?: number | null;
  running?: boolean;
}

// ------------------------------------------------------------------------------------------------
// small readers

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A report number (or its non-finite string form) as a JS number; anything else is undefined. */
export function toNumber(value: unknown): number | undefined {
  if (typeof value === "number") {
    return value;
  }
  if (value === "NaN") {
    return Number.NaN;
  }
  if (value === "Infinity") {
    return Number.POSITIVE_INFINITY;
  }
  if (value === "-Infinity") {
    return Number.NEGATIVE_INFINITY;
  }
  return undefined;
}

/** Any JSON-ish value as text: strings as is, numbers and booleans printed, objects as JSON, null as "". */
export function textOf(value: unknown): string {
  switch (typeof value) {
    case "string":
      return value;
    case "number":
    case "boolean":
    case "bigint":
      return value.toString();
    case "object":
      return value === null ? "" : JSON.stringify(value);
    default:
      return "";
  }
}

/** A free-form string from the report, with the extra leading `~` of escaped "NaN"-like strings removed. */
export function freeString(value: unknown): string {
  if (typeof value !== "string") {
    return textOf(value);
  }
  return /^~+(NaN|Infinity|-Infinity)$/.test(value) ? value.slice(1) : value;
}

/** Is `value` a report document (as opposed to any JSON)? */
export function looksLikeReport(value: unknown): value is ReportJson {
  return isRecord(value) && typeof value.report_version === "number" && Array.isArray(value.attempts);
}

/** `message`, with the stale and cancelled marks of `shown` when it is the same report of the same target. */
export function keepStanding(message: ReportMessage, shown: ReportMessage | undefined): ReportMessage {
  if (!shown || shown.target !== message.target || shown.report !== message.report) {
    return message;
  }
  const kept: ReportMessage = { ...message };
  if (shown.stale && !message.stale) {
    kept.stale = shown.stale;
  }
  if (shown.cancelled && !message.cancelled) {
    kept.cancelled = true;
  }
  return kept;
}

/** Is `value` a `distcheck/report` message? */
export function looksLikeReportMessage(value: unknown): value is ReportMessage {
  return isRecord(value) && typeof value.target === "string" && looksLikeReport(value.report);
}

export function attemptsOf(report: ReportJson): AttemptJson[] {
  return Array.isArray(report.attempts) ? report.attempts.filter(isRecord) : [];
}

export function failingOutputs(attempt: AttemptJson): string[] {
  if (Array.isArray(attempt.failing_outputs)) {
    return attempt.failing_outputs.map(String);
  }
  const verdicts = isRecord(attempt.verdicts) ? attempt.verdicts : {};
  return Object.entries(verdicts)
    .filter(([, v]) => isRecord(v) && v.passed !== true)
    .map(([name]) => name);
}

function degenerateMessages(attempt: AttemptJson): string[] {
  const health = isRecord(attempt.partition_health) ? attempt.partition_health : {};
  const found = health.degenerate;
  if (Array.isArray(found)) {
    return found.map(freeString);
  }
  return found ? [freeString(found)] : [];
}

export function degenerate(attempt: AttemptJson): string[] {
  return degenerateMessages(attempt);
}

function hasVerdicts(attempt: AttemptJson): boolean {
  return isRecord(attempt.verdicts) && Object.keys(attempt.verdicts).length > 0;
}

/**
 * The attempt the report stands on: `attempts[best_attempt]`, the field the engine writes with the one
 * definition of "best" (`distcheck.report.best_attempt_index`). Never recomputed here: a report without
 * a valid `best_attempt` has no best attempt (undefined), and the panel says so.
 */
export function bestAttempt(report: ReportJson): AttemptJson | undefined {
  const attempts = attemptsOf(report);
  const index = report.best_attempt;
  if (typeof index === "number" && Number.isInteger(index) && index >= 0 && index < attempts.length) {
    return attempts[index];
  }
  return undefined;
}

/** The report's verdict: the written one, else derived as `TraceReport.verdict` does. */
export function verdictOf(report: ReportJson): Verdict {
  const written = report.verdict;
  if (written === "passed" || written === "failed" || written === "inconclusive" || written === "error") {
    return written;
  }
  const best = bestAttempt(report);
  if (!best || (best.error && !hasVerdicts(best))) {
    return "error";
  }
  if (degenerateMessages(best).length > 0) {
    return "inconclusive";
  }
  return best.passed ? "passed" : "failed";
}

/**
 * An attempt's number as every message shows it: counted from 1 (attempt 1 is the user's spec, the
 * later ones auto-fix's), as the daemon's diagnostics, its progress and the report's text number them
 * (docs/diagnostics.md); the JSON `index` counts from 0. "?" when the index is not a whole number >= 0.
 */
export function attemptNumber(index: unknown): string {
  return typeof index === "number" && Number.isInteger(index) && index >= 0 ? String(index + 1) : "?";
}

/** The one-liner: the first line of `next_action`. */
export function headline(report: ReportJson): string {
  const text = typeof report.next_action === "string" ? report.next_action : "";
  return text.split("\n").find((line) => line.trim() !== "") ?? "";
}

/** The tolerance that applies to one output: a number, or a dict by output name, kind or "default". */
export function toleranceFor(tol: unknown, name: string, kind: string): number | undefined {
  if (isRecord(tol)) {
    for (const key of [name, kind, "default"]) {
      if (key in tol) {
        return toNumber(tol[key]);
      }
    }
    return undefined;
  }
  return toNumber(tol);
}

/** Short summary of a report for the status bar and notifications. */
export interface ReportSummary {
  verdict: Verdict;
  state: ReportState;
  nFailing: number;
  failing: string[];
  headline: string;
}

export function summarize(report: ReportJson): ReportSummary {
  const best = bestAttempt(report);
  const failing = best ? failingOutputs(best) : [];
  return { verdict: verdictOf(report), state: stateOf(report), nFailing: failing.length, failing, headline: headline(report) };
}
