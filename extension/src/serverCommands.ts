/**
 * The server's executeCommand commands as the client sends them, and the Restricted Mode guard: the
 * commands that import and run workspace code are refused (with the notice saying how to trust the
 * workspace) before they reach the server while the workspace is untrusted.
 */

import * as vscode from "vscode";

/** Commands the server registers (executeCommand); the client's own command ids differ. */
export const SERVER_COMMANDS = {
  validate: "distcheck.validate",
  cancel: "distcheck.cancel",
  saveSpec: "distcheck.saveSpec",
} as const;

/** Server commands that run the workspace's code: refused in Restricted Mode. */
const GUARDED_SERVER_COMMANDS = new Set<string>([SERVER_COMMANDS.validate, SERVER_COMMANDS.saveSpec]);

export const UNTRUSTED_MESSAGE =
  "Distcheck validation imports and runs this workspace's model and sample code, so it is disabled in Restricted Mode. Trust the workspace to validate and to save validated specs; spec files are still checked.";

/** JSON-RPC codes of a request refused on purpose or cancelled (the user's to fix, not a bug): invalid params, request failed, already running, cancelled. */
export const EXPECTED_ERROR_CODES: ReadonlySet<number> = new Set([-32602, -32803, -32002, -32800]);

/** The language client's executeCommand middleware: a guarded command in an untrusted workspace is not sent, and the user is told why. */
export function guardUntrusted(command: string, args: unknown[], next: (command: string, args: unknown[]) => unknown): unknown {
  if (GUARDED_SERVER_COMMANDS.has(command) && !vscode.workspace.isTrusted) {
    void explainUntrusted();
    return undefined;
  }
  return next(command, args);
}

/** Says why validation is disabled in Restricted Mode, offering to manage workspace trust. */
export async function explainUntrusted(): Promise<void> {
  const choice = await vscode.window.showWarningMessage(UNTRUSTED_MESSAGE, "Manage Workspace Trust");
  if (choice) {
    await vscode.commands.executeCommand("workbench.trust.manage");
  }
}
