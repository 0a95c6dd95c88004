/**
 * The validation commands: Validate distribution, Cancel validation and Save validated spec. Each
 * picks its target (argument, the only target, a picker, or the active Python file), then asks the
 * server (`workspace/executeCommand`, docs/protocol.md) and shows what it answered.
 */

import * as fs from "node:fs";

import * as vscode from "vscode";
import { ResponseError } from "vscode-languageclient/node";

import { SERVER_COMMANDS, type ServerManager, explainUntrusted } from "./client";
import { type ReportMessage, type TargetInfo } from "./report";
import { completeStep } from "./setup";
import { cancelledTargets, failureKind, outsideWorkspacePaths, savedSpec, startedTarget } from "./serverReplies";
import { SAVE_AND_VALIDATE, VALIDATE_SAVED, saveDecision, saveMode, targetDirtyFiles } from "./saveFirst";
import { type StatusBar } from "./statusBar";
import { type ActiveFile, type TargetChoice, chooseTarget, targetPickItems } from "./targets";

/** What the commands and panel actions share: the server, the status bar and the reports seen so far. */
export interface Session {
  readonly server: ServerManager;
  readonly status: StatusBar;
  /** The latest report of each target, by target name. */
  readonly reports: Map<string, ReportMessage>;
}

export function activeFile(): ActiveFile | undefined {
  const doc = vscode.window.activeTextEditor?.document;
  return doc ? { uri: doc.uri.toString(), languageId: doc.languageId } : undefined;
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function pickTarget(targets: TargetInfo[], preselect: string | undefined, title: string): Promise<string | undefined> {
  const items = targetPickItems(targets, preselect, {
    relative: (u) => vscode.workspace.asRelativePath(/^file:/.test(u) ? vscode.Uri.parse(u) : u),
    exists: (u) => fs.existsSync(vscode.Uri.parse(u).fsPath),
  });
  const chosen = await vscode.window.showQuickPick(items, { title, placeHolder: "Target to validate", matchOnDescription: true });
  return chosen?.name;
}

/** The target `choice` names, the one the user picks (undefined when they dismiss the picker), or none with a warning. */
async function targetOf(choice: TargetChoice, title: string): Promise<string | undefined> {
  switch (choice.kind) {
    case "target":
      return choice.name;
    case "file":
      return choice.uri;
    case "pick":
      return pickTarget(choice.items, choice.preselect, title);
    case "none":
      void vscode.window.showWarningMessage(choice.reason);
      return undefined;
  }
}

/** The target a command was given: a URI (a file target, from the explorer or a CodeLens) or a target name. */
function targetArg(arg: unknown): string | undefined {
  if (arg instanceof vscode.Uri) {
    return arg.toString();
  }
  return typeof arg === "string" && arg ? arg : undefined;
}

/** Distcheck: Validate distribution — starts a validation of `arg` (or the chosen target); progress and the report come as notifications. */
export async function validate(session: Session, arg?: unknown): Promise<void> {
  const { server, status } = session;
  if (!vscode.workspace.isTrusted) {
    await explainUntrusted();
    return;
  }
  const client = await server.ensure();
  if (!client) {
    await showServerProblem(server);
    return;
  }
  const target = targetArg(arg) ?? (await targetOf(chooseTarget(await server.targets(), activeFile()), "Distcheck: Validate distribution"));
  if (!target) {
    return;
  }
  if (!(await saveTargetFiles(server, target))) {
    return;
  }
  try {
    const result = await startValidation(server, target);
    if (result === undefined) {
      return;
    }
    const name = startedTarget(result, target);
    if (!status.model.running.has(name)) {
      status.started(name, "starting");
    }
  } catch (error) {
    const kind = failureKind(error instanceof ResponseError ? error.code : undefined);
    if (kind === "already-running") {
      const choice = await vscode.window.showInformationMessage(`Distcheck: ${errorText(error)}`, "Cancel it");
      if (choice) {
        await server.executeServerCommand(SERVER_COMMANDS.cancel, [target]);
      }
    } else if (kind === "server-message") {
      void vscode.window.showErrorMessage(`Distcheck: ${errorText(error)}`);
    } else {
      void vscode.window.showErrorMessage(`Distcheck: could not start the validation: ${errorText(error)}`);
    }
  }
}

/** Applies `distcheck.saveBeforeValidate` to the target's dirty model and spec; false when the user cancelled. */
async function saveTargetFiles(server: ServerManager, target: string): Promise<boolean> {
  const mode = saveMode(vscode.workspace.getConfiguration("distcheck").get("saveBeforeValidate"));
  const docs = vscode.workspace.textDocuments.filter((d) => d.isDirty);
  const info = (await server.targets()).find((t) => t.name === target);
  const dirty = targetDirtyFiles(info, docs.map((d) => d.uri.toString()));
  let answer: string | undefined;
  if (mode === "prompt" && dirty.length > 0) {
    const names = dirty.map((u) => vscode.workspace.asRelativePath(vscode.Uri.parse(u))).join(", ");
    answer = await vscode.window.showWarningMessage(
      `Distcheck validates the files on disk: ${names} ${dirty.length === 1 ? "has" : "have"} unsaved changes.`,
      { modal: true },
      SAVE_AND_VALIDATE,
      VALIDATE_SAVED,
    );
  }
  const decision = saveDecision(mode, dirty, answer);
  if (decision === "save") {
    for (const doc of docs.filter((d) => dirty.includes(d.uri.toString()))) {
      if (!(await doc.save())) {
        void vscode.window.showErrorMessage(`Distcheck: could not save ${vscode.workspace.asRelativePath(doc.uri)}; save it and validate again.`);
        return false;
      }
    }
  }
  return decision !== "cancel";
}

/**
 * Asks the server to validate `target`. When the target's code lies outside the workspace the server
 * refuses until the user confirms those paths; undefined when the user declines.
 */
async function startValidation(server: ServerManager, target: string): Promise<unknown> {
  try {
    return await server.executeServerCommand(SERVER_COMMANDS.validate, [target]);
  } catch (error) {
    const paths = error instanceof ResponseError ? outsideWorkspacePaths(error.code, error.data) : undefined;
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

/** Distcheck: Cancel validation — cancels `arg`, the one running validation, or the ones the user picks. */
export async function cancel(session: Session, arg?: unknown): Promise<void> {
  const { server, status } = session;
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
    const cancelled = cancelledTargets(await server.executeServerCommand(SERVER_COMMANDS.cancel, args));
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

/** Distcheck: Save validated spec (and the panel's Apply best spec) — the server writes the report's best spec. */
export async function saveSpec(session: Session, arg?: unknown): Promise<void> {
  const { server, reports } = session;
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
      target = await targetOf(chooseTarget(withReports.length ? withReports : targets, activeFile()), "Distcheck: Save validated spec");
    }
  }
  if (!target) {
    return;
  }
  try {
    const saved = savedSpec(await server.executeServerCommand(SERVER_COMMANDS.saveSpec, [target]));
    if (saved) {
      completeStep("distcheck.applyFix");
      const uri = vscode.Uri.parse(saved.uri);
      const where = vscode.workspace.asRelativePath(uri);
      const open = await vscode.window.showInformationMessage(
        saved.unchanged
          ? `Distcheck: ${where} already holds the validated spec of ${target}; nothing to write.`
          : `Distcheck: wrote the validated spec of ${target} to ${where}.`,
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

/** The server is not running: says why (the interpreter check's message when it failed) and offers the output or a restart. */
export async function showServerProblem(server: ServerManager): Promise<void> {
  const check = server.check;
  const message = check && !check.ok ? check.message : "Distcheck: the server is not running. See the Distcheck output.";
  const choice = await vscode.window.showErrorMessage(message, "Show output", "Restart server");
  if (choice === "Show output") {
    server.output.show(true);
  } else if (choice === "Restart server") {
    await server.restart();
  }
}
