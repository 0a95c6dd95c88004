/**
 * The report panel's markup primitives: the escaping-by-default `html` template, number formatting,
 * links and buttons with `data-action`. Pure (no `vscode` import).
 *
 * Every piece of the panel's markup is a `SafeHtml`, and only `html` (or `joinHtml`, or `unescaped`
 * for the two constant blocks that must not be entity-escaped) makes one: a value interpolated into
 * `html` is escaped unless it is already `SafeHtml`, so a report string that is forgotten raw is
 * still escaped, and markup built by `html` is never escaped twice. Escaping also applies the one
 * rule for user-derived text (`safeText.ts`, Python's `safe_text`): control, bidirectional and
 * lone-surrogate characters are shown as their escapes, over-long lines cut.
 */

import { textOf, toNumber, freeString } from "./report";
import { UNSAFE, escapeUnsafe, forDisplay } from "./safeText";

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
  "`": "&#96;",
};

/**
 * Markup made by `html`: interpolated as is, never escaped again. The class is not exported and its
 * `#text` field makes the type nominal, so no other module can make one except through this module's
 * functions.
 */
class Markup {
  readonly #text: string;

  constructor(text: string) {
    this.#text = text;
  }

  toString(): string {
    return this.#text;
  }
}

/** Markup that is safe as it stands (made only by `html`, `joinHtml`, `unescaped` and the helpers below). */
export type SafeHtml = Markup;

function trust(text: string): SafeHtml {
  return new Markup(text);
}

/** One interpolated value as markup: `SafeHtml` as is, arrays element by element, the rest escaped. */
function markupOf(value: unknown): string {
  if (value instanceof Markup) {
    return value.toString();
  }
  if (Array.isArray(value)) {
    return value.map(markupOf).join("");
  }
  return escapeHtml(value);
}

/**
 * Tagged template for the panel's markup: the literal parts are kept as written, every interpolation
 * goes through `markupOf` (escaped unless `SafeHtml`; arrays joined). Text and quoted attribute values
 * alike are safe; `null`/`undefined` interpolate as nothing.
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0] ?? "";
  values.forEach((value, i) => {
    out += markupOf(value) + (strings[i + 1] ?? "");
  });
  return trust(out);
}

/** `items` as one piece of markup, each escaped unless `SafeHtml`, with `separator` (escaped too) between. */
export function joinHtml(items: readonly unknown[], separator: string): SafeHtml {
  return trust(items.map(markupOf).join(escapeHtml(separator)));
}

/**
 * `text` as markup without escaping: only for blocks where entities would not be decoded and whose
 * content is made safe otherwise — the constant style sheet and `jsonForScript`'s JSON. Never report text.
 */
export function unescaped(text: string): SafeHtml {
  return trust(text);
}

/**
 * `markup` with `insert` placed before its closing tag when it ends with one of `closers` (e.g.
 * `"</section>"`), else undefined. Cutting markup at a tag boundary keeps it markup.
 */
export function insertBeforeClosingTag(markup: SafeHtml, closers: readonly string[], insert: SafeHtml): SafeHtml | undefined {
  const text = markup.toString();
  const close = closers.find((c) => /^<\/[a-z][a-z0-9]*>$/.test(c) && text.endsWith(c));
  return close === undefined ? undefined : trust(`${text.slice(0, -close.length)}${insert.toString()}${close}`);
}

/** The empty markup (a section that has nothing to show). */
export const NOTHING: SafeHtml = trust("");

function entities(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => HTML_ESCAPES[c] ?? c);
}

/** Text safe in HTML element content and in quoted attribute values, shown by the one rule (`safeText.forDisplay`). */
export function escapeHtml(value: unknown): string {
  return entities(forDisplay(textOf(value)));
}

/** `json` with every `UNSAFE` character as a JSON escape (`\u202e`): parsed back, the value is as it was. */
function jsonEscapes(json: string): string {
  return json.replace(UNSAFE, (c) => `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`);
}

/** JSON safe inside a `<script type="application/json">` block (no unsafe character in it, either). */
export function jsonForScript(value: unknown): string {
  return jsonEscapes(JSON.stringify(value ?? null))
    .replace(/</g, "\\u003c")
    .replace(/>/g, "\\u003e")
    .replace(/&/g, "\\u0026")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

/** A number for people: 3 significant digits, "NaN", "inf", or "–" when absent. */
export function fmt(value: unknown): string {
  const x = toNumber(value);
  if (x === undefined) {
    return value === undefined || value === null ? "–" : freeString(value);
  }
  if (Number.isNaN(x)) {
    return "NaN";
  }
  if (!Number.isFinite(x)) {
    return x > 0 ? "inf" : "-inf";
  }
  if (Number.isInteger(x) && Math.abs(x) < 1e6) {
    return String(x);
  }
  const abs = Math.abs(x);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) {
    return x.toExponential(2).replace(/\.?0+e/, "e");
  }
  return String(Number(x.toPrecision(3)));
}

/**
 * ` name="value"` with the value escaped (`name` is one of the renderer's own attribute names): the
 * unsafe characters shown escaped, but no line cut, so a `data-args` JSON stays whole.
 */
export function attr(name: string, value: unknown): SafeHtml {
  return trust(` ${escapeHtml(name)}="${entities(escapeUnsafe(textOf(value)))}"`);
}

/**
 * The `data-action` / `data-args` pair the page script turns into a posted message. The args' JSON has
 * its unsafe characters as JSON escapes (`\u202e`), so the page script gets the values back as they were.
 */
export function action(name: string, args: Record<string, unknown>): SafeHtml {
  return html`${attr("data-action", name)}${attr("data-args", jsonEscapes(JSON.stringify(args)))}`;
}

/** A button that posts `name` with `args`; disabled (with the reason as its tooltip) when `disabledReason` is set. */
export function button(label: string, name: string, args: Record<string, unknown>, disabledReason?: string): SafeHtml {
  const disabled = disabledReason ? html`${attr("title", disabledReason)} disabled` : NOTHING;
  return html`<button type="button"${action(name, args)}${disabled}>${label}</button>`;
}

/** A link that posts `name` with `args`, with an optional tooltip. */
export function link(label: string, name: string, args: Record<string, unknown>, title?: string): SafeHtml {
  return html`<a href="#"${action(name, args)}${title ? attr("title", title) : NOTHING}>${label}</a>`;
}

export const VERDICT_LABEL: Record<string, string> = {
  passed: "✓ passed",
  failed: "✗ failed",
  inconclusive: "⚠ inconclusive",
  error: "✗ error",
};

export const UNTRUSTED = "Disabled in Restricted Mode: validation runs this workspace's code. Trust the workspace to enable it.";

