/**
 * The report panel's markup primitives: escaping, number formatting, links and buttons with
 * `data-action`. Pure (no `vscode` import).
 */

import { textOf, toNumber, freeString } from "./report";

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
  "`": "&#96;",
};

/** Text safe in HTML element content and in quoted attribute values. */
export function escapeHtml(value: unknown): string {
  const text = textOf(value);
  return text.replace(/[&<>"'`]/g, (c) => HTML_ESCAPES[c] ?? c);
}

/** JSON safe inside a `<script type="application/json">` block. */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value ?? null)
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

export function attr(name: string, value: unknown): string {
  return ` ${name}="${escapeHtml(value)}"`;
}

export function action(name: string, args: Record<string, unknown>): string {
  return `${attr("data-action", name)}${attr("data-args", JSON.stringify(args))}`;
}

export function button(label: string, name: string, args: Record<string, unknown>, disabledReason?: string): string {
  const disabled = disabledReason ? `${attr("title", disabledReason)} disabled` : "";
  return `<button type="button"${action(name, args)}${disabled}>${escapeHtml(label)}</button>`;
}

export function link(label: string, name: string, args: Record<string, unknown>, title?: string): string {
  return `<a href="#"${action(name, args)}${title ? attr("title", title) : ""}>${escapeHtml(label)}</a>`;
}

export const VERDICT_LABEL: Record<string, string> = {
  passed: "✓ passed",
  failed: "✗ failed",
  inconclusive: "⚠ inconclusive",
  error: "✗ error",
};

export const UNTRUSTED = "Disabled in Restricted Mode: validation runs this workspace's code. Trust the workspace to enable it.";

