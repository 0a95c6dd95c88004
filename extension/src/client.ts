/**
 * The language client: finds the interpreter, checks that `distcheck.lsp` imports, starts
 * `python -m distcheck.lsp` over stdio, limits restarts, and turns the server's `$/progress` and
 * `distcheck/report` into events for the status bar and the report panel.
 */

import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";

import * as vscode from "vscode";
import {
  CloseAction,
  type CloseHandlerResult,
  ErrorAction,
  type ErrorHandlerResult,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  State,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
  type WorkDoneProgressBegin,
  type WorkDoneProgressEnd,
  type WorkDoneProgressReport,
} from "vscode-languageclient/node";

import {
  IMPORT_CHECK_ARGS,
  type Interpreter,
  type ProbeResult,
  RestartBudget,
  type ServerCheck,
  describeSource,
  installCommand,
  interpretProbe,
  resolveInterpreter,
  settingFromLayers,
} from "./interpreter";
import { LeveledLines } from "./logChannel";
import { type ReportMessage, type TargetInfo, isRecord, looksLikeReportMessage } from "./report";
import { targetFromProgressTitle } from "./status";

/** Commands the server registers (executeCommand); the client's own command ids differ. */
export const SERVER_COMMANDS = {
  validate: "distcheck.validate",
  cancel: "distcheck.cancel",
  saveSpec: "distcheck.saveSpec",
} as const;

const GUARDED_SERVER_COMMANDS = new Set<string>([SERVER_COMMANDS.validate, SERVER_COMMANDS.saveSpec]);

export const UNTRUSTED_MESSAGE =
  "Distcheck validation imports and runs this workspace's model and sample code, so it is disabled in Restricted Mode. Trust the workspace to validate and to save validated specs; spec files are still checked.";

export const SERVER_RESTARTED_MESSAGE =
  "The distcheck server stopped unexpectedly and was restarted; a validation that was running was stopped. Its exit code and last messages are in the Distcheck output (Distcheck: Show output).";

export interface ServerEvents {
  onReport(message: ReportMessage): void;
  onProgressBegin(target: string, message: string): void;
  onProgressStep(target: string, message: string): void;
  onProgressEnd(target: string, message: string): void;
  onServerProblem(problem: string | undefined): void;
}

async function pythonFromExtension(resource: vscode.Uri | undefined): Promise<string | undefined> {
  if (!vscode.extensions.getExtension("ms-python.python")) {
    return undefined;
  }
  const { PythonExtension } = await import("@vscode/python-extension");
  const api = await PythonExtension.api();
  const envPath = api.environments.getActiveEnvironmentPath(resource);
  const env = await api.environments.resolveEnvironment(envPath);
  return env?.executable.uri?.fsPath ?? envPath.path;
}

/**
 * `distcheck.interpreter` as the settings hold it now (read afresh on every start, never cached), and
 * which settings hold it.
 */
export function readInterpreterSetting(folder: vscode.WorkspaceFolder | undefined): { value: string; scope: string | undefined } {
  const config = vscode.workspace.getConfiguration("distcheck", folder?.uri);
  const layered = settingFromLayers(config.inspect<string>("interpreter"));
  return layered.value ? layered : { value: config.get<string>("interpreter", "") ?? "", scope: undefined };
}

/** JSON-RPC codes of a request refused on purpose or cancelled (the user's to fix, not a bug): invalid params, request failed, already running, cancelled. */
const EXPECTED_ERROR_CODES = new Set([-32602, -32803, -32002, -32800]);

function probe(command: string, cwd: string): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const env = { ...process.env, PYTHONSAFEPATH: "1" };
    execFile(command, IMPORT_CHECK_ARGS, { cwd, env, timeout: 90_000, windowsHide: true }, (error, _stdout, stderr) => {
      if (!error) {
        resolve({ code: 0, stderr: stderr });
        return;
      }
      const err = error as NodeJS.ErrnoException & { killed?: boolean; signal?: string | null; code?: number | string };
      if (typeof err.code === "string") {
        resolve({ code: null, stderr: stderr, spawnError: `${err.code}: ${err.message}` });
      } else if (err.killed || err.signal) {
        resolve({ code: null, stderr: stderr, timedOut: true });
      } else {
        resolve({ code: typeof err.code === "number" ? err.code : 1, stderr: stderr });
      }
    });
  });
}

interface OpenProgress {
  target: string;
  resolve: () => void;
  report: ((message: string) => void) | undefined;
  dispose: { dispose(): void };
}

