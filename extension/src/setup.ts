/**
 * First-run set-up in the editor: "Distcheck: Install distcheck into the interpreter" installs the wheel the
 * .vsix ships (`setupSteps.bundledWheel`) into the interpreter the server would start with, with progress,
 * cancellation and pip's output in the Distcheck log, then restarts the server; and `completeStep` sets
 * the walkthrough's context keys (`setupSteps.STEP_CONTEXTS`) once a step's work has succeeded.
 */

import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

import * as vscode from "vscode";

import { type Interpreter } from "./interpreter";
import { BUNDLED_DIR, STEP_CONTEXTS, type SetupStep, bundledWheel, installArgs, installCommandLine, installFailure } from "./setupSteps";

/** Ticks the walkthrough step `step` (call only once its work succeeded). */
export function completeStep(step: SetupStep): void {
  void vscode.commands.executeCommand("setContext", STEP_CONTEXTS[step], true);
}

/** The bundled wheel's absolute path in the installed extension, or undefined (a development build without one). */
export function bundledWheelPath(extensionPath: string): string | undefined {
  const dir = path.join(extensionPath, BUNDLED_DIR);
  let names: string[] = [];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return undefined;
  }
  const wheel = bundledWheel(names);
  return wheel ? path.join(dir, wheel) : undefined;
}

/** The one-line install command for `python` (the bundled wheel when there is one). */
export function installLine(extensionPath: string, python: Interpreter): string {
  return installCommandLine(python.command, bundledWheelPath(extensionPath));
}

export interface InstallTarget {
  extensionPath: string;
  output: vscode.LogOutputChannel;
  /** The interpreter the server starts with, resolved now. */
  interpreter: () => Promise<Interpreter>;
  /** Restarts the server once distcheck is installed. */
  restart: () => Promise<void>;
}

/**
 * Installs the bundled wheel into the server's interpreter; true when pip succeeded. Failure, a missing
 * wheel and cancellation each end in a message that says what to do next; nothing is ticked then.
 */
export async function installIntoInterpreter(target: InstallTarget): Promise<boolean> {
  const python = await target.interpreter();
  const wheel = bundledWheelPath(target.extensionPath);
  if (!wheel) {
    void vscode.window.showErrorMessage(
      `Distcheck: this build of the extension carries no distcheck wheel. Install distcheck into ${python.command} from its checkout (${installCommandLine(python.command, undefined)}), then run “Distcheck: Restart server”.`,
    );
    return false;
  }
  const args = installArgs(wheel);
  target.output.info(`installing distcheck: ${installCommandLine(python.command, wheel)}`);
  const outcome = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Distcheck: installing distcheck into ${python.command}`, cancellable: true },
    (_progress, token) =>
      new Promise<{ code: number | null; stderr: string; cancelled: boolean }>((resolve) => {
        let stderr = "";
        let cancelled = false;
        const child = spawn(python.command, args, { env: { ...process.env, PYTHONSAFEPATH: "1" }, windowsHide: true });
        const log = (chunk: Buffer): void => {
          for (const line of chunk.toString().split("\n")) {
            if (line.trim()) {
              target.output.info(`pip: ${line}`);
            }
          }
        };
        child.stdout.on("data", log);
        child.stderr.on("data", (chunk: Buffer) => {
          stderr += chunk.toString();
          log(chunk);
        });
        token.onCancellationRequested(() => {
          cancelled = true;
          child.kill("SIGTERM");
        });
        child.on("error", (err) => resolve({ code: null, stderr: `${stderr}\nerror: ${err.message}`, cancelled }));
        child.on("close", (code) => resolve({ code, stderr, cancelled }));
      }),
  );
  if (outcome.code !== 0 || outcome.cancelled) {
    const message = installFailure(python.command, outcome.code, outcome.stderr, outcome.cancelled);
    target.output.warn(message);
    const choice = await vscode.window.showErrorMessage(message, "Show output");
    if (choice) {
      target.output.show(true);
    }
    return false;
  }
  target.output.info(`installed distcheck into ${python.command}; restarting the server`);
  await target.restart();
  return true;
}
