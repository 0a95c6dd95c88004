/**
 * Activation: the server manager (language client), status bar, CodeLens, report panel and the
 * commands. Everything the user sees comes from the daemon (`python -m distcheck.lsp`, docs/protocol.md);
 * this side only routes.
 */

import * as path from "node:path";

import * as vscode from "vscode";
import { ResponseError } from "vscode-languageclient/node";

import { SERVER_COMMANDS, ServerManager, explainUntrusted } from "./client";
import { ValidateLensProvider, hasModuleFactory } from "./codeLens";
import {
  type ReportMessage,
  type TargetInfo,
  isRecord,
  looksLikeReport,
  looksLikeReportMessage,
  summarize,
} from "./report";
import { type PanelActions, ReportPanel } from "./reportPanel";
import { StatusBar } from "./statusBar";
import { chooseTarget, findClassLine, moduleFileCandidates } from "./targets";

const LSP_REQUEST_FAILED = -32803;
const ALREADY_RUNNING = -32002;
const INVALID_PARAMS = -32602;

/** What the extension exposes to tests (`vscode.extensions.getExtension(...).exports`). */
export interface DistcheckApi {
  reports: Map<string, ReportMessage>;
  server: ServerManager;
  status: StatusBar;
}

function diagnosticCode(d: vscode.Diagnostic): string {
  const code = d.code;
  if (code === undefined) {
    return "";
  }
  return typeof code === "object" ? String(code.value) : String(code);
}

