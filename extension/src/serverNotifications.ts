/**
 * The server's notifications turned into events for the status bar and the report panel:
 * `distcheck/report` (a finished validation's report) and `$/progress` (a validation's begin, steps and
 * end, shown as a cancellable notification whose cancel is sent back to the server).
 */

import * as vscode from "vscode";
import {
  type LanguageClient,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
  type WorkDoneProgressBegin,
  type WorkDoneProgressEnd,
  type WorkDoneProgressReport,
} from "vscode-languageclient/node";

import { type ReportMessage, looksLikeReportMessage } from "./report";
import { targetFromProgressTitle } from "./status";

export interface ServerEvents {
  onReport(message: ReportMessage): void;
  onProgressBegin(target: string, message: string): void;
  onProgressStep(target: string, message: string): void;
  onProgressEnd(target: string, message: string): void;
  onServerProblem(problem: string | undefined): void;
}

/** Hands each `distcheck/report` notification that carries a report to `events.onReport`; logs one that does not. */
export function relayReports(client: LanguageClient, events: ServerEvents, log: (line: string) => void): void {
  client.onNotification("distcheck/report", (params: unknown) => {
    if (looksLikeReportMessage(params)) {
      events.onReport(params);
    } else {
      log("ignored a distcheck/report notification that does not carry a report");
    }
  });
}

interface OpenProgress {
  target: string;
  resolve: () => void;
  report: ((message: string) => void) | undefined;
  dispose: { dispose(): void };
}

/** The validations in progress, by work-done token: each one's notification and its events. */
export class ProgressRelay {
  private readonly open = new Map<string, OpenProgress>();

  constructor(private readonly events: ServerEvents) {}

  /**
   * Replaces the client's built-in work-done progress UI with ours: the same cancellable notification,
   * plus the step for the status bar (the client offers no other hook into `$/progress`).
   */
  hook(client: LanguageClient): void {
    client.onRequest(WorkDoneProgressCreateRequest.type, (params) => {
      const token = params.token;
      const key = String(token);
      let entry: OpenProgress | undefined;
      const handler = client.onProgress(
        WorkDoneProgress.type,
        token,
        (value: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd) => {
          if (value.kind === "begin") {
            const target = targetFromProgressTitle(value.title) ?? value.title;
            let resolveDone: () => void = () => undefined;
            const done = new Promise<void>((resolve) => {
              resolveDone = resolve;
            });
            entry = { target, resolve: resolveDone, report: undefined, dispose: handler };
            this.open.set(key, entry);
            this.events.onProgressBegin(target, value.message ?? "");
            const current = entry;
            void vscode.window.withProgress(
              { location: vscode.ProgressLocation.Notification, title: value.title, cancellable: value.cancellable === true },
              (progress, cancel) => {
                current.report = (message) => progress.report({ message });
                if (value.message) {
                  progress.report({ message: value.message });
                }
                cancel.onCancellationRequested(() => {
                  void client.sendNotification(WorkDoneProgressCancelNotification.type, { token });
                });
                return done;
              },
            );
          } else if (value.kind === "report") {
            if (entry && value.message) {
              entry.report?.(value.message);
              this.events.onProgressStep(entry.target, value.message);
            }
          } else {
            if (entry) {
              this.events.onProgressEnd(entry.target, value.message ?? "");
              entry.resolve();
            }
            this.open.delete(key);
            handler.dispose();
          }
        },
      );
    });
  }

  /** Ends every open progress (the server stopped or restarted): its notification closes and its end event fires. */
  endAll(): void {
    for (const entry of this.open.values()) {
      this.events.onProgressEnd(entry.target, "");
      entry.resolve();
      entry.dispose.dispose();
    }
    this.open.clear();
  }
}
