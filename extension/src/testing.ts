/**
 * The Testing view: each validation target (the daemon's `distcheck/targets`) is a test item placed at
 * its factory's `def`, so the gutter shows the run icon there. A Run profile validates the chosen items
 * one after another through the same command as the palette (`distcheck.validateCommand`); cancelling
 * the run cancels the daemon's validation. Each report becomes passed / failed / errored / skipped
 * (`testingResults.outcomeOf`); VS Code keeps the history. A report of a validation started anywhere else
 * (palette, CodeLens, panel) is recorded on its item too, so every surface shows the same state; an edit
 * of a target's model or spec file marks its result out of date. The items follow the daemon's list,
 * read again on trust, a server (re)start and Python or spec files created, saved or deleted.
 */

import * as vscode from "vscode";

import { SERVER_COMMANDS } from "./client";
import { type Session } from "./commands";
import { type ReportMessage, type TargetInfo } from "./report";
import { forDisplay } from "./safeText";
import { type OutcomeMessage, type TestOutcome, outcomeOf, outcomeWithoutReport } from "./testingResults";
import { factoryFunction, factoryUriOf, moduleLevelDefs } from "./targets";

/** How long to wait for the report after a validation's progress ended without one. */
const REPORT_GRACE_MS = 3000;

interface Waiter {
  resolve(outcome: { outcome: TestOutcome; report?: ReportMessage }): void;
  timer?: ReturnType<typeof setTimeout>;
}

/** The Testing view's controller; `reported` / `progressEnded` are fed from the server's events. */
export class TestingView implements vscode.Disposable {
  readonly controller: vscode.TestController;
  private readonly targets = new Map<string, TargetInfo>();
  private readonly waiters = new Map<string, Waiter>();
  private queue: Promise<void> = Promise.resolve();
  private pending: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly session: Session) {
    this.controller = vscode.tests.createTestController("distcheck", "Distcheck");
    this.controller.refreshHandler = () => this.refresh();
    this.controller.createRunProfile("Validate distribution", vscode.TestRunProfileKind.Run, (request, token) => this.run(request, token), true);
  }

  dispose(): void {
    if (this.pending) {
      clearTimeout(this.pending);
    }
    this.controller.dispose();
  }

  /** Re-reads the targets from the daemon and rebuilds the items (kept empty when the server is not running). */
  async refresh(): Promise<void> {
    const targets = await this.session.server.targets().catch(() => [] as TargetInfo[]);
    const items: vscode.TestItem[] = [];
    this.targets.clear();
    for (const t of targets) {
      this.targets.set(t.name, t);
      const where = factoryUriOf(t) ?? t.uri;
      const uri = where ? vscode.Uri.parse(where) : undefined;
      const item = this.controller.createTestItem(t.name, forDisplay(t.name).replace(/\n/g, " "), uri);
      item.description = t.spec
        ? `${vscode.workspace.asRelativePath(t.spec)}${specNote(t.specRule)}`
        : t.source === "file"
          ? "model_factory in this file"
          : undefined;
      if (uri) {
        const line = await factoryLine(uri, t);
        item.range = new vscode.Range(line, 0, line, 0);
      }
      items.push(item);
    }
    this.controller.items.replace(items);
  }

  /**
   * A report arrived, from any entry point: settles the Testing-view run waiting for it, else records it
   * as a run of its own on the target's item (a validation from the palette, a CodeLens or the panel), so
   * the item shows the same verdict as the status bar, the panel and the diagnostics.
   */
  reported(message: ReportMessage): void {
    const result = { outcome: outcomeOf(message.report), report: message };
    if (this.waiters.has(message.target)) {
      this.settle(message.target, result);
      return;
    }
    void this.recordOutside(message.target, result);
  }

  private async recordOutside(target: string, result: { outcome: TestOutcome; report?: ReportMessage }): Promise<void> {
    let item = this.controller.items.get(target);
    if (!item) {
      await this.refresh(); // a target the view has not listed yet (created since the last look)
      item = this.controller.items.get(target);
    }
    if (!item) {
      return;
    }
    const run = this.controller.createTestRun(new vscode.TestRunRequest([item]), `Distcheck: ${target}`, true);
    run.started(item);
    if (result.report?.notice) {
      run.appendOutput(`${forDisplay(result.report.notice)}\r\n`, undefined, item);
    }
    record(run, item, result.outcome, reportSeconds(result.report) * 1000);
    run.end();
  }

  /** The files of `path`'s targets changed (edited, saved, created, deleted): their results are out of date. */
  invalidate(path: string): void {
    const stale: vscode.TestItem[] = [];
    this.controller.items.forEach((item) => {
      const t = this.targets.get(item.id);
      if (item.uri?.fsPath === path || (t?.spec && vscode.Uri.parse(t.specUri ?? "").fsPath === path)) {
        stale.push(item);
      }
    });
    if (stale.length) {
      this.controller.invalidateTestResults(stale);
    }
  }

  /** Re-reads the targets soon (after `delayMs`, once for a burst of file events). */
  refreshSoon(delayMs = 500): void {
    if (this.pending) {
      clearTimeout(this.pending);
    }
    this.pending = setTimeout(() => {
      this.pending = undefined;
      void this.refresh();
    }, delayMs);
  }

  /** A validation's progress ended; when no report follows soon, the run records the end message. */
  progressEnded(target: string, message: string): void {
    const waiter = this.waiters.get(target);
    if (waiter && !waiter.timer) {
      waiter.timer = setTimeout(() => this.settle(target, { outcome: outcomeWithoutReport(message) }), REPORT_GRACE_MS);
    }
  }

  private settle(target: string, result: { outcome: TestOutcome; report?: ReportMessage }): void {
    const waiter = this.waiters.get(target);
    if (waiter) {
      this.waiters.delete(target);
      if (waiter.timer) {
        clearTimeout(waiter.timer);
      }
      waiter.resolve(result);
    }
  }

  private run(request: vscode.TestRunRequest, token: vscode.CancellationToken): Promise<void> {
    // one run at a time: a second Run All waits for the first
    const next = this.queue.then(() => this.runNow(request, token));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async runNow(request: vscode.TestRunRequest, token: vscode.CancellationToken): Promise<void> {
    const run = this.controller.createTestRun(request);
    const items: vscode.TestItem[] = [];
    if (request.include) {
      items.push(...request.include);
    } else {
      this.controller.items.forEach((item) => items.push(item));
    }
    const excluded = new Set((request.exclude ?? []).map((i) => i.id));
    const todo = items.filter((i) => !excluded.has(i.id));
    todo.forEach((item) => run.enqueued(item));
    try {
      for (const item of todo) {
        if (token.isCancellationRequested) {
          run.skipped(item);
          continue;
        }
        await this.runOne(run, item, token);
      }
    } finally {
      run.end();
    }
  }

  private async runOne(run: vscode.TestRun, item: vscode.TestItem, token: vscode.CancellationToken): Promise<void> {
    const target = this.targets.get(item.id);
    const name = item.id;
    run.started(item);
    const started = Date.now();
    const done = new Promise<{ outcome: TestOutcome; report?: ReportMessage }>((resolve) => this.waiters.set(name, { resolve }));
    const onCancel = token.onCancellationRequested(() => {
      void this.session.server.executeServerCommand(SERVER_COMMANDS.cancel, [name]).catch(() => undefined);
      // the daemon's end of the progress (or its report) settles the waiter; this bounds the wait
      this.progressEnded(name, "cancelled");
    });
    try {
      const arg = target?.source === "file" ? (factoryUriOf(target) ?? target.uri ?? name) : name;
      await vscode.commands.executeCommand("distcheck.validateCommand", arg);
      if (this.waiters.has(name) && !this.session.status.model.running.has(name)) {
        // the command did not start a validation (it said why in a notification)
        this.progressEnded(name, "not started: the validation did not start");
      }
      const { outcome, report } = await done;
      if (report?.notice) {
        run.appendOutput(`${forDisplay(report.notice)}\r\n`, undefined, item);
      }
      record(run, item, outcome, Date.now() - started);
    } finally {
      onCancel.dispose();
      this.waiters.delete(name);
    }
  }
}