/** `promise`'s value, or undefined when it takes longer than `ms`. */
async function withTimeout<T>(promise: Thenable<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([Promise.resolve(promise), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function activeFile(): { uri: string; languageId: string } | undefined {
  const doc = vscode.window.activeTextEditor?.document;
  return doc ? { uri: doc.uri.toString(), languageId: doc.languageId } : undefined;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The paths of a server refusal to run code from outside the workspace, else undefined. */
function outsideWorkspacePaths(error: unknown): string[] | undefined {
  if (!(error instanceof ResponseError) || error.code !== LSP_REQUEST_FAILED || !isRecord(error.data)) {
    return undefined;
  }
  const { kind, paths } = error.data;
  if (kind !== "outside-workspace" || !Array.isArray(paths) || !paths.every((p) => typeof p === "string")) {
    return undefined;
  }
  return paths;
}

async function pickTarget(targets: TargetInfo[], preselect: string | undefined, title: string): Promise<string | undefined> {
  type Item = vscode.QuickPickItem & { name: string };
  const items: Item[] = targets.map((t) => ({
    label: t.name,
    name: t.name,
    description: t.factory ?? "",
    detail: t.spec ? `spec ${t.spec}` : t.source === "file" ? "model_factory in this file" : undefined,
    picked: t.name === preselect,
  }));
  if (preselect) {
    items.sort((a, b) => Number(b.name === preselect) - Number(a.name === preselect));
  }
  const chosen = await vscode.window.showQuickPick(items, { title, placeHolder: "Target to validate", matchOnDescription: true });
  return chosen?.name;
}

let activeServer: ServerManager | undefined;

export function activate(context: vscode.ExtensionContext): DistcheckApi {
  const reports = new Map<string, ReportMessage>();
  const status = new StatusBar();
  // Function declarations below are hoisted; the actions only run once activation has finished.
  const panelActions: PanelActions = {
    openFile,
    goToModule,
    declareAdapter,
    applyBestSpec: (target) => saveSpec(target),
    exportJson,
    validate: (target) => validate(target),
  };
  const panel = new ReportPanel(context.extensionUri, panelActions, (line) => server.log(line));

  const server = new ServerManager(context, {
    onReport: (message) => {
      reports.set(message.target, message);
      const summary = summarize(message.report);
      status.reported(message.target, summary);
      server.log(`report for ${message.target}: ${summary.verdict} — ${summary.headline}`);
      panel.show(message, { preserveFocus: true });
    },
    onProgressBegin: (target, message) => status.started(target, message),
    onProgressStep: (target, message) => status.step(target, message),
    onProgressEnd: (target) => status.finished(target),
    onServerProblem: (problem) => status.problem(problem),
  });

  activeServer = server;
  const lenses = new ValidateLensProvider(() => server.targets());

  // ---------------------------------------------------------------------------------------------
  // commands

  async function validate(arg?: unknown): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      await explainUntrusted();
      return;
    }
    const client = await server.ensure();
    if (!client) {
      await showServerProblem();
      return;
    }
    let target: string | undefined;
    if (arg instanceof vscode.Uri) {
      target = arg.toString();
    } else if (typeof arg === "string" && arg) {
      target = arg;
    } else {
      const choice = chooseTarget(await server.targets(), activeFile());
      if (choice.kind === "target") {
        target = choice.name;
      } else if (choice.kind === "file") {
        target = choice.uri;
      } else if (choice.kind === "pick") {
        target = await pickTarget(choice.items, choice.preselect, "Distcheck: Validate distribution");
      } else {
        void vscode.window.showWarningMessage(choice.reason);
      }
    }
    if (!target) {
      return;
    }
    try {
      const result = await startValidation(target);
      if (result === undefined) {
        return;
      }
      const name = isRecord(result) && typeof result.target === "string" ? result.target : target;
      if (!status.model.running.has(name)) {
        status.started(name, "starting");
      }
    } catch (error) {
      if (error instanceof ResponseError && error.code === ALREADY_RUNNING) {
        const choice = await vscode.window.showInformationMessage(`Distcheck: ${error.message}`, "Cancel it");
        if (choice) {
          await server.executeServerCommand(SERVER_COMMANDS.cancel, [target]);
        }
      } else if (error instanceof ResponseError && (error.code === INVALID_PARAMS || error.code === LSP_REQUEST_FAILED)) {
        void vscode.window.showErrorMessage(`Distcheck: ${error.message}`);
      } else {
        void vscode.window.showErrorMessage(`Distcheck: could not start the validation: ${errorText(error)}`);
      }
    }
  }

  /**
   * Asks the server to validate `target`. When the target's code lies outside the workspace the server
   * refuses until the user confirms those paths; undefined when the user declines.
   */
  async function startValidation(target: string): Promise<unknown> {
    try {
      return await server.executeServerCommand(SERVER_COMMANDS.validate, [target]);
    } catch (error) {
      const paths = outsideWorkspacePaths(error);
      if (!paths) {
        throw error;
      }
      const choice = await vscode.window.showWarningMessage(
        `Validating ${target} imports and runs code from outside this workspace:\n${paths.join("\n")}\nRun it only if you trust that code.`,
        { modal: true },
        "Run it",
      );
      if (choice !== "Run it") {
        return undefined;
      }
      return server.executeServerCommand(SERVER_COMMANDS.validate, [target, { confirmOutsideWorkspace: paths }]);
    }
  }

  async function cancel(arg?: unknown): Promise<void> {
    let args: string[] = [];
    if (typeof arg === "string" && arg) {
      args = [arg];
    } else {
      const running = status.runningTargets();
      if (running.length > 1) {
        const all = "All running validations";
        const chosen = await vscode.window.showQuickPick([all, ...running], { title: "Distcheck: Cancel validation" });
        if (!chosen) {
          return;
        }
        args = chosen === all ? [] : [chosen];
      } else if (running.length === 1) {
        args = running;
      }
    }
    try {
      const result = await server.executeServerCommand(SERVER_COMMANDS.cancel, args);
      const cancelled = isRecord(result) && Array.isArray(result.cancelled) ? result.cancelled.map(String) : [];
      for (const t of cancelled) {
        status.finished(t);
      }
      void vscode.window.setStatusBarMessage(
        cancelled.length ? `Distcheck: cancelled ${cancelled.join(", ")}` : "Distcheck: no validation was running",
        4000,
      );
    } catch (error) {
      void vscode.window.showErrorMessage(`Distcheck: ${errorText(error)}`);
    }
  }

  async function readReportFile(uri: vscode.Uri): Promise<ReportMessage | undefined> {
    const text = new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
    return reportFromText(text, uri);
  }

  function reportFromText(text: string, uri: vscode.Uri): ReportMessage | undefined {
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
      const base = path.basename(uri.path).replace(/\.json$/i, "").replace(/\.(distcheck-)?report$/i, "");
      return { target: base, specUri: null, report: data, notice: `read from ${uri.fsPath}` };
    }
    return undefined;
  }

  async function showReport(arg?: unknown): Promise<void> {
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
      const message = reports.get(arg) ?? (await server.lastReport(arg).catch(() => undefined));
      if (message) {
        reports.set(message.target, message);
      }
      panel.show(message);
      return;
    }
    const latest = status.model.latest();
    const known = (latest && reports.get(latest[0])) ?? panel.message;
    if (known) {
      panel.show(known);
      return;
    }
    const doc = vscode.window.activeTextEditor?.document;
    if (doc && (doc.languageId === "json" || doc.fileName.endsWith(".json"))) {
      const message = reportFromText(doc.getText(), doc.uri);
      if (message) {
        panel.show(message);
        return;
      }
    }
    if (server.running) {
      for (const t of await server.targets().catch(() => [] as TargetInfo[])) {
        const message = await server.lastReport(t.name).catch(() => undefined);
        if (message) {
          reports.set(message.target, message);
          panel.show(message);
          return;
        }
      }
    }
    panel.show(undefined);
  }

  async function saveSpec(arg?: unknown): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      await explainUntrusted();
      return;
    }
    let target = typeof arg === "string" && arg ? arg : undefined;
    if (!target) {
      const validated = [...reports.keys()];
      if (validated.length === 1) {
        target = validated[0];
      } else {
        const targets = await server.targets().catch(() => [] as TargetInfo[]);
        const withReports = validated.length ? targets.filter((t) => reports.has(t.name)) : targets;
        const choice = chooseTarget(withReports.length ? withReports : targets, activeFile());
        if (choice.kind === "target") {
          target = choice.name;
        } else if (choice.kind === "file") {
          target = choice.uri;
        } else if (choice.kind === "pick") {
          target = await pickTarget(choice.items, choice.preselect, "Distcheck: Save validated spec");
        } else {
          void vscode.window.showWarningMessage(choice.reason);
        }
      }
    }
    if (!target) {
      return;
    }
    try {
      const result = await server.executeServerCommand(SERVER_COMMANDS.saveSpec, [target]);
      const saved = isRecord(result) && typeof result.saved === "string" ? result.saved : undefined;
      if (saved) {
        const uri = vscode.Uri.parse(saved);
        const open = await vscode.window.showInformationMessage(
          `Distcheck: wrote the validated spec of ${target} to ${vscode.workspace.asRelativePath(uri)}.`,
          "Open",
        );
        if (open) {
          await vscode.window.showTextDocument(uri);
        }
      }
    } catch (error) {
      void vscode.window.showErrorMessage(`Distcheck: could not save the spec of ${target}: ${errorText(error)}`);
    }
  }

  async function showServerProblem(): Promise<void> {
    const check = server.check;
    const message = check && !check.ok ? check.message : "Distcheck: the server is not running. See the Distcheck output.";
    const choice = await vscode.window.showErrorMessage(message, "Show output", "Restart server");
    if (choice === "Show output") {
      server.output.show(true);
    } else if (choice === "Restart server") {
      await server.restart();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // report panel actions

  async function openFile(file: string, line: number): Promise<void> {
    if (!file) {
      return;
    }
    let uri: vscode.Uri;
    if (path.isAbsolute(file)) {
      uri = vscode.Uri.file(file);
    } else {
      const folder = vscode.workspace.workspaceFolders?.[0];
      uri = folder ? vscode.Uri.joinPath(folder.uri, file) : vscode.Uri.file(path.resolve(file));
    }
    const pos = new vscode.Position(Math.max(line - 1, 0), 0);
    await vscode.window.showTextDocument(uri, { selection: new vscode.Range(pos, pos), viewColumn: vscode.ViewColumn.One, preview: true });
  }

  async function goToModule(args: { module: string; cls: string; file?: string; line?: number }): Promise<void> {
    if (args.file) {
      await openFile(args.file, args.line ?? 1);
      return;
    }
    const dotted = args.cls || args.module;
    const { files, className } = moduleFileCandidates(dotted);
    for (const candidate of files) {
      const found = await vscode.workspace.findFiles(`**/${candidate}`, "**/{node_modules,.venv,venv,site-packages}/**", 3);
      const hit = found[0];
      if (hit) {
        const doc = await vscode.workspace.openTextDocument(hit);
        const line = className ? findClassLine(doc.getText(), className) : undefined;
        await openFile(hit.fsPath, (line ?? 0) + 1);
        return;
      }
    }
    if (className) {
      const symbols = await vscode.commands.executeCommand<vscode.SymbolInformation[] | undefined>(
        "vscode.executeWorkspaceSymbolProvider",
        className,
      );
      const symbol = symbols?.find((s) => s.name === className);
      if (symbol) {
        await openFile(symbol.location.uri.fsPath, symbol.location.range.start.line + 1);
        return;
      }
    }
    void vscode.window.showInformationMessage(`Distcheck: could not find the source of ${dotted} in the workspace.`);
  }

  async function declareAdapter(args: { target: string; qualname: string }): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      await explainUntrusted();
      return;
    }
    const candidates: Array<[vscode.Uri, vscode.Diagnostic]> = [];
    for (const [uri, diagnostics] of vscode.languages.getDiagnostics()) {
      for (const d of diagnostics) {
        if (d.source === "distcheck" && diagnosticCode(d) === "undeclared-helper") {
          candidates.push([uri, d]);
        }
      }
    }
    const open = new Set(vscode.workspace.textDocuments.map((d) => d.uri.toString()));
    const rank = ([uri, d]: [vscode.Uri, vscode.Diagnostic]): number =>
      (d.message.includes(args.qualname) ? 2 : 0) + (open.has(uri.toString()) ? 1 : 0);
    candidates.sort((a, b) => rank(b) - rank(a));
    server.log(`declare adapter for ${args.qualname}: ${candidates.length} undeclared-helper diagnostic(s)`);
    for (const [uri, diagnostic] of candidates) {
      const started = Date.now();
      // the code-action API needs the document loaded (a model), or it rejects with "Illegal argument"
      await vscode.workspace.openTextDocument(uri);
      const actions = await withTimeout(
        vscode.commands.executeCommand<Array<vscode.CodeAction | vscode.Command>>(
          "vscode.executeCodeActionProvider",
          uri,
          diagnostic.range,
          vscode.CodeActionKind.QuickFix.value,
          10,
        ),
        15_000,
      );
      if (!actions) {
        server.log(`  ${vscode.workspace.asRelativePath(uri)}: no code actions within 15 s`);
        continue;
      }
      server.log(`  code actions in ${Date.now() - started} ms`);
      const fixes = actions.filter((a): a is vscode.CodeAction => typeof (a as { command?: unknown }).command !== "string");
      server.log(`  ${vscode.workspace.asRelativePath(uri)}:${diagnostic.range.start.line + 1}: ${fixes.map((a) => a.title).join(" | ") || "no quick fix"}`);
      const fix =
        fixes.find((a) => a.title.includes(args.qualname)) ??
        fixes.find((a) => /adapter/i.test(a.title) && (a.diagnostics ?? []).some((d) => diagnosticCode(d) === "undeclared-helper"));
      if (!fix) {
        continue;
      }
      if (fix.edit) {
        await vscode.workspace.applyEdit(fix.edit);
      }
      if (fix.command) {
        await vscode.commands.executeCommand(fix.command.command, ...((fix.command.arguments ?? []) as unknown[]));
      }
      const again = await vscode.window.showInformationMessage(`Distcheck: ${fix.title}. Validate ${args.target} again?`, "Validate");
      if (again) {
        await validate(args.target);
      }
      return;
    }
    void vscode.window.showWarningMessage(
      `Distcheck: no quick fix declares an adapter for ${args.qualname} right now (quick fixes follow the last validation's diagnostics). Validate ${args.target} again, or use “Apply best spec”.`,
    );
  }

  async function exportJson(message: ReportMessage): Promise<void> {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    const name = `${message.target.replace(/[^\w.-]+/g, "_")}.distcheck-report.json`;
    const uri = await vscode.window.showSaveDialog({
      defaultUri: folder ? vscode.Uri.joinPath(folder, name) : undefined,
      filters: { JSON: ["json"] },
      title: "Export distcheck report",
    });
    if (!uri) {
      return;
    }
    await vscode.workspace.fs.writeFile(uri, new TextEncoder().encode(`${JSON.stringify(message.report, null, 2)}\n`));
    void vscode.window.setStatusBarMessage(`Distcheck: report written to ${vscode.workspace.asRelativePath(uri)}`, 5000);
  }

  // ---------------------------------------------------------------------------------------------
  // wiring

  const updateFactoryContext = (): void => {
    void vscode.commands.executeCommand("setContext", "distcheck.hasFactory", hasModuleFactory(vscode.window.activeTextEditor?.document));
  };

  context.subscriptions.push(
    server,
    status,
    lenses,
    panel,
    vscode.commands.registerCommand("distcheck.validateCommand", validate),
    vscode.commands.registerCommand("distcheck.cancelCommand", cancel),
    vscode.commands.registerCommand("distcheck.showReport", showReport),
    vscode.commands.registerCommand("distcheck.saveSpecCommand", saveSpec),
    vscode.commands.registerCommand("distcheck.restartServer", async () => {
      await server.restart();
      lenses.refresh();
    }),
    vscode.commands.registerCommand("distcheck.showOutput", () => server.output.show(true)),
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
      }
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("distcheck.interpreter")) {
        server.log("distcheck.interpreter changed: restarting the server");
        void server.restart().then(() => lenses.refresh());
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => lenses.refresh()),
    vscode.window.onDidChangeActiveTextEditor(updateFactoryContext),
  );
  updateFactoryContext();

  server.log(`activated (workspace ${vscode.workspace.isTrusted ? "trusted" : "in Restricted Mode: validation disabled"})`);
  void server.ensure().then((client) => {
    if (client) {
      lenses.refresh();
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
