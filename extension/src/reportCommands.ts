/**
 * Distcheck: Show report — which report the panel shows: a report file, a target's last report (from
 * this session or the server's `distcheck/lastReport`), or the latest one there is.
 */

import * as vscode from "vscode";

import { type Session } from "./commands";
import { type ReportMessage, type TargetInfo } from "./report";
import { reportFromText } from "./reportFile";
import { type ReportPanel } from "./reportPanel";

async function readReportFile(uri: vscode.Uri): Promise<ReportMessage | undefined> {
  const text = new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
  return reportFromText(text, uri.path, uri.fsPath);
}

/** The server's last report of `target`, remembered in the session; undefined when it has none or is unreachable. */
async function lastReport(session: Session, target: string): Promise<ReportMessage | undefined> {
  const message = await session.server.lastReport(target).catch(() => undefined);
  if (message) {
    session.reports.set(message.target, message);
  }
  return message;
}

/** The session's report of a target with what the status item knows of it since: the validation after
 * it was cancelled, or a file it rests on changed (the panel shows the same marks). */
function withStanding(session: Session, message: ReportMessage | undefined): ReportMessage | undefined {
  const st = message ? session.status.model.last.get(message.target) : undefined;
  if (!message || !st || session.reports.get(message.target) !== message) {
    return message;
  }
  return { ...message, ...(st.cancelled ? { cancelled: true } : {}), ...(st.stale ? { stale: st.stale } : {}) };
}

/** Is the target's last validation one that was cancelled before any report of it was seen? */
function cancelledWithoutReport(session: Session, target: string): boolean {
  return session.status.model.last.get(target)?.cancelled === true && !session.reports.has(target);
}

/**
 * Shows, in this order: the report file `arg` (a URI), the report of target `arg`, the latest report of
 * this session (marked cancelled or stale as the status item shows it; a cancelled run with no report
 * as such), the report open in the active JSON editor, the server's last report of any target;
 * else the empty panel that says how to get one.
 */
export async function showReport(session: Session, panel: ReportPanel, arg?: unknown): Promise<void> {
  const { server, status, reports } = session;
  if (arg instanceof vscode.Uri) {
    const message = await readReportFile(arg);
    if (!message) {
      void vscode.window.showErrorMessage(`Distcheck: ${arg.fsPath} is not a distcheck report.`);
      return;
    }
    panel.show(message);
    return;
  }
  if (typeof arg === "string" && arg) {
    if (cancelledWithoutReport(session, arg)) {
      panel.showCancelled(arg);
      return;
    }
    panel.show(withStanding(session, reports.get(arg)) ?? (await lastReport(session, arg)));
    return;
  }
  const latest = status.model.latest();
  if (latest && cancelledWithoutReport(session, latest[0])) {
    panel.showCancelled(latest[0]);
    return;
  }
  const known = withStanding(session, latest && reports.get(latest[0])) ?? panel.message;
  if (known) {
    panel.show(known);
    return;
  }
  const doc = vscode.window.activeTextEditor?.document;
  if (doc && (doc.languageId === "json" || doc.fileName.endsWith(".json"))) {
    const message = reportFromText(doc.getText(), doc.uri.path, doc.uri.fsPath);
    if (message) {
      panel.show(message);
      return;
    }
  }
  if (server.running) {
    for (const t of await server.targets().catch(() => [] as TargetInfo[])) {
      const message = await lastReport(session, t.name);
      if (message) {
        panel.show(message);
        return;
      }
    }
  }
  panel.show(undefined);
}
