/**
 * Where the server runs: the interpreter (the setting read afresh, else the Python extension's, else
 * `python3`: `interpreter.ts` decides), the check that `distcheck.lsp` imports there, the working
 * directory and environment of the server process, and the notice when the check fails.
 */

import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";

import * as vscode from "vscode";
import type { ServerOptions } from "vscode-languageclient/node";

import {
  IMPORT_CHECK_ARGS,
  type Interpreter,
  type ProbeResult,
  type ServerCheck,
  resolveInterpreter,
  settingFromLayers,
} from "./interpreter";
import { installLine } from "./setup";

/**
 * `distcheck.interpreter` as the settings hold it now (read afresh on every start, never cached), and
 * which settings hold it.
 */
export function readInterpreterSetting(folder: vscode.WorkspaceFolder | undefined): { value: string; scope: string | undefined } {
  const config = vscode.workspace.getConfiguration("distcheck", folder?.uri);
  const layered = settingFromLayers(config.inspect<string>("interpreter"));
  return layered.value ? layered : { value: config.get<string>("interpreter", "") ?? "", scope: undefined };
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

/** The interpreter that runs the server for the first workspace folder, resolved now (`resolveInterpreter`). */
export function findInterpreter(): Promise<Interpreter> {
  const folder = vscode.workspace.workspaceFolders?.[0];
  const setting = readInterpreterSetting(folder);
  return resolveInterpreter({
    setting: setting.value,
    settingScope: setting.scope,
    workspaceFolder: folder?.uri.fsPath,
    home: os.homedir(),
    pythonExtension: () => pythonFromExtension(folder?.uri),
  });
}

/**
 * The server's working directory: the extension's global storage (made if missing), else the home
 * directory. Never the workspace: `python -m` / `-c` put the working directory first on sys.path, and
 * the daemon must not import workspace code (Restricted Mode included).
 */
export function serverWorkingDirectory(context: vscode.ExtensionContext): string {
  const dir = context.globalStorageUri.fsPath;
  try {
    fs.mkdirSync(dir, { recursive: true });
    return dir;
  } catch {
    return os.homedir();
  }
}

/** Runs the import check (`IMPORT_CHECK_ARGS`) with `command` in `cwd`; never rejects (`interpretProbe` reads the result). */
export function probe(command: string, cwd: string): Promise<ProbeResult> {
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

/** How the language client starts the daemon: `python -m distcheck.lsp` over stdio in `cwd`. */
export function serverOptions(python: Interpreter, cwd: string): ServerOptions {
  return {
    command: python.command,
    args: ["-m", "distcheck.lsp"],
    // PYTHONSAFEPATH: Python 3.11+ then puts no working directory on the server's sys.path at all.
    options: { cwd, env: { ...process.env, PYTHONUNBUFFERED: "1", PYTHONSAFEPATH: "1" } },
  };
}

/**
 * The error notice when the import check failed: install distcheck there (the wheel the extension ships,
 * when the interpreter runs but lacks distcheck), open the setting, or see (and copy) the install command.
 */
export async function explainSetupProblem(
  check: Exclude<ServerCheck, { ok: true }>,
  python: Interpreter,
  output: vscode.LogOutputChannel,
  extensionPath: string,
): Promise<void> {
  const install = "Install distcheck";
  const actions = check.reason === "not-importable" ? [install, "Open setting", "Show install command"] : ["Open setting", "Show install command"];
  const choice = await vscode.window.showErrorMessage(check.message, ...actions);
  if (choice === install) {
    await vscode.commands.executeCommand("distcheck.installServer");
  } else if (choice === "Open setting") {
    await vscode.commands.executeCommand("workbench.action.openSettings", "distcheck.interpreter");
  } else if (choice === "Show install command") {
    const command = installLine(extensionPath, python);
    output.appendLine(`Install distcheck into the interpreter with:\n  ${command}`);
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
