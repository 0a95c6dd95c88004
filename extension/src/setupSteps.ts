/**
 * First-run set-up, as pure functions (no `vscode` import, unit-tested): the walkthrough's steps and the
 * context key each one completes on, the wheel of distcheck the .vsix ships (`extension/bundled/`, built by
 * `extension/bundleWheel.mjs`: distcheck is on no package registry) and the pip command that installs it
 * into the chosen interpreter.
 *
 * A walkthrough step ticks on its context key only (package.json's `completionEvents` is
 * `stepCompletion(step)`, checked by a test), and the extension sets a key only once the step's work
 * succeeded: an interpreter that starts, distcheck importable in it, a validation that produced a report, a
 * spec written. Running a command or changing a setting never ticks a step by itself. The expression also
 * asks for the walkthrough to be the active editor: VS Code records an `onContext` expression that is
 * already true when it registers the walkthrough (it does so lazily, often when the page first opens) as
 * seen and never ticks it, so the expression must turn true while the page is open.
 */

/** Walkthrough step id (package.json) → the context key that completes it. */
export const STEP_CONTEXTS = {
  "distcheck.pickInterpreter": "distcheck.setup.interpreterRuns",
  "distcheck.installDistcheck": "distcheck.setup.installed",
  "distcheck.validateExample": "distcheck.setup.validated",
  "distcheck.applyFix": "distcheck.setup.specSaved",
} as const;

export type SetupStep = keyof typeof STEP_CONTEXTS;

/** The walkthrough page's `activeEditor` value (its editor pane id). */
export const WALKTHROUGH_EDITOR = "gettingStartedPage";

/** The completion event of `step` in package.json (see the module docstring). */
export function stepCompletion(step: SetupStep): string {
  return `onContext:${STEP_CONTEXTS[step]} && activeEditor == '${WALKTHROUGH_EDITOR}'`;
}

/** Where the .vsix keeps the bundled wheel, relative to the extension's root. */
export const BUNDLED_DIR = "extension/bundled";

/** The bundled distcheck wheel among the file names of `BUNDLED_DIR` (the newest version when several), or undefined. */
export function bundledWheel(names: readonly string[]): string | undefined {
  const wheels = names.filter((n) => /^distcheck-[^-]+-.*\.whl$/.test(n));
  const version = (n: string): number[] => (n.split("-")[1] ?? "").split(".").map((p) => Number.parseInt(p, 10) || 0);
  const newer = (a: number[], b: number[]): number => {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const d = (a[i] ?? 0) - (b[i] ?? 0);
      if (d !== 0) {
        return d;
      }
    }
    return 0;
  };
  return [...wheels].sort((a, b) => newer(version(b), version(a)))[0];
}

/** pip's arguments to install (or upgrade to) the bundled `wheel` into the interpreter that runs them. */
export function installArgs(wheel: string): string[] {
  return ["-m", "pip", "install", "--upgrade", "--disable-pip-version-check", wheel];
}

/** The same command as one line a user can paste into a terminal (paths with spaces quoted). */
export function installCommandLine(python: string, wheel: string | undefined): string {
  const quote = (s: string): string => (/[\s"'$]/.test(s) ? `"${s.replace(/(["\\$`])/g, "\\$1")}"` : s);
  if (!wheel) {
    return `${quote(python)} -m pip install <path to a distcheck checkout or wheel>`;
  }
  return [python, ...installArgs(wheel)].map(quote).join(" ");
}

/** What the user is told when pip failed: its last error line, and what to do next. */
export function installFailure(python: string, code: number | null, stderr: string, cancelled: boolean): string {
  if (cancelled) {
    return "Distcheck: installing distcheck was cancelled; run “Distcheck: Install distcheck into the interpreter” again to finish.";
  }
  const lines = stderr
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const last = [...lines].reverse().find((l) => /^error\b|ERROR:|No module named/i.test(l)) ?? lines.at(-1) ?? "";
  const noPip = /No module named pip/.test(stderr);
  const next = noPip
    ? `That Python has no pip: run “${python} -m ensurepip” or pick another interpreter (distcheck.interpreter).`
    : "See the Distcheck output for pip's full log; fix the cause or pick another interpreter (distcheck.interpreter).";
  return `Distcheck: pip could not install distcheck into ${python} (exit ${code ?? "killed"})${last ? `: ${last}` : ""}. ${next}`;
}
