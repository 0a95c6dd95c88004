/**
 * Checked reads of report JSON for the report panel. Pure (no `vscode` import).
 *
 * Each reader returns the value when it has the expected type and `undefined` otherwise; a value that
 * is present but of the wrong type (or a required one that is missing) is recorded in `Problems` with
 * its path in the report, so the panel can say in the right section what it could not show and render
 * the rest. Absent optional fields are not problems: reports of other distcheck versions omit some.
 */

import { isRecord, toNumber } from "./report";

/** Most of one list the panel renders (rows, frames, ranks); the rest is counted, not drawn. */
export const MAX_ITEMS = 100;

/** What a value is, for an error line: `a string ("abc")`, `null`, `the number NaN`, `a list of 3 items`. */
export function describeValue(value: unknown): string {
  if (value === undefined) {
    return "missing";
  }
  if (value === null) {
    return "null";
  }
  if (Array.isArray(value)) {
    return value.length === 0 ? "an empty list" : `a list of ${value.length} item${value.length === 1 ? "" : "s"}`;
  }
  switch (typeof value) {
    case "string": {
      const shown = value.length > 40 ? `${value.slice(0, 40)}…` : value;
      return `a string (${JSON.stringify(shown)})`;
    }
    case "number":
      return Number.isFinite(value) ? `the number ${value}` : `the number ${String(value)}`;
    case "boolean":
      return String(value);
    case "object":
      return "an object";
    default:
      return `a ${typeof value}`;
  }
}

/** The problems found while rendering one section of the panel. */
export class Problems {
  /** Parts that could not be shown. */
  readonly lines: string[] = [];
  /** Parts shown only in part (long lists). */
  readonly notes: string[] = [];

  /** `path` holds `value`, which is not `expected`. */
  wrong(path: string, value: unknown, expected: string): void {
    this.lines.push(`${path} is ${describeValue(value)}, expected ${expected}`);
  }

  /** The section's renderer failed outright (a shape no reader caught). */
  failed(what: string, error: unknown): void {
    const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    this.lines.push(`${what} failed to render (${text})`);
  }

  /** `path` is a list of `total` items of which the first `shown` are drawn. */
  truncated(path: string, total: number, shown: number): void {
    this.notes.push(`${path} has ${total} items; the first ${shown} are shown`);
  }

  get empty(): boolean {
    return this.lines.length === 0 && this.notes.length === 0;
  }
}

type Obj = Record<string, unknown>;

function at(path: string, key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? (path ? `${path}.${key}` : key) : `${path}[${JSON.stringify(key)}]`;
}

/** A reader bound to one object of the report and its path (`attempts[1].verdicts.energy`). */
export class Reader {
  constructor(
    readonly obj: Obj,
    readonly path: string,
    readonly problems: Problems,
  ) {}

  /** A reader of `value` at `path`, or undefined (and a problem) when it is not an object. */
  static of(value: unknown, path: string, problems: Problems, required = true): Reader | undefined {
    if (isRecord(value)) {
      return new Reader(value, path, problems);
    }
    if (required || (value !== undefined && value !== null)) {
      problems.wrong(path, value, "an object");
    }
    return undefined;
  }

  has(key: string): boolean {
    return Object.prototype.hasOwnProperty.call(this.obj, key) && this.obj[key] !== undefined;
  }

  raw(key: string): unknown {
    return Object.prototype.hasOwnProperty.call(this.obj, key) ? this.obj[key] : undefined;
  }

  pathOf(key: string): string {
    return at(this.path, key);
  }

  private check<T>(key: string, ok: (v: unknown) => v is T, expected: string, required: boolean, nullable: boolean): T | undefined {
    const value = this.raw(key);
    if (ok(value)) {
      return value;
    }
    if (value === undefined ? required : !(nullable && value === null)) {
      this.problems.wrong(this.pathOf(key), value, expected);
    }
    return undefined;
  }

  /** A string. `required`: missing (or null) is a problem; `nullable` (default: not required): null
   * is an accepted "none". The other readers take the same options. */
  str(key: string, opts: { required?: boolean; nullable?: boolean } = {}): string | undefined {
    return this.check(key, (v): v is string => typeof v === "string", "a string", opts.required ?? false, opts.nullable ?? !opts.required);
  }

  bool(key: string, opts: { required?: boolean; nullable?: boolean } = {}): boolean | undefined {
    return this.check(key, (v): v is boolean => typeof v === "boolean", "true or false", opts.required ?? false, opts.nullable ?? !opts.required);
  }

  /** A number as the report writes it (finite, or the strings "NaN", "Infinity", "-Infinity"). */
  num(key: string, opts: { required?: boolean; nullable?: boolean } = {}): number | undefined {
    const value = this.raw(key);
    const x = toNumber(value);
    if (x !== undefined) {
      return x;
    }
    if (value === undefined ? opts.required ?? false : !((opts.nullable ?? !opts.required) && value === null)) {
      this.problems.wrong(this.pathOf(key), value, "a number");
    }
    return undefined;
  }

  /** A whole number ≥ 0 (an index, a count, a line). */
  count(key: string, opts: { required?: boolean; nullable?: boolean } = {}): number | undefined {
    const value = this.raw(key);
    if (typeof value === "number" && Number.isInteger(value) && value >= 0) {
      return value;
    }
    if (value === undefined ? opts.required ?? false : !((opts.nullable ?? !opts.required) && value === null)) {
      this.problems.wrong(this.pathOf(key), value, "a whole number");
    }
    return undefined;
  }

  /** A whole number of either sign (a rank: -1 is the reference run's or the parent's). */
  int(key: string, opts: { required?: boolean; nullable?: boolean } = {}): number | undefined {
    return this.check(key, (v): v is number => typeof v === "number" && Number.isInteger(v), "a whole number", opts.required ?? false, opts.nullable ?? !opts.required);
  }

  list(key: string, opts: { required?: boolean; nullable?: boolean } = {}): unknown[] | undefined {
    return this.check(key, (v): v is unknown[] => Array.isArray(v), "a list", opts.required ?? false, opts.nullable ?? !opts.required);
  }

  /** A nested object as a reader (undefined, and a problem when present, if it is not an object). */
  rec(key: string, opts: { required?: boolean; nullable?: boolean } = {}): Reader | undefined {
    const value = this.raw(key);
    if (isRecord(value)) {
      return new Reader(value, this.pathOf(key), this.problems);
    }
    if (value === undefined ? opts.required ?? false : !((opts.nullable ?? !opts.required) && value === null)) {
      this.problems.wrong(this.pathOf(key), value, "an object");
    }
    return undefined;
  }

  /** The entries of a nested object (at most `MAX_ITEMS`, the rest reported as truncated). */
  entries(key: string, opts: { required?: boolean; nullable?: boolean } = {}): Array<[string, unknown]> {
    const r = this.rec(key, opts);
    return r ? capped(Object.entries(r.obj), r.path, this.problems) : [];
  }

  /** The items of a nested list (at most `MAX_ITEMS`). */
  items(key: string, opts: { required?: boolean; nullable?: boolean } = {}): unknown[] {
    const l = this.list(key, opts);
    return l ? capped(l, this.pathOf(key), this.problems) : [];
  }
}


/** The first `max` items of `list`; a longer list is reported. */
export function capped<T>(list: T[], path: string, problems: Problems, max = MAX_ITEMS): T[] {
  if (list.length <= max) {
    return list;
  }
  problems.truncated(path, list.length, max);
  return list.slice(0, max);
}
