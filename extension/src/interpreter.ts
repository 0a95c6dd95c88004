/**
 * Which Python runs the server, and whether it can. Pure functions with injected dependencies (no
 * `vscode` import), so the resolution order is unit-tested.
 *
 * Order: the `distcheck.interpreter` setting; else the Python extension's active interpreter for the
 * workspace (when that extension is installed); else `python3`. Every start of the server (the first,
 * "Distcheck: Restart server", a settings change, a crash restart) goes through `resolveInterpreter`
 * with the setting read afresh, and the log names the source (and the settings scope it came from).
 */

export type InterpreterSource = "setting" | "python-extension" | "default";

export interface Interpreter {
  command: string;
  source: InterpreterSource;
  /** For the setting: which settings held it ("Folder settings", "Workspace settings", "User settings"). */
  scope?: string | undefined;
}

/** What `WorkspaceConfiguration.inspect("interpreter")` returns (the fields read here). */
export interface SettingLayers {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/**
 * The effective `distcheck.interpreter` and the settings that hold it, most specific first (Folder, then
 * Workspace, then User settings); an empty or non-string value in a layer does not hide the layers below.
 */
export function settingFromLayers(layers: SettingLayers | undefined): { value: string; scope: string | undefined } {
  const ordered: Array<[unknown, string]> = [
    [layers?.workspaceFolderValue, "Folder settings"],
    [layers?.workspaceValue, "Workspace settings"],
    [layers?.globalValue, "User settings"],
  ];
  for (const [value, scope] of ordered) {
    if (typeof value === "string" && value.trim()) {
      return { value, scope };
    }
  }
  return { value: "", scope: undefined };
}

/** The log's words for where the interpreter came from. */
export function describeSource(python: Interpreter): string {
  if (python.source === "setting") {
    return `the distcheck.interpreter setting${python.scope ? ` (${python.scope})` : ""}`;
  }
  return python.source === "python-extension" ? "the Python extension's active interpreter" : `the default ${DEFAULT_PYTHON} (distcheck.interpreter is not set)`;
}

export interface InterpreterDeps {
  /** The `distcheck.interpreter` setting ("" when unset). */
  setting: string | undefined;
  /** Which settings held it, for the log. */
  settingScope?: string | undefined;
  /** First workspace folder's path, for `${workspaceFolder}` in the setting. */
  workspaceFolder?: string | undefined;
  /** Home directory, for `~` in the setting. */
  home?: string | undefined;
  /** The Python extension's active interpreter, or undefined when the extension is absent / has none. */
  pythonExtension?: () => Promise<string | undefined>;
}

export const DEFAULT_PYTHON = "python3";

export function expandSetting(value: string, workspaceFolder: string | undefined, home: string | undefined): string {
  let out = value.trim();
  if (workspaceFolder) {
    out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  }
  if (home && (out === "~" || out.startsWith("~/"))) {
    out = home + out.slice(1);
  }
  return out;
}

export async function resolveInterpreter(deps: InterpreterDeps): Promise<Interpreter> {
  const setting = expandSetting(deps.setting ?? "", deps.workspaceFolder, deps.home);
  if (setting) {
    return deps.settingScope ? { command: setting, source: "setting", scope: deps.settingScope } : { command: setting, source: "setting" };
  }
  if (deps.pythonExtension) {
    try {
      const fromExtension = await deps.pythonExtension();
      if (fromExtension && fromExtension.trim()) {
        return { command: fromExtension.trim(), source: "python-extension" };
      }
    } catch {
      // the Python extension failed to answer: fall through to the default
    }
  }
  return { command: DEFAULT_PYTHON, source: "default" };
}

export interface ProbeResult {
  /** Exit code, or null when the process could not start or was killed. */
  code: number | null;
  stderr: string;
  /** Set when the process could not be started (ENOENT, EACCES, ...). */
  spawnError?: string;
  timedOut?: boolean;
}

export type ServerCheck =
  | { ok: true }
  | { ok: false; reason: "not-found" | "not-importable" | "timeout"; message: string; detail: string };

/** The import check's arguments: `<python> -c "import distcheck.lsp"`. */
export const IMPORT_CHECK_ARGS = ["-c", "import distcheck.lsp"];

/** Turns the outcome of the import check into what the user is told. */
export function interpretProbe(python: Interpreter, probe: ProbeResult): ServerCheck {
  const where =
    python.source === "setting"
      ? "the distcheck.interpreter setting"
      : python.source === "python-extension"
        ? "the Python extension's active interpreter"
        : `the default ${DEFAULT_PYTHON}`;
  if (probe.spawnError) {
    return {
      ok: false,
      reason: "not-found",
      message: `Distcheck: no Python interpreter at “${python.command}” (${where}). Set distcheck.interpreter to a Python that has distcheck installed.`,
      detail: probe.spawnError,
    };
  }
  if (probe.timedOut) {
    return {
      ok: false,
      reason: "timeout",
      message: `Distcheck: “${python.command} -c "import distcheck.lsp"” did not finish in time.`,
      detail: probe.stderr,
    };
  }
  if (probe.code !== 0) {
    const last = probe.stderr.trim().split("\n").at(-1) ?? "";
    return {
      ok: false,
      reason: "not-importable",
      message: `Distcheck: distcheck is not importable with “${python.command}” (${where})${last ? `: ${last}` : ""}. Install it there or pick another interpreter.`,
      detail: probe.stderr,
    };
  }
  return { ok: true };
}

/**
 * Restart limiter for the language server: at most `max` restarts within `windowMs`. A server that keeps
 * crashing is left stopped (the user restarts it with "Distcheck: Restart server").
 */
export class RestartBudget {
  private readonly times: number[] = [];

  constructor(
    readonly max = 4,
    readonly windowMs = 3 * 60 * 1000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records a crash; true when another restart is allowed. */
  allow(): boolean {
    const t = this.now();
    while (this.times.length && t - (this.times[0] as number) > this.windowMs) {
      this.times.shift();
    }
    if (this.times.length >= this.max) {
      return false;
    }
    this.times.push(t);
    return true;
  }

  reset(): void {
    this.times.length = 0;
  }
}