function toTestMessage(m: OutcomeMessage): vscode.TestMessage {
  const text = forDisplay(m.message); // user text (names, exception messages) by the one rule
  const message =
    m.expected !== undefined && m.actual !== undefined ? vscode.TestMessage.diff(text, forDisplay(m.expected), forDisplay(m.actual)) : new vscode.TestMessage(text);
  if (m.location) {
    message.location = new vscode.Location(vscode.Uri.file(m.location.file), new vscode.Position(Math.max(0, m.location.line - 1), 0));
  }
  return message;
}

function record(run: vscode.TestRun, item: vscode.TestItem, outcome: TestOutcome, ms: number): void {
  switch (outcome.kind) {
    case "passed":
      run.passed(item, ms);
      return;
    case "failed":
      run.failed(item, outcome.messages.map(toTestMessage), ms);
      return;
    case "errored":
      run.errored(item, outcome.messages.map(toTestMessage), ms);
      return;
    case "skipped":
      run.skipped(item);
      return;
  }
}

/** The validation's own duration (the report's `meta.timings.total`, seconds), 0 when absent. */
function reportSeconds(report: ReportMessage | undefined): number {
  const total: unknown = report?.report.meta.timings?.["total"];
  return typeof total === "number" && Number.isFinite(total) ? total : 0;
}

/** What the Testing item says after its spec file: the daemon's rule, or that the file is not saved yet (the wrapper's own spec runs). */
function specNote(rule: string | undefined): string {
  if (!rule) {
    return "";
  }
  return rule === "wrapper" ? " (not saved yet: the wrapper's spec)" : ` (${rule})`;
}

/** 0-based line of the target's factory `def` in `uri` (the server's line, else 0, when the file cannot be read). */
async function factoryLine(uri: vscode.Uri, t: TargetInfo): Promise<number> {
  const serverLine = t.factoryUri ? t.factoryLine : t.line;
  const fallback = typeof serverLine === "number" && serverLine >= 0 ? serverLine : 0;
  try {
    const text = new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
    return moduleLevelDefs(text, factoryFunction(t.factory) ?? "model_factory")[0] ?? fallback;
  } catch {
    return fallback;
  }
}
