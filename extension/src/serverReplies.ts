/**
 * What the server's replies to the extension's commands mean (docs/protocol.md): the results of
 * `distcheck.validate`, `distcheck.cancel` and `distcheck.saveSpec`, and the error codes it refuses
 * with. Pure (no `vscode` import), so the reading is unit-tested; the commands only act on it.
 */

import { isRecord } from "./report";

/** JSON-RPC / LSP error codes the server answers a command with. */
export const ERROR_CODES = {
  /** The request was understood but failed (a refusal with a reason, e.g. code outside the workspace). */
  requestFailed: -32803,
  /** A validation of that target is already running. */
  alreadyRunning: -32002,
  /** The command's arguments are wrong (an unknown target, a bad override). */
  invalidParams: -32602,
} as const;

/** How a command's failure is shown: offer to cancel the running one, show the server's message, or a generic one. */
export type FailureKind = "already-running" | "server-message" | "unexpected";

/** The kind of a server error with `code` (undefined when it is not a JSON-RPC error at all). */
export function failureKind(code: number | undefined): FailureKind {
  if (code === ERROR_CODES.alreadyRunning) {
    return "already-running";
  }
  if (code === ERROR_CODES.invalidParams || code === ERROR_CODES.requestFailed) {
    return "server-message";
  }
  return "unexpected";
}

/**
 * The paths of a refusal to run code from outside the workspace (`requestFailed` with data
 * `{kind: "outside-workspace", paths: [...]}`), else undefined.
 */
export function outsideWorkspacePaths(code: number | undefined, data: unknown): string[] | undefined {
  if (code !== ERROR_CODES.requestFailed || !isRecord(data)) {
    return undefined;
  }
  const { kind, paths } = data;
  if (kind !== "outside-workspace" || !Array.isArray(paths) || !paths.every((p) => typeof p === "string")) {
    return undefined;
  }
  return paths;
}

/** The target a started validation runs under (the server resolves a file URI to its name), else `asked`. */
export function startedTarget(result: unknown, asked: string): string {
  return isRecord(result) && typeof result.target === "string" ? result.target : asked;
}

/** The targets `distcheck.cancel` cancelled (none when the result has no list). */
export function cancelledTargets(result: unknown): string[] {
  return isRecord(result) && Array.isArray(result.cancelled) ? result.cancelled.map(String) : [];
}

/**
 * Where `distcheck.saveSpec` put the spec (`{"saved": uri}`), and whether the file already held it
 * (`"unchanged": true`: nothing was written); undefined when the result names no file.
 */
export function savedSpec(result: unknown): { uri: string; unchanged: boolean } | undefined {
  if (!isRecord(result) || typeof result.saved !== "string" || !result.saved) {
    return undefined;
  }
  return { uri: result.saved, unchanged: result.unchanged === true };
}

/** A protocol `Location` (`distcheck/locateModule`'s answer): its file URI and 0-based start position. */
export interface LocatedAt {
  uri: string;
  line: number;
  character: number;
}

function isPosition(value: unknown): value is { line: number; character: number } {
  return isRecord(value) && Number.isInteger(value.line) && Number.isInteger(value.character) && (value.line as number) >= 0;
}

/**
 * Where `distcheck/locateModule` says the class is (`{uri, range}`), or undefined when the server
 * answered null ("not in the workspace") or something that is not a location.
 */
export function locatedModule(result: unknown): LocatedAt | undefined {
  if (!isRecord(result) || typeof result.uri !== "string" || !result.uri || !isRecord(result.range)) {
    return undefined;
  }
  const start = result.range.start;
  return isPosition(start) ? { uri: result.uri, line: start.line, character: start.character } : undefined;
}

/**
 * `distcheck/helperFix`'s answer when it is a resolved code action (a `title` and an `edit` object),
 * else undefined (null: no ready adapter for that helper in the last report).
 */
export function helperFixAction(result: unknown): { title: string; edit: Record<string, unknown> } | undefined {
  if (!isRecord(result) || typeof result.title !== "string" || !isRecord(result.edit)) {
    return undefined;
  }
  return { title: result.title, edit: result.edit };
}
