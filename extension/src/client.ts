/**
 * The language client's life: start `python -m distcheck.lsp` over stdio once the interpreter passes its
 * import check (`serverEnvironment.ts`), restart it after a crash within a budget, stop and restart it
 * on request, and send it the extension's requests. The server's notifications become events in
 * `serverNotifications.ts`; its commands and the Restricted Mode guard are in `serverCommands.ts`.
 */

import * as vscode from "vscode";
import {
  CloseAction,
  type CloseHandlerResult,
  ErrorAction,
  type ErrorHandlerResult,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  State,
} from "vscode-languageclient/node";

import { linkShippedPage } from "./diagnosticDocs";
import { IMPORT_CHECK_ARGS, type Interpreter, RestartBudget, type ServerCheck, describeSource, interpretProbe } from "./interpreter";
import { LeveledLines } from "./logChannel";
import { type ReportMessage, type TargetInfo, isRecord, looksLikeReportMessage } from "./report";
import { EXPECTED_ERROR_CODES, guardUntrusted } from "./serverCommands";
import { completeStep } from "./setup";
import { explainSetupProblem, findInterpreter, probe, serverOptions, serverWorkingDirectory } from "./serverEnvironment";
import { ProgressRelay, type ServerEvents, relayReports } from "./serverNotifications";

export { SERVER_COMMANDS, UNTRUSTED_MESSAGE, explainUntrusted } from "./serverCommands";
export { readInterpreterSetting } from "./serverEnvironment";
export type { ServerEvents } from "./serverNotifications";

export const SERVER_RESTARTED_MESSAGE =
  "The distcheck server stopped unexpectedly and was restarted; a validation that was running was stopped. Its exit code and last messages are in the Distcheck output (Distcheck: Show output).";

export class ServerManager implements vscode.Disposable {
  client: LanguageClient | undefined;
  interpreter: Interpreter | undefined;
  /** The extension's log and the language client's output and trace, with levels. */
  readonly output: vscode.LogOutputChannel;
  private readonly budget = new RestartBudget();
  private starting: Promise<LanguageClient | undefined> | undefined;
  private readonly progress: ProgressRelay;
  private readonly disposables: Array<{ dispose(): unknown }> = [];
  /** Subscriptions on the current client, dropped with it. */
  private clientSubscriptions: Array<{ dispose(): unknown }> = [];
  private lastCheck: ServerCheck | undefined;
  private readonly runningChanged = new vscode.EventEmitter<boolean>();
  /** Fires with `running` when the language client's state changes (started, stopped, crashed, restarted). */
  readonly onDidChangeRunning = this.runningChanged.event;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly events: ServerEvents,
  ) {
    this.output = vscode.window.createOutputChannel("Distcheck", { log: true });
    this.disposables.push(this.output, this.runningChanged);
    this.progress = new ProgressRelay(events);
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

  private async start(): Promise<LanguageClient | undefined> {
    if (this.client) {
      await this.stop(); // a client that stopped for good (start failed, or crashed too often)
    }
    this.interpreter = await findInterpreter();
    const python = this.interpreter;
    const cwd = serverWorkingDirectory(this.context);
    this.log(`interpreter ${python.command} (from ${describeSource(python)}); checking: ${python.command} ${IMPORT_CHECK_ARGS.join(" ")}`);
    const check = interpretProbe(python, await probe(python.command, cwd));
    this.lastCheck = check;
    if (check.ok || check.reason === "not-importable") {
      completeStep("distcheck.pickInterpreter"); // an interpreter that runs
    }
    if (check.ok) {
      completeStep("distcheck.installDistcheck");
    }
    if (!check.ok) {
      this.warn(check.message);
      if (check.detail.trim()) {
        this.output.debug(check.detail.trim());
      }
      this.events.onServerProblem(check.message);
      void explainSetupProblem(check, python, this.output, this.context.extensionPath);
      return undefined;
    }
    this.events.onServerProblem(undefined);

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
          this.progress.endAll();
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
        executeCommand: (command, args, next): unknown => guardUntrusted(command, args, (c, a) => next(c, a) as unknown),
        // a code's link opens its page in this installed extension (diagnosticDocs.ts)
        handleDiagnostics: (uri, diagnostics, next): void => {
          const root = this.context.extensionUri;
          next(uri, diagnostics.map((d) => linkShippedPage(d, (page) => vscode.Uri.joinPath(root, page))));
        },
      },
    };
    const client = new LanguageClient("distcheck", "Distcheck", serverOptions(python, cwd), clientOptions);
    relayReports(client, this.events, (line) => this.log(line));
    this.clientSubscriptions.push(
      client.onDidChangeState((e) => {
        if (e.newState === State.Running) {
          this.progress.hook(client);
        } else {
          this.progress.endAll();
        }
        this.runningChanged.fire(e.newState === State.Running);
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
      this.progress.hook(client);
      this.log("server started");
    } catch (error) {
      this.error(`could not start the server: ${String(error)}`);
      this.events.onServerProblem(`The distcheck server did not start: ${String(error)}`);
      return undefined;
    }
    return client;
  }

  /** The one-line notice after an unexpected server exit: what happened and where its log is. */
  private async noticeRestart(): Promise<void> {
    const choice = await vscode.window.showWarningMessage(SERVER_RESTARTED_MESSAGE, "Show output");
    if (choice === "Show output") {
      this.output.show(true);
    }
  }

  /** The last import check, for tests and the output. */
  get check(): ServerCheck | undefined {
    return this.lastCheck;
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.progress.endAll();
    for (const d of this.clientSubscriptions.splice(0)) {
      d.dispose();
    }
    this.runningChanged.fire(false);
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
