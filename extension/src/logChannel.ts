/**
 * The language client writes the server's `window/logMessage` (`[Warn  - 10:00:00] ...`), its own
 * errors and the server's stderr as plain lines; these routers put each line into the one *Distcheck*
 * log channel at its level, so a refused request reads as a warning and only a real failure as an
 * error. Pure (type-only `vscode` import), unit-tested.
 */

import type * as vscode from "vscode";

export type Level = "trace" | "debug" | "info" | "warn" | "error";

/** Where a routed line goes: a `LogOutputChannel`'s level methods. */
export type LevelSink = Pick<vscode.LogOutputChannel, Level>;

const CLIENT_PREFIX = /^\[(Error|Warn|Info|Log|Debug|Trace|LSP)\s*- [^\]]*\]\s?/;
const CLIENT_LEVELS: Record<string, Level> = {
  Error: "error",
  Warn: "warn",
  Info: "info",
  Log: "debug",
  Debug: "debug",
  Trace: "trace",
  LSP: "trace",
};
const CLEAN_EXIT = /^Server process exited with code 0\.?$/;
// Python logging's default format on the server's stderr (`logging.basicConfig`)
const PYTHON_PREFIX = /^(CRITICAL|ERROR|WARNING|INFO|DEBUG):/;
const PYTHON_LEVELS: Record<string, Level> = { CRITICAL: "error", ERROR: "error", WARNING: "warn", INFO: "info", DEBUG: "debug" };

/**
 * The level and text of one line the client wrote: its `[Name - time]` prefix decides (and is dropped,
 * the log channel stamps its own time); a Python logging line keeps its text; any other line (a
 * traceback's continuation, a print) takes `previous`, the level of the line before it.
 */
export function classifyLine(line: string, previous: Level = "info"): { level: Level; text: string } {
  const client = CLIENT_PREFIX.exec(line);
  if (client) {
    const text = line.slice(client[0].length);
    // the client reports every exit as an error, a clean one (a stop or restart asked for) included
    const level = CLEAN_EXIT.test(text) ? "info" : (CLIENT_LEVELS[client[1] as string] ?? "info");
    return { level, text };
  }
  const python = PYTHON_PREFIX.exec(line);
  if (python) {
    return { level: PYTHON_LEVELS[python[1] as string] ?? "info", text: line };
  }
  return { level: previous, text: line };
}

/**
 * An `OutputChannel` for the language client (`outputChannel` / `traceOutputChannel`) that routes every
 * complete line into `sink` at its level (`append` chunks, as the server's stderr arrives, are joined
 * into lines first). `fallback` is the level of unprefixed lines until a prefixed one sets another.
 */
export class LeveledLines implements vscode.OutputChannel {
  private pending = "";
  private level: Level;

  constructor(
    readonly name: string,
    private readonly sink: LevelSink,
    fallback: Level,
    private readonly channel?: Pick<vscode.OutputChannel, "show" | "hide" | "clear">,
  ) {
    this.level = fallback;
  }

  append(value: string): void {
    this.pending += value;
    const lines = this.pending.split(/\r?\n/);
    this.pending = lines.pop() ?? "";
    for (const line of lines) {
      this.emit(line);
    }
  }

  appendLine(value: string): void {
    if (this.pending.trim()) {
      this.emit(this.pending); // a partial chunk of stderr is a line of its own
    }
    this.pending = "";
    const lines = value.split(/\r?\n/);
    // a multi-line message (a message and its data) keeps its first line's level throughout; a line
    // without a prefix (the data of the message before it) keeps that message's level
    const first = classifyLine(lines[0] ?? "", this.level);
    this.level = first.level;
    this.sink[first.level](first.text);
    for (const line of lines.slice(1)) {
      if (line.length) {
        this.sink[first.level](line);
      }
    }
  }

  private emit(line: string): void {
    if (!line.trim()) {
      return;
    }
    const { level, text } = classifyLine(line, this.level);
    this.level = level;
    this.sink[level](text);
  }

  replace(value: string): void {
    this.appendLine(value);
  }

  clear(): void {
    this.channel?.clear();
  }

  show(preserveFocus?: boolean | vscode.ViewColumn, preserve?: boolean): void {
    this.channel?.show(typeof preserveFocus === "boolean" ? preserveFocus : preserve);
  }

  hide(): void {
    this.channel?.hide();
  }

  dispose(): void {
    if (this.pending.trim()) {
      this.emit(this.pending);
    }
    this.pending = "";
  }
}
