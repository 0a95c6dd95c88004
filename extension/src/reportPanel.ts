/**
 * The report panel (one webview, reused). Rendering is `reportHtml.ts`; this file owns the panel, its
 * restore after a reload (`WebviewPanelSerializer` + the page's getState/setState) and the messages the
 * page posts, which it hands to `PanelActions`.
 */

import { randomBytes } from "node:crypto";

import * as vscode from "vscode";

import { type ReportMessage, isRecord, keepStanding, looksLikeReportMessage } from "./report";
import { renderCancelledHtml, renderReportHtml } from "./reportHtml";

export const REPORT_VIEW_TYPE = "distcheck.report";

export interface PanelActions {
  openFile(file: string, line: number): Promise<void>;
  goToModule(args: { module: string; cls: string; file?: string; line?: number }): Promise<void>;
  declareAdapter(args: { target: string; qualname: string; remedy: unknown }): Promise<void>;
  applyBestSpec(target: string): Promise<void>;
  exportJson(message: ReportMessage): Promise<void>;
  validate(target: string): Promise<void>;
}

function str(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function num(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

export class ReportPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private current: ReportMessage | undefined;
  /** A target whose validation was cancelled before it had any report here (shown instead of `current`). */
  private cancelledOnly: string | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly actions: PanelActions,
    private readonly log: (line: string) => void = () => undefined,
  ) {
    this.disposables.push(
      vscode.window.registerWebviewPanelSerializer(REPORT_VIEW_TYPE, {
        deserializeWebviewPanel: (panel: vscode.WebviewPanel, state: unknown): Promise<void> => {
          const message = isRecord(state) && looksLikeReportMessage(state.message) ? state.message : undefined;
          this.attach(panel);
          this.current = message;
          this.render();
          return Promise.resolve();
        },
      }),
      vscode.workspace.onDidGrantWorkspaceTrust(() => this.render()),
    );
  }

  get message(): ReportMessage | undefined {
    return this.current;
  }

  get visible(): boolean {
    return !!this.panel;
  }

  /** Shows `message` (or the current one); creates the panel when needed. The same report shown again
   * keeps what the panel learnt about it since (stale, cancelled). */
  show(message: ReportMessage | undefined, options: { preserveFocus: boolean } = { preserveFocus: false }): void {
    if (message) {
      this.current = keepStanding(message, this.current);
      this.cancelledOnly = undefined;
    }
    if (this.panel) {
      this.panel.reveal(undefined, options.preserveFocus);
    } else {
      const panel = vscode.window.createWebviewPanel(
        REPORT_VIEW_TYPE,
        "Distcheck report",
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: options.preserveFocus },
        this.webviewOptions(),
      );
      this.attach(panel);
    }
    this.render();
  }

  /** Updates the panel if it is open, without revealing it. */
  update(message: ReportMessage): void {
    this.current = message;
    this.cancelledOnly = undefined;
    if (this.panel) {
      this.render();
    }
  }

  /** The shown report of `target` no longer holds: `what` changed after it ("stale — validate again"). */
  markStale(target: string, what: string): void {
    if (this.current?.target === target && this.current.stale !== what) {
      this.update({ ...this.current, stale: what });
    }
  }

  /**
   * The validation of `target` was cancelled: the panel shows its last report (the shown one, else
   * `last`) marked cancelled ("Validate again" first), or, when there is none, a page saying so with
   * Validate again.
   */
  markCancelled(target: string, last?: ReportMessage): void {
    const report = this.current?.target === target ? this.current : last?.target === target ? last : undefined;
    if (report) {
      if (report !== this.current || report.cancelled !== true) {
        this.update({ ...keepStanding(report, this.current), cancelled: true });
      }
      return;
    }
    this.cancelledOnly = target;
    this.render();
  }

  /** Shows the cancelled page of `target` (which has no report to show); creates the panel when needed. */
  showCancelled(target: string): void {
    this.cancelledOnly = target;
    this.show(undefined);
  }

  private webviewOptions(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    return {
      enableScripts: true,
      enableFindWidget: true,
      retainContextWhenHidden: false,
      localResourceRoots: [vscode.Uri.joinPath(this.extensionUri, "extension", "media")],
    };
  }

  private attach(panel: vscode.WebviewPanel): void {
    this.panel = panel;
    panel.webview.options = this.webviewOptions();
    panel.iconPath = vscode.Uri.joinPath(this.extensionUri, "extension", "media", "icon.svg");
    panel.onDidDispose(() => {
      if (this.panel === panel) {
        this.panel = undefined;
      }
    });
    panel.webview.onDidReceiveMessage((msg: unknown) => this.onMessage(msg));
  }

  private render(): void {
    const panel = this.panel;
    if (!panel) {
      return;
    }
    const webview = panel.webview;
    const options = {
      nonce: randomBytes(18).toString("base64"),
      cspSource: webview.cspSource,
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "extension", "media", "report.js")).toString(),
      trusted: vscode.workspace.isTrusted,
    };
    if (this.cancelledOnly !== undefined) {
      panel.title = `Distcheck: ${this.cancelledOnly}`;
      webview.html = renderCancelledHtml(this.cancelledOnly, options);
      return;
    }
    panel.title = this.current ? `Distcheck: ${this.current.target}` : "Distcheck report";
    webview.html = renderReportHtml(this.current, options);
  }

  private async onMessage(msg: unknown): Promise<void> {
    if (!isRecord(msg) || typeof msg.type !== "string") {
      return;
    }
    const args = isRecord(msg.args) ? msg.args : {};
    if (msg.type !== "ready") {
      this.log(`report panel: ${msg.type} ${JSON.stringify(args).slice(0, 200)}`);
    }
    try {
      switch (msg.type) {
        case "openFile":
          await this.actions.openFile(str(args.file), num(args.line) ?? 1);
          break;
        case "goToModule":
          await this.actions.goToModule({ module: str(args.module), cls: str(args.cls), file: str(args.file) || undefined, line: num(args.line) });
          break;
        case "declareAdapter":
          await this.actions.declareAdapter({ target: str(args.target), qualname: str(args.qualname), remedy: args.remedy });
          break;
        case "applyBestSpec":
          await this.actions.applyBestSpec(str(args.target) || this.current?.target || "");
          break;
        case "exportJson":
          if (this.current) {
            await this.actions.exportJson(this.current);
          }
          break;
        case "validate":
          await this.actions.validate(str(args.target) || this.cancelledOnly || this.current?.target || "");
          break;
        default:
          break;
      }
    } catch (error) {
      void vscode.window.showErrorMessage(`Distcheck: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  dispose(): void {
    this.panel?.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