export class ServerManager implements vscode.Disposable {
  client: LanguageClient | undefined;
  interpreter: Interpreter | undefined;
  /** The extension's log and the language client's output and trace, with levels. */
  readonly output: vscode.LogOutputChannel;
  private readonly budget = new RestartBudget();
  private starting: Promise<LanguageClient | undefined> | undefined;
  private readonly progress = new Map<string, OpenProgress>();
  private readonly disposables: Array<{ dispose(): unknown }> = [];
  /** Subscriptions on the current client, dropped with it. */
  private clientSubscriptions: Array<{ dispose(): unknown }> = [];
  private lastCheck: ServerCheck | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly events: ServerEvents,
  ) {
    this.output = vscode.window.createOutputChannel("Distcheck", { log: true });
    this.disposables.push(this.output);
  }

  /** An info line in the Distcheck log. */
  log(line: string): void {
    this.output.info(line);
  }

  /** An expected problem (the user's setup or input): a warning with its one-line message and next step. */
  warn(line: string): void {
    this.output.warn(line);
  }

  /** Something that should not happen (a bug, a crash): an error. */
  error(line: string): void {
    this.output.error(line);
  }

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  /** The running client, starting the server if needed; undefined when it cannot start. */
  ensure(): Promise<LanguageClient | undefined> {
    if (this.client && this.client.state !== State.Stopped) {
      return Promise.resolve(this.client);
    }
    if (!this.starting) {
      this.starting = this.start().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  private workingDirectory(): string {
    // Never the workspace: `python -m` / `-c` put the working directory first on sys.path, and the
    // daemon must not import workspace code (Restricted Mode included).
    const dir = this.context.globalStorageUri.fsPath;
    try {
      fs.mkdirSync(dir, { recursive: true });
      return dir;
    } catch {
      return os.homedir();
    }
  }

  private async start(): Promise<LanguageClient | undefined> {
    if (this.client) {
      await this.stop(); // a client that stopped for good (start failed, or crashed too often)
    }
    const folder = vscode.workspace.workspaceFolders?.[0];
    const setting = readInterpreterSetting(folder);
    this.interpreter = await resolveInterpreter({
      setting: setting.value,
      settingScope: setting.scope,
      workspaceFolder: folder?.uri.fsPath,
      home: os.homedir(),
      pythonExtension: () => pythonFromExtension(folder?.uri),
    });
    const python = this.interpreter;
    const cwd = this.workingDirectory();
    this.log(`interpreter ${python.command} (from ${describeSource(python)}); checking: ${python.command} ${IMPORT_CHECK_ARGS.join(" ")}`);
    const check = interpretProbe(python, await probe(python.command, cwd));
    this.lastCheck = check;
    if (!check.ok) {
      this.warn(check.message);
      if (check.detail.trim()) {
        this.output.debug(check.detail.trim());
      }
      this.events.onServerProblem(check.message);
      void this.explainSetupProblem(check, python);
      return undefined;
    }
    this.events.onServerProblem(undefined);

    const serverOptions: ServerOptions = {
      command: python.command,
      args: ["-m", "distcheck.lsp"],
      // PYTHONSAFEPATH: Python 3.11+ then puts no working directory on the server's sys.path at all.
      options: { cwd, env: { ...process.env, PYTHONUNBUFFERED: "1", PYTHONSAFEPATH: "1" } },
    };
    const budget = this.budget;
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "file", pattern: "**/*.distspec.json" },
        { scheme: "file", pattern: "**/pyproject.toml" },
      ],
      synchronize: {
        // The daemon pulls settings (workspace/configuration); this also tells it when they change.
        // eslint-disable-next-line @typescript-eslint/no-deprecated
        configurationSection: "distcheck",
        fileEvents: vscode.workspace.createFileSystemWatcher("**/{pyproject.toml,*.distspec.json}"),
      },
      // The server runs nothing of the workspace until it is told the workspace is trusted.
      initializationOptions: { trusted: vscode.workspace.isTrusted },
      // the server's logMessage, the client's own errors and the server's stderr, each at its level
      outputChannel: new LeveledLines("Distcheck", this.output, "info", this.output),
      traceOutputChannel: new LeveledLines("Distcheck", this.output, "trace", this.output),
      diagnosticCollectionName: "distcheck",
      initializationFailedHandler: (error) => {
        this.error(`server initialization failed: ${String(error)}`);
        return false;
      },
      errorHandler: {
        error: (): ErrorHandlerResult => ({ action: ErrorAction.Continue }),
        closed: (): CloseHandlerResult => {
          this.endAllProgress();
          if (budget.allow()) {
            this.error("server exited unexpectedly (its exit code and last messages are above); restarting it");
            void this.noticeRestart();
            // handled: our notice replaces the client's generic one
            return { action: CloseAction.Restart, handled: true };
          }
          const message = `The distcheck server stopped ${budget.max} times in ${Math.round(budget.windowMs / 60000)} minutes and will not be restarted. See the Distcheck output, then run “Distcheck: Restart server”.`;
          this.error(message);
          this.events.onServerProblem(message);
          return { action: CloseAction.DoNotRestart, message };
        },
      },
      middleware: {
        executeCommand: (command, args, next): unknown => {
          if (GUARDED_SERVER_COMMANDS.has(command) && !vscode.workspace.isTrusted) {
            void explainUntrusted();
            return undefined;
          }
          return next(command, args) as unknown;
        },
      },
    };
    const client = new LanguageClient("distcheck", "Distcheck", serverOptions, clientOptions);
    client.onNotification("distcheck/report", (params: unknown) => {
      if (looksLikeReportMessage(params)) {
        this.events.onReport(params);
      } else {
        this.log("ignored a distcheck/report notification that does not carry a report");
      }
    });
    this.clientSubscriptions.push(
      client.onDidChangeState((e) => {
        if (e.newState === State.Running) {
          this.hookProgress(client);
        } else {
          this.endAllProgress();
        }
      }),
    );
    this.client = client;
    this.clientSubscriptions.push(
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        void client.sendNotification("distcheck/trust", { trusted: true });
      }),
    );
    try {
      await client.start();
      this.hookProgress(client);
      this.log("server started");
    } catch (error) {
      this.error(`could not start the server: ${String(error)}`);
      this.events.onServerProblem(`The distcheck server did not start: ${String(error)}`);
      return undefined;
    }
    return client;
  }

  /**
   * Replaces the client's built-in work-done progress UI with ours: the same cancellable notification,
   * plus the step for the status bar (the client offers no other hook into `$/progress`).
   */
  private hookProgress(client: LanguageClient): void {
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
            this.progress.set(key, entry);
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
            this.progress.delete(key);
            handler.dispose();
          }
        },
      );
    });
  }

  /** The one-line notice after an unexpected server exit: what happened and where its log is. */
  private async noticeRestart(): Promise<void> {
    const choice = await vscode.window.showWarningMessage(SERVER_RESTARTED_MESSAGE, "Show output");
    if (choice === "Show output") {
      this.output.show(true);
    }
  }

  private endAllProgress(): void {
    for (const entry of this.progress.values()) {
      this.events.onProgressEnd(entry.target, "");
      entry.resolve();
      entry.dispose.dispose();
    }
    this.progress.clear();
  }

  private async explainSetupProblem(check: Exclude<ServerCheck, { ok: true }>, python: Interpreter): Promise<void> {
    const choice = await vscode.window.showErrorMessage(check.message, "Open setting", "Show install command");
    if (choice === "Open setting") {
      await vscode.commands.executeCommand("workbench.action.openSettings", "distcheck.interpreter");
    } else if (choice === "Show install command") {
      const command = installCommand(python.command);
      this.output.appendLine(`Install distcheck into the interpreter with:\n  ${command}`);
      const again = await vscode.window.showInformationMessage(
        `Install distcheck with: ${command} (or set distcheck.interpreter to a Python that has it), then run “Distcheck: Restart server”.`,
        "Copy command",
        "Restart server",
      );
      if (again === "Copy command") {
        await vscode.env.clipboard.writeText(command);
      } else if (again === "Restart server") {
        await vscode.commands.executeCommand("distcheck.restartServer");
      }
    }
  }

  /** The last import check, for tests and the output. */
  get check(): ServerCheck | undefined {
    return this.lastCheck;
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.endAllProgress();
    for (const d of this.clientSubscriptions.splice(0)) {
      d.dispose();
    }
    if (client) {
      if (client.isRunning()) {
        try {
          await client.stop(5000);
        } catch (error) {
          this.log(`stopping the server: ${String(error)}`);
        }
      }
      try {
        await client.dispose();
      } catch {
        // a client whose start failed has nothing left to dispose
      }
    }
  }

  /** Stops the server and starts it again, resolving the interpreter afresh (the same path as the first start). */
  async restart(): Promise<LanguageClient | undefined> {
    this.log("restarting the server");
    this.budget.reset();
    await this.stop();
    return this.ensure();
  }

  async targets(): Promise<TargetInfo[]> {
    const client = await this.ensure();
    if (!client) {
      return [];
    }
    const result = await client.sendRequest<unknown>("distcheck/targets", {});
    return Array.isArray(result) ? (result as unknown[]).filter((t): t is TargetInfo => isRecord(t) && typeof t.name === "string") : [];
  }

  async lastReport(target: string): Promise<ReportMessage | undefined> {
    const client = await this.ensure();
    if (!client) {
      return undefined;
    }
    const result = await client.sendRequest<unknown>("distcheck/lastReport", { target });
    return looksLikeReportMessage(result) ? result : undefined;
  }

  /** Runs one of the server's executeCommand commands (errors are LSP ResponseErrors). */
  async executeServerCommand(command: string, args: unknown[]): Promise<unknown> {
    const client = await this.ensure();
    if (!client) {
      throw new Error(this.lastCheck && !this.lastCheck.ok ? this.lastCheck.message : "the distcheck server is not running");
    }
    try {
      return await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
    } catch (error) {
      const code = isRecord(error) && typeof error.code === "number" ? error.code : undefined;
      const text = (error instanceof Error ? error.message : String(error)).split("\n")[0] ?? "";
      if (code !== undefined && EXPECTED_ERROR_CODES.has(code)) {
        this.warn(`${command} refused: ${text}`);
      } else {
        this.error(`${command} failed: ${text}`);
      }
      throw error;
    }
  }

  dispose(): void {
    void this.stop();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}

export async function explainUntrusted(): Promise<void> {
  const choice = await vscode.window.showWarningMessage(UNTRUSTED_MESSAGE, "Manage Workspace Trust");
  if (choice) {
    await vscode.commands.executeCommand("workbench.trust.manage");
  }
}
