/**
 * What the report panel's buttons and links do (`PanelActions`): open a file at a line, go to a
 * module's source, declare an adapter through the server's quick fix, apply the best spec, export the
 * report JSON and validate again. The spec edits are the server's (its code actions and
 * `distcheck.saveSpec`); this side only finds and applies them.
 */

import * as path from "node:path";

import * as vscode from "vscode";

import { explainUntrusted } from "./client";
import { type Session, saveSpec, validate } from "./commands";
import { type ReportMessage } from "./report";
import { type PanelActions } from "./reportPanel";
import { findClassLine, moduleFileCandidates } from "./targets";

/** How long the code-action providers may take for one diagnostic before the next one is tried. */
const CODE_ACTION_TIMEOUT_MS = 15_000;

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

/**
 * Opens a module's source: the file and line the report gives, else the workspace file its dotted
 * class name points to (at the `class` line), else the workspace symbol of that name.
 */
export async function goToModule(args: { module: string; cls: string; file?: string; line?: number }): Promise<void> {
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

/** The server's `undeclared-helper` diagnostics, those naming `qualname` first, then those in open documents. */
function undeclaredHelperDiagnostics(qualname: string): Array<[vscode.Uri, vscode.Diagnostic]> {
  const candidates: Array<[vscode.Uri, vscode.Diagnostic]> = [];
  for (const [uri, diagnostics] of vscode.languages.getDiagnostics()) {
    for (const d of diagnostics) {
      if (d.source === "distcheck" && diagnosticCode(d) === "undeclared-helper") {
        candidates.push([uri, d]);
      }
    }
  }
  const open = new Set(vscode.workspace.textDocuments.map((d) => d.uri.toString()));
  const rank = ([uri, d]: [vscode.Uri, vscode.Diagnostic]): number => (d.message.includes(qualname) ? 2 : 0) + (open.has(uri.toString()) ? 1 : 0);
  return candidates.sort((a, b) => rank(b) - rank(a));
}

/** The server's quick fix that declares an adapter for `qualname` at `diagnostic`, if it offers one in time. */
async function adapterFix(session: Session, uri: vscode.Uri, diagnostic: vscode.Diagnostic, qualname: string): Promise<vscode.CodeAction | undefined> {
  const { server } = session;
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
    CODE_ACTION_TIMEOUT_MS,
  );
  if (!actions) {
    server.log(`  ${vscode.workspace.asRelativePath(uri)}: no code actions within ${CODE_ACTION_TIMEOUT_MS / 1000} s`);
    return undefined;
  }
  server.log(`  code actions in ${Date.now() - started} ms`);
  const fixes = actions.filter((a): a is vscode.CodeAction => typeof (a as { command?: unknown }).command !== "string");
  server.log(`  ${vscode.workspace.asRelativePath(uri)}:${diagnostic.range.start.line + 1}: ${fixes.map((a) => a.title).join(" | ") || "no quick fix"}`);
  return (
    fixes.find((a) => a.title.includes(qualname)) ??
    fixes.find((a) => /adapter/i.test(a.title) && (a.diagnostics ?? []).some((d) => diagnosticCode(d) === "undeclared-helper"))
  );
}

/**
 * Declares an adapter for the helper `args.qualname`: applies the server's quick fix of its
 * `undeclared-helper` diagnostic, then offers to validate again; says what to do when there is none.
 */
export async function declareAdapter(session: Session, args: { target: string; qualname: string }): Promise<void> {
  if (!vscode.workspace.isTrusted) {
    await explainUntrusted();
    return;
  }
  const candidates = undeclaredHelperDiagnostics(args.qualname);
  session.server.log(`declare adapter for ${args.qualname}: ${candidates.length} undeclared-helper diagnostic(s)`);
  for (const [uri, diagnostic] of candidates) {
    const fix = await adapterFix(session, uri, diagnostic, args.qualname);
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
      await validate(session, args.target);
    }
    return;
  }
  void vscode.window.showWarningMessage(
    `Distcheck: no quick fix declares an adapter for ${args.qualname} right now (quick fixes follow the last validation's diagnostics). Validate ${args.target} again, or use “Apply best spec”.`,
  );
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
    goToModule,
    declareAdapter: (args) => declareAdapter(session, args),
    applyBestSpec: (target) => saveSpec(session, target),
    exportJson,
    validate: (target) => validate(session, target),
  };
}
