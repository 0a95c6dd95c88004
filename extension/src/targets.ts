/**
 * Which target a command runs, and where CodeLenses go. Pure (no `vscode` import).
 */

import { forDisplay } from "./safeText";
import { type TargetInfo } from "./report";

export interface ActiveFile {
  /** Document URI as a string (`file:///...`). */
  uri: string;
  languageId: string;
}

export type TargetChoice =
  | { kind: "target"; name: string }
  | { kind: "file"; uri: string }
  | { kind: "pick"; items: TargetInfo[]; preselect: string | undefined }
  | { kind: "none"; reason: string };

/** The file a target's factory lives in (older servers only send `uri`). */
export function factoryUriOf(t: TargetInfo): string | undefined {
  return t.factoryUri ?? (t.source === "file" || !t.uri?.endsWith("pyproject.toml") ? t.uri : undefined);
}

export function sameUri(a: string | undefined | null, b: string | undefined | null): boolean {
  if (!a || !b) {
    return false;
  }
  const norm = (u: string): string => decodeURIComponent(u).replace(/^file:\/\/\/([a-zA-Z]):/, (_, d: string) => `file:///${d.toLowerCase()}:`);
  return norm(a) === norm(b);
}

/**
 * The target of a Validate / Save command run without an argument: the only target; a picker when there
 * are several (the active file's targets first and preselected); the active Python file when the
 * workspace configures none; else nothing, with the reason.
 */
export function chooseTarget(targets: readonly TargetInfo[], active: ActiveFile | undefined): TargetChoice {
  if (targets.length === 1) {
    return { kind: "target", name: (targets[0] as TargetInfo).name };
  }
  if (targets.length > 1) {
    const mine = targets.filter((t) => sameUri(factoryUriOf(t), active?.uri) || sameUri(t.uri, active?.uri));
    const others = targets.filter((t) => !mine.includes(t));
    return { kind: "pick", items: [...mine, ...others], preselect: mine[0]?.name };
  }
  if (active && active.languageId === "python") {
    return { kind: "file", uri: active.uri };
  }
  return {
    kind: "none",
    reason:
      "No distcheck target: add [tool.distcheck] to pyproject.toml, or open a Python file that defines model_factory and sample_batch at module scope.",
  };
}

export interface LensSpot {
  /** 0-based line of the `def`. */
  line: number;
  /** What Validate gets: a target name, or the document URI for a file target. */
  arg: string;
  title: string;
}

const MODULE_DEF = /^(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(/;

/** 0-based lines of module-level `def NAME(` in `text`. */
export function moduleLevelDefs(text: string, name: string): number[] {
  const out: number[] = [];
  text.split(/\r?\n/).forEach((line, i) => {
    const m = MODULE_DEF.exec(line);
    if (m && m[1] === name) {
      out.push(i);
    }
  });
  return out;
}

/** `"path/file.py:func"` → `func` (the part after the last colon that is not a drive letter). */
export function factoryFunction(factory: string | undefined): string | undefined {
  if (!factory) {
    return undefined;
  }
  const i = factory.lastIndexOf(":");
  if (i <= 1) {
    return undefined;
  }
  const fn = factory.slice(i + 1).trim();
  return /^[A-Za-z_][\w.]*$/.test(fn) ? fn.split(".").at(-1) : undefined;
}

/**
 * CodeLens spots for one Python document: one per configured target whose factory lives in it (at the
 * factory's module-level `def`, else at the line the server gave), and one above a module-level
 * `def model_factory` no target already covers.
 */
export function lensSpots(text: string, docUri: string, targets: readonly TargetInfo[]): LensSpot[] {
  const spots: LensSpot[] = [];
  const taken = new Set<number>();
  for (const t of targets) {
    if (!sameUri(factoryUriOf(t), docUri)) {
      continue;
    }
    const fn = factoryFunction(t.factory);
    const defs = fn ? moduleLevelDefs(text, fn) : [];
    const serverLine = t.factoryUri ? t.factoryLine : t.line;
    const line = defs[0] ?? (typeof serverLine === "number" && serverLine >= 0 ? serverLine : 0);
    const arg = t.source === "file" ? docUri : t.name;
    spots.push({ line, arg, title: targets.length > 1 || t.source !== "file" ? `▶ Validate distribution (${t.name})` : "▶ Validate distribution" });
    taken.add(line);
  }
  for (const line of moduleLevelDefs(text, "model_factory")) {
    if (!taken.has(line)) {
      spots.push({ line, arg: docUri, title: "▶ Validate distribution" });
      taken.add(line);
    }
  }
  return spots.sort((a, b) => a.line - b.line);
}

/** CodeLens spots in a pyproject.toml: one at each target's table. */
export function configLensSpots(docUri: string, targets: readonly TargetInfo[]): LensSpot[] {
  return targets
    .filter((t) => t.source !== "file" && sameUri(t.uri, docUri))
    .map((t) => ({ line: typeof t.line === "number" && t.line >= 0 ? t.line : 0, arg: t.name, title: `▶ Validate distribution (${t.name})` }))
    .sort((a, b) => a.line - b.line);
}

export interface TargetPickItem {
  label: string;
  /** The target name Validate gets. */
  name: string;
  /** Where the factory is: workspace-relative `path:function`. */
  description: string;
  /** The target's spec file when it exists (workspace-relative), else what kind of target it is. */
  detail: string | undefined;
  picked: boolean;
}

/** Injected by the caller: workspace-relative text for a `file://` URI or a path, and whether a file exists. */
export interface PickContext {
  relative: (uriOrPath: string) => string;
  exists: (uri: string) => boolean;
}

/**
 * Picker rows for `targets`: workspace-relative factory locations, and a spec file only when it exists
 * on disk (a configured spec not written yet is not offered as if it were there). The preselected
 * target first, the order otherwise kept.
 */
export function targetPickItems(targets: readonly TargetInfo[], preselect: string | undefined, ctx: PickContext): TargetPickItem[] {
  const items = targets.map((t): TargetPickItem => {
    const factoryUri = factoryUriOf(t);
    const fn = factoryFunction(t.factory);
    const where = factoryUri ? ctx.relative(factoryUri) : t.factory ? relativeFactory(t.factory, ctx) : "";
    const description = factoryUri && fn ? `${where}:${fn}` : where;
    const specUri = t.specUri ?? undefined;
    const spec = specUri && ctx.exists(specUri) ? `spec ${ctx.relative(specUri)}` : undefined;
    const detail = spec ?? (t.source === "file" ? "model_factory and sample_batch in this file" : undefined);
    const shown = (text: string): string => forDisplay(text).replace(/\n/g, " ");
    return { label: shown(t.name), name: t.name, description: shown(description), detail: detail === undefined ? undefined : shown(detail), picked: t.name === preselect };
  });
  return preselect ? [...items.filter((i) => i.picked), ...items.filter((i) => !i.picked)] : items;
}

/** `"/abs/dir/model.py:fn"` → `"dir/model.py:fn"`; a relative factory is left as written. */
function relativeFactory(factory: string, ctx: PickContext): string {
  const i = factory.lastIndexOf(":");
  const [file, fn] = i > 1 ? [factory.slice(0, i), factory.slice(i)] : [factory, ""];
  return /^(\/|[A-Za-z]:[\\/]|file:)/.test(file) ? `${ctx.relative(file)}${fn}` : factory;
}
