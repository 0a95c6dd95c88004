/**
 * What the report panel's buttons and links do (`PanelActions`): open a file at a line, go to a
 * module's source (where the server's `distcheck/locateModule` finds it), declare an adapter (the
 * server's `distcheck/helperFix`), apply the best spec, export the report JSON and validate again.
 * What needs server knowledge is a server request; this side only applies and shows the answers.
 */

import * as path from "node:path";

import * as vscode from "vscode";
import { type WorkspaceEdit as ProtocolWorkspaceEdit } from "vscode-languageclient/node";

import { explainUntrusted } from "./client";
import { type Session, errorText, saveSpec, validate } from "./commands";
import { type ReportMessage } from "./report";
import { type PanelActions } from "./reportPanel";
import { type LocatedAt, helperFixAction, locatedModule } from "./serverReplies";

/** Opens `file` (absolute, or relative to the first workspace folder) at 1-based `line`. */
export async function openFile(file: string, line: number): Promise<void> {
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

/** The server's answer to `method` with `params`, or undefined when there is no server; a refusal throws. */
async function serverRequest(session: Session, method: string, params: object): Promise<unknown> {
  const client = await session.server.ensure();
  return client ? client.sendRequest<unknown>(method, params) : undefined;
}

/**
 * Opens a module's source: the file and line the report gives, else where the server's
 * `distcheck/locateModule` finds its class; says so when it is not in the workspace.
 */
export async function goToModule(session: Session, args: { module: string; cls: string; file?: string; line?: number }): Promise<void> {
  if (args.file) {
    await openFile(args.file, args.line ?? 1);
    return;
  }
  const dotted = args.cls || args.module;
  let found: LocatedAt | undefined;
  try {
    found = locatedModule(await serverRequest(session, "distcheck/locateModule", { cls: dotted, module: args.module || undefined }));
  } catch (error) {
    void vscode.window.showWarningMessage(`Distcheck: could not look up ${dotted}: ${errorText(error)}`);
    return;
  }
  if (!found) {
    void vscode.window.showInformationMessage(
      `Distcheck: the class ${dotted} is not defined in a workspace file (it may come from an installed package); open it with “Go to Symbol in Workspace”.`,
    );
    return;
  }
  const pos = new vscode.Position(found.line, found.character);
  await vscode.window.showTextDocument(vscode.Uri.parse(found.uri), { selection: new vscode.Range(pos, pos), viewColumn: vscode.ViewColumn.One, preview: true });
}

/**
 * Declares an adapter for the helper `args.qualname`: applies the fix the server's
 * `distcheck/helperFix` returns (a versioned edit of the spec), then offers to validate again; says
 * what to do when the last report has none.
 */
export async function declareAdapter(session: Session, args: { target: string; qualname: string }): Promise<void> {
  if (!vscode.workspace.isTrusted) {
    await explainUntrusted();
    return;
  }
  let reply: unknown;
  try {
    reply = await serverRequest(session, "distcheck/helperFix", { qualname: args.qualname, target: args.target || undefined });
  } catch (error) {
    void vscode.window.showWarningMessage(`Distcheck: could not declare an adapter for ${args.qualname}: ${errorText(error)}`);
    return;
  }
  const fix = helperFixAction(reply);
  const client = await session.server.ensure();
  if (!fix || !client) {
    void vscode.window.showWarningMessage(
      `Distcheck: the last validation of ${args.target} has no ready adapter for ${args.qualname}. Validate ${args.target} again, or use “Apply best spec”.`,
    );
    return;
  }
  const edit = await client.protocol2CodeConverter.asWorkspaceEdit(fix.edit as unknown as ProtocolWorkspaceEdit);
  if (!(await vscode.workspace.applyEdit(edit))) {
    void vscode.window.showWarningMessage(`Distcheck: the spec changed while the fix was made; declare the adapter for ${args.qualname} again.`);
    return;
  }
  const again = await vscode.window.showInformationMessage(`Distcheck: ${fix.title}. Validate ${args.target} again?`, "Validate");
  if (again) {
    await validate(session, args.target);
  }
}

/** Writes the report's JSON where the user chooses (default: `<target>.distcheck-report.json` in the workspace). */
export async function exportJson(message: ReportMessage): Promise<void> {
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

/** The panel's actions for `session`. */
export function panelActions(session: Session): PanelActions {
  return {
    openFile,
    goToModule: (args) => goToModule(session, args),
    declareAdapter: (args) => declareAdapter(session, args),
    applyBestSpec: (target) => saveSpec(session, target),
    exportJson,
    validate: (target) => validate(session, target),
  };
}
