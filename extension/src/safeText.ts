/**
 * One rule for text that came from the user's code, as the panel shows it: the same rule as
 * `server/distcheck/safe_text.py` (the CLI, JUnit, JSON and the LSP diagnostics), mirrored here so
 * the panel needs no round trip. Characters that act instead of showing (C0 controls but newline and
 * tab, DEL, C1 controls, bidirectional marks, overrides and isolates, the byte-order mark, U+FFFE and
 * U+FFFF, lone surrogates) are shown as their escape (`\x1b`, `\u202e`, `\ud800`); a line longer than
 * `MAX_LINE` characters is cut, saying how much was cut. `tests/extension/safeText.test.ts` checks
 * this rule against Python's on the shared corpus (`tests/extension/corpus/safe_text.json`). Pure.
 */

/** Python's `safe_text.UNSAFE`, read by code point (`u`), so a character beyond the BMP is one character and only a lone surrogate matches. */
// eslint-disable-next-line no-control-regex -- matching control characters is this rule's job
export const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff\ufffe\uffff\ud800-\udfff]/gu;

/** Python's `safe_text.MAX_LINE`: the longest line shown whole, in characters (code points). */
export const MAX_LINE = 10_000;

function escape(char: string): string {
  const code = char.codePointAt(0) ?? 0;
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

function cut(line: string): string {
  if (line.length <= MAX_LINE) {
    return line; // never more code points than UTF-16 units
  }
  const chars = Array.from(line);
  return chars.length <= MAX_LINE ? line : `${chars.slice(0, MAX_LINE).join("")}… (${chars.length - MAX_LINE} more characters)`;
}

/** `text` with every `UNSAFE` character escaped; lines whole (for values that must round-trip, like attribute JSON). */
export function escapeUnsafe(text: string): string {
  return text.replace(UNSAFE, escape);
}

/** `text` as the panel shows it: every `UNSAFE` character escaped, each line cut at `MAX_LINE` (Python's `for_editor`). */
export function forDisplay(text: string): string {
  return escapeUnsafe(text).split("\n").map(cut).join("\n");
}
