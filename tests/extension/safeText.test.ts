// The one rule for user-derived text, in the panel (issue 33.2): the TypeScript rule (safeText.ts) shows
// every input of the shared hostile corpus exactly as Python's `safe_text.for_editor` does (the corpus
// file is written by tests/server/lsp/test_diagnostics_hostile.py, which checks it is up to date), and a
// report carrying each input renders to a page that parses, with no acting character in any text or
// attribute and the input shown escaped.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { parse } from "parse5";

import { renderReportHtml } from "../../extension/src/reportHtml";
import { MAX_LINE, UNSAFE, escapeUnsafe, forDisplay } from "../../extension/src/safeText";
import { message } from "./fixtures";

interface Case {
  name: string;
  shown: string;
  input?: string;
  repeat?: [string, number];
}

const CORPUS = JSON.parse(readFileSync(join(__dirname, "..", "corpus", "safe_text.json"), "utf8")) as {
  rule: { unsafe: string; max_line: number };
  cases: Case[];
};

function inputOf(c: Case): string {
  return c.input ?? (c.repeat ? c.repeat[0].repeat(c.repeat[1]) : "");
}

const OPTIONS = { nonce: "N0NCE", cspSource: "vscode-webview://abc", scriptUri: "vscode-webview://abc/report.js" };
// eslint-disable-next-line no-control-regex -- the characters that must not reach the page
const ACTING = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]/u;

interface Node {
  nodeName: string;
  value?: string;
  attrs?: Array<{ name: string; value: string }>;
  childNodes?: Node[];
  content?: Node;
}

/** Every text node's value and every attribute value of the parsed page. */
function textsOf(node: Node, out: string[] = []): string[] {
  if (node.nodeName === "#text" && node.value !== undefined) {
    out.push(node.value);
  }
  for (const a of node.attrs ?? []) {
    out.push(a.value);
  }
  for (const child of [...(node.childNodes ?? []), ...(node.content ? [node.content] : [])]) {
    textsOf(child, out);
  }
  return out;
}

describe("the one rule for user text: TypeScript agrees with Python", () => {
  it("flags the same characters and cuts at the same length", () => {
    assert.equal(MAX_LINE, CORPUS.rule.max_line);
    const python = new RegExp(CORPUS.rule.unsafe, "u");
    const ours = new RegExp(UNSAFE.source, "u");
    for (let code = 0; code <= 0x10ffff; code += code < 0x10000 ? 1 : 0x1000) {
      const char = String.fromCodePoint(code);
      assert.equal(ours.test(char), python.test(char), `U+${code.toString(16)}`);
    }
    assert.equal(forDisplay("😀"), "😀", "a character beyond the BMP is no lone surrogate");
  });

  for (const c of CORPUS.cases) {
    it(`${c.name}: shown as Python shows it`, () => {
      assert.equal(forDisplay(inputOf(c)), c.shown);
    });
  }
});

describe("the panel shows hostile text escaped", () => {
  for (const c of CORPUS.cases) {
    it(`${c.name}: the page parses, nothing in it acts, the text is still shown`, () => {
      const text = inputOf(c);
      const m = message("worker_error", `target ${text}`);
      const report = m.report as { attempts: Array<{ error: { message: string } }>; next_action: string };
      const first = report.attempts[0];
      assert.ok(first);
      first.error.message = `boom ${text}`;
      report.next_action = `FAIL — ${text}`;
      const page = renderReportHtml(m, OPTIONS);
      const tree: unknown = parse(page);
      const texts = textsOf(tree as Node);
      for (const t of texts) {
        assert.ok(!ACTING.test(t), `${c.name}: ${JSON.stringify(ACTING.exec(t)?.[0])} in the page`);
      }
      const shown = forDisplay(`boom ${text}`).split("\n")[0] ?? "";
      assert.ok(texts.some((t) => t.includes(shown.slice(0, 200))), `${c.name}: the error is shown, escaped`);
    });
  }

  it("an action's arguments keep the value as it was (escaped as JSON, not shown)", () => {
    const value = "a\u202eb\x9bc";
    assert.equal(escapeUnsafe(value), "a\\u202eb\\x9bc");
  });
});
