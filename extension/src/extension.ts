/**
 * Activation: wires the server manager (language client), status bar, CodeLens, report panel and the
 * commands together. Everything the user sees comes from the daemon (`python -m distcheck.lsp`,
 * docs/protocol.md); the commands (`commands.ts`, `reportCommands.ts`) and the panel's actions
 * (`panelActions.ts`) only route.
 */

import * as path from "node:path";

import * as vscode from "vscode";

import { ServerManager, readInterpreterSetting } from "./client";
import { ValidateLensProvider, hasModuleFactory } from "./codeLens";
import { type Session, cancel, saveSpec, validate } from "./commands";
import { panelActions } from "./panelActions";
import { type ReportMessage, summarize } from "./report";
import { showReport } from "./reportCommands";
import { ReportPanel } from "./reportPanel";
import { findInterpreter } from "./serverEnvironment";
import { completeStep, installIntoInterpreter } from "./setup";
import { registerSpecSchema } from "./specSchema";
import { endedCancelled, reportFiles } from "./status";
import { StatusBar } from "./statusBar";
import { TestingView } from "./testing";

/** What the extension exposes to tests (`vscode.extensions.getExtension(...).exports`). */
export interface DistcheckApi {
  reports: Map<string, ReportMessage>;
  server: ServerManager;
  status: StatusBar;
}

let activeServer: ServerManager | undefined;

export function activate(context: vscode.ExtensionContext): DistcheckApi {
  const reports = new Map<string, ReportMessage>();
  const status = new StatusBar();
  // `session` and `panel` are declared below; the events only fire once activation has finished.
  const server = new ServerManager(context, {
    onReport: (message) => {
      reports.set(message.target, message);
      const summary = summarize(message.report);
      status.reported(message.target, summary);
      server.log(`report for ${message.target}: ${summary.verdict} — ${summary.headline}`);
      panel.show(message, { preserveFocus: true });
      testing.reported(message);
      if (summary.verdict !== "error") {
        completeStep("distcheck.validateExample"); // the validation ran to a verdict
      }
    },
    onProgressBegin: (target, message) => status.started(target, message),
    onProgressStep: (target, message) => status.step(target, message),
    onProgressEnd: (target, message) => {
      if (endedCancelled(message)) {
        status.cancelled(target);
        panel.markCancelled(target, reports.get(target));
      } else {
        status.finished(target);
      }
      testing.progressEnded(target, message);
    },
    onServerProblem: (problem) => status.problem(problem),
  });
  context.subscriptions.push(registerSpecSchema(context, server)); // before the JSON service asks for the spec schema
  const session: Session = { server, status, reports };
  const panel = new ReportPanel(context.extensionUri, panelActions(session), (line) => server.log(line));
  activeServer = server;
  const lenses = new ValidateLensProvider(() => server.targets());
  const testing = new TestingView(session);

  const watcher = vscode.workspace.createFileSystemWatcher("**/*.{py,json}");
  const markStale = (file: string): void => {
    for (const [target, message] of reports) {
      if (!status.runningTargets().includes(target) && reportFiles(message).includes(file)) {
        status.stale(target, path.basename(file));
        panel.markStale(target, path.basename(file));
      }
    }
  };

  const updateFactoryContext = (): void => {
    void vscode.commands.executeCommand("setContext", "distcheck.hasFactory", hasModuleFactory(vscode.window.activeTextEditor?.document));
  };

  context.subscriptions.push(
    server,
    status,
    lenses,
    panel,
    testing,
    vscode.commands.registerCommand("distcheck.validateCommand", (arg?: unknown) => validate(session, arg)),
    vscode.commands.registerCommand("distcheck.cancelCommand", (arg?: unknown) => cancel(session, arg)),
    vscode.commands.registerCommand("distcheck.showReport", (arg?: unknown) => showReport(session, panel, arg)),
    vscode.commands.registerCommand("distcheck.saveSpecCommand", (arg?: unknown) => saveSpec(session, arg)),
    vscode.commands.registerCommand("distcheck.restartServer", async () => {
      await server.restart();
      lenses.refresh();
      void testing.refresh();
    }),
    vscode.commands.registerCommand("distcheck.showOutput", () => server.output.show(true)),
    vscode.commands.registerCommand("distcheck.installServer", async () => {
      const installed = await installIntoInterpreter({
        extensionPath: context.extensionPath,
        output: server.output,
        interpreter: findInterpreter,
        restart: async () => {
          await server.restart();
        },
      });
      if (installed) {
        lenses.refresh();
        void testing.refresh();
      }
    }),
    vscode.languages.registerCodeLensProvider(
      [
        { scheme: "file", language: "python" },
        { scheme: "file", pattern: "**/pyproject.toml" },
      ],
      lenses,
    ),
    vscode.workspace.onDidSaveTextDocument((doc) => {
      if (path.basename(doc.fileName) === "pyproject.toml") {
        lenses.refresh();
        void testing.refresh();
      }
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("distcheck.interpreter")) {
        const now = readInterpreterSetting(vscode.workspace.workspaceFolders?.[0]);
        server.log(`distcheck.interpreter changed (now “${now.value || "unset"}”${now.scope ? ` in ${now.scope}` : ""}): restarting the server`);
        void server.restart().then(() => {
          lenses.refresh();
          void testing.refresh();
        });
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      lenses.refresh();
      testing.refreshSoon(0);
    }),
    // a verdict goes stale when its spec or model file changes after it (edited, saved, or changed on disk)
    vscode.workspace.onDidChangeTextDocument((e) => {
      if (e.contentChanges.length > 0) {
        markStale(e.document.uri.fsPath);
        testing.invalidate(e.document.uri.fsPath);
      }
    }),
    vscode.workspace.onDidSaveTextDocument((doc) => {
      markStale(doc.uri.fsPath);
      if (doc.languageId === "python" || doc.fileName.endsWith(".distspec.json")) {
        testing.refreshSoon(); // a factory added, renamed or broken
      }
    }),
    watcher,
    watcher.onDidChange((u) => markStale(u.fsPath)),
    // discovery needs no Refresh: a Python or spec file created, deleted or saved may add or drop a target
    watcher.onDidCreate(() => {
      lenses.refresh();
      testing.refreshSoon();
    }),
    watcher.onDidDelete((u) => {
      markStale(u.fsPath);
      lenses.refresh();
      testing.refreshSoon();
    }),
    vscode.window.onDidChangeActiveTextEditor(updateFactoryContext),
  );
  updateFactoryContext();

  server.log(`activated (workspace ${vscode.workspace.isTrusted ? "trusted" : "in Restricted Mode: validation disabled"})`);
  void server.ensure().then((client) => {
    if (client) {
      lenses.refresh();
      void testing.refresh();
    }
  });

  return { reports, server, status };
}

/** Stops the server (and with it the runner and any validation) before the extension host goes. */
export function deactivate(): Promise<void> | undefined {
  const server = activeServer;
  activeServer = undefined;
  return server?.stop();
}
