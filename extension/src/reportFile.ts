/**
 * A report read from a file or an editor buffer (Distcheck: Show report on a `.json`). Pure (no
 * `vscode` import).
 */

import { type ReportMessage, looksLikeReport, looksLikeReportMessage } from "./report";

/** The target name a report file stands for: its base name without `.json` and `.report` / `.distcheck-report`. */
export function targetOfReportFile(fileName: string): string {
  const base = fileName.split(/[\\/]/).pop() ?? fileName;
  return base.replace(/\.json$/i, "").replace(/\.(distcheck-)?report$/i, "");
}

/**
 * `text` as a report message: a saved `distcheck/report` message as it is, a bare report (the CLI's
 * `--json` or an exported one) wrapped with the file's name as its target and a notice saying where
 * it was read from; undefined when the text is not JSON or neither of those.
 */
export function reportFromText(text: string, fileName: string, shownPath: string): ReportMessage | undefined {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (looksLikeReportMessage(data)) {
    return data;
  }
  if (looksLikeReport(data)) {
    return { target: targetOfReportFile(fileName), specUri: null, report: data, notice: `read from ${shownPath}` };
  }
  return undefined;
}
