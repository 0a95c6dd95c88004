/**
 * `distcheck.saveBeforeValidate` (like VS Code's `task.saveBeforeRun`): the daemon validates the files on
 * disk, so before a validation the target's dirty model and spec buffers are saved ("always"), asked about
 * ("prompt"), or left unsaved ("never": the report then names the unsaved edits it did not validate).
 * Pure (no `vscode` import) so unit tests load it.
 */

import { type TargetInfo } from "./report";

export type SaveBeforeValidate = "always" | "prompt" | "never";

/** The setting's value; anything else (unset, mistyped) is the default, "always". */
export function saveMode(value: unknown): SaveBeforeValidate {
  return value === "prompt" || value === "never" ? value : "always";
}

/** The URIs among `dirty` that the validation of `target` reads: its model (factory) file and its spec. */
export function targetDirtyFiles(target: Pick<TargetInfo, "specUri" | "factoryUri" | "uri" | "source"> | undefined, dirty: string[]): string[] {
  if (!target) {
    return [];
  }
  const own = [target.factoryUri, target.specUri, target.source === "file" ? target.uri : undefined].filter(
    (u): u is string => typeof u === "string" && u !== "",
  );
  return dirty.filter((u) => own.includes(u));
}

export const SAVE_AND_VALIDATE = "Save and validate";
export const VALIDATE_SAVED = "Validate saved version";

/** What to do with the dirty files before validating: save them, validate without saving, or stop. */
export function saveDecision(mode: SaveBeforeValidate, dirty: string[], answer?: string): "save" | "validate" | "cancel" {
  if (dirty.length === 0 || mode === "never") {
    return "validate";
  }
  if (mode === "always") {
    return "save";
  }
  return answer === SAVE_AND_VALIDATE ? "save" : answer === VALIDATE_SAVED ? "validate" : "cancel";
}
