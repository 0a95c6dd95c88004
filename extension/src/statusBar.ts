/** The status bar item: idle / running with the current step / last verdict; a click opens the report. */

import * as vscode from "vscode";

import { type ReportSummary } from "./report";
import { StatusModel, statusView } from "./status";

export class StatusBar implements vscode.Disposable {
  readonly model = new StatusModel();
  private readonly item: vscode.StatusBarItem;

  constructor() {
    this.item = vscode.window.createStatusBarItem("distcheck.status", vscode.StatusBarAlignment.Left, 10);
    this.item.name = "Distcheck";
    this.item.command = "distcheck.showReport";
    this.render();
    this.item.show();
  }

  started(target: string, step: string): void {
    this.model.started(target, step);
    this.render();
  }

  step(target: string, step: string): void {
    this.model.step(target, step);
    this.render();
  }

  finished(target: string): void {
    this.model.finished(target);
    this.render();
  }

  reported(target: string, summary: ReportSummary): void {
    this.model.reported(target, summary);
    this.render();
  }

  cancelled(target: string): void {
    this.model.cancelled(target);
    this.render();
  }

  stale(target: string, what: string): void {
    this.model.stale(target, what);
    this.render();
  }

  problem(message: string | undefined): void {
    this.model.problem = message;
    this.render();
  }

  runningTargets(): string[] {
    return [...this.model.running.keys()];
  }

  private render(): void {
    const view = statusView(this.model);
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.backgroundColor =
      view.tone === "error"
        ? new vscode.ThemeColor("statusBarItem.errorBackground")
        : view.tone === "warning"
          ? new vscode.ThemeColor("statusBarItem.warningBackground")
          : undefined;
    void vscode.commands.executeCommand("setContext", "distcheck.running", this.model.running.size > 0);
  }

  dispose(): void {
    this.item.dispose();
  }
}
