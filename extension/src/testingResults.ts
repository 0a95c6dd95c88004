/**
 * What the Testing view records for one validation: a report → passed / failed / errored / skipped with
 * its messages. Pure (no `vscode` import), so unit tests load it.
 *
 * The failure texts are not composed here: a failing output's is the report's derived `failures` (one
 * record per failing output, built once in Python by `distcheck.report.failures`, the same records the
 * CLI's JUnit writes), a pass that needed an auto-fix the derived `fix_failure` (the message of the
 * JUnit's `fixed-pass` failure), so the Testing view and the JUnit file cannot drift.
 */

import { type ReportJson, attemptsOf, bestAttempt, degenerate, headline, isRecord, verdictOf } from "./report";

/** One TestMessage: `expected` / `actual` make it a diff message; `location` is the user's file:line (1-based). */
export interface OutcomeMessage {
  message: string;
  expected?: string;
  actual?: string;
  location?: { file: string; line: number };
}

export type TestOutcome =
  | { kind: "passed" }
  | { kind: "failed"; messages: OutcomeMessage[] }
  | { kind: "errored"; messages: OutcomeMessage[] }
  | { kind: "skipped"; reason: string };

/** The report's state: its `state` field when the server writes one, else the same rule from `verdict` and `fix_applied`. */
export function stateOf(report: ReportJson): string {
  const state = (report as unknown as Record<string, unknown>)["state"];
  if (typeof state === "string" && state) {
    return state;
  }
  const verdict = verdictOf(report);
  return verdict === "passed" && typeof report.fix_applied === "string" && report.fix_applied ? "passed_after_fix" : verdict;
}

/**
 * The report's `failures` (derived, written by the server) as diff messages, each at its culprit line when
 * the report names one (`location`); records missing a string field are skipped.
 */
export function failureMessages(report: ReportJson): OutcomeMessage[] {
  const raw: unknown = (report as unknown as Record<string, unknown>)["failures"];
  if (!Array.isArray(raw)) {
    return [];
  }
  const out: OutcomeMessage[] = [];
  for (const f of raw) {
    if (isRecord(f) && typeof f["message"] === "string" && typeof f["expected"] === "string" && typeof f["actual"] === "string") {
      const at = f["location"];
      const location = isRecord(at) && typeof at["file"] === "string" && typeof at["line"] === "number" ? { file: at["file"], line: at["line"] } : undefined;
      out.push(location ? { message: f["message"], expected: f["expected"], actual: f["actual"], location } : { message: f["message"], expected: f["expected"], actual: f["actual"] });
    }
  }
  return out;
}

/**
 * The failure text of a pass that needed an auto-fix: the report's derived `fix_failure`, composed once in
 * Python (`distcheck.report.failures.fixed_pass_message`), the message of the CLI's JUnit `<failure
 * type="fixed-pass">` too. A report from an older distcheck that lacks it falls back to its headline.
 */
export function fixFailureMessage(report: ReportJson): string {
  const written = report.fix_failure;
  if (typeof written === "string" && written) {
    return written;
  }
  return headline(report) || `Passed only after auto-fix (${report.fix_applied ?? "a fixed spec"}).`;
}

function errorMessage(report: ReportJson): OutcomeMessage {
  const error = bestAttempt(report)?.error;
  if (!error) {
    return { message: headline(report) || "The validation made no attempt: see the Distcheck output for why, fix it and run again." };
  }
  const where = error.user_frame;
  const text = [`${error.type}: ${error.message}`, error.hint].filter((x) => x).join("\n");
  return where && typeof where.file === "string" && typeof where.line === "number"
    ? { message: text, location: { file: where.file, line: where.line } }
    : { message: text };
}

/**
 * The Testing-view outcome of `report`, the same cases as the CLI's JUnit testcase: a failed output is a
 * diff message each; a degenerate partition a failure; a worker/setup error an error at the user's
 * line; a run that passed only after auto-fix a failure saying where to save the fix (`fixFailureMessage`:
 * the spec it started from still fails); a cancelled run skipped.
 */
export function outcomeOf(report: ReportJson): TestOutcome {
  const state = stateOf(report);
  if (state === "cancelled") {
    return { kind: "skipped", reason: "cancelled" };
  }
  if (state === "passed") {
    return { kind: "passed" };
  }
  if (state === "passed_after_fix") {
    return { kind: "failed", messages: [{ message: fixFailureMessage(report) }] };
  }
  if (state === "error") {
    return { kind: "errored", messages: [errorMessage(report)] };
  }
  const messages = failureMessages(report);
  const best = bestAttempt(report);
  const reasons = best ? degenerate(best) : [];
  if (reasons.length) {
    messages.push({ message: `Degenerate partition: a pass proves nothing.\n${reasons.join("\n")}` });
  }
  if (best?.error) {
    messages.push(errorMessage(report));
  }
  if (!messages.length) {
    messages.push({ message: headline(report) || `The validation ${state}: open the report (Distcheck: Show report) for why.` });
  }
  return { kind: "failed", messages };
}

/** The outcome of a validation that ended without a report: cancelled → skipped, else errored with the progress end text. */
export function outcomeWithoutReport(endMessage: string): TestOutcome {
  if (/^cancel/i.test(endMessage.trim())) {
    return { kind: "skipped", reason: "cancelled" };
  }
  const text = endMessage.trim() || "the validation ended without a report";
  return { kind: "errored", messages: [{ message: `Distcheck: ${text}. See the Distcheck output, fix what it says and run again.` }] };
}

/** How many attempts the report made (for the run's output line). */
export function attemptCount(report: ReportJson): number {
  return attemptsOf(report).length;
}
