import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { type ReportMessage } from "../../extension/src/report";
import { renderReportHtml } from "../../extension/src/reportHtml";
import { NOTHING, attr, button, html, insertBeforeClosingTag, joinHtml, link, unescaped } from "../../extension/src/reportMarkup";
import { FIXTURES, message } from "./fixtures";

const OPTIONS = { nonce: "TESTNONCE123", cspSource: "vscode-webview://abc", scriptUri: "vscode-webview://abc/report.js" };

/** Markup that must never reach the page as markup, and its escaped form. */
const MARK = `<b id=pwn a='1' b="2">\`&amp;`;
const MARK_ESCAPED = "&lt;b id=pwn a=&#39;1&#39; b=&quot;2&quot;&gt;&#96;&amp;amp;";
/** Its start, escaped (inside JSON, as in the spec section, the double quotes come escaped for JSON first). */
const MARK_SHOWN = "&lt;b id=pwn a=&#39;1&#39; b=";

describe("the html template", () => {
  it("escapes every interpolated string, number, object and boolean", () => {
    assert.equal(html`<p>${MARK}</p>`.toString(), `<p>${MARK_ESCAPED}</p>`);
    assert.equal(html`<p title="${MARK}">x</p>`.toString(), `<p title="${MARK_ESCAPED}">x</p>`);
    assert.equal(html`${3}|${1.5}|${true}`.toString(), "3|1.5|true");
    assert.equal(html`${{ a: "<" }}`.toString(), "{&quot;a&quot;:&quot;&lt;&quot;}");
    assert.equal(html`[${undefined}][${null}]`.toString(), "[][]");
  });

  it("keeps markup it made itself as it is, however deeply nested (no double escaping)", () => {
    const inner = html`<b>${"a&b"}</b>`;
    assert.equal(html`<p>${inner}</p>`.toString(), "<p><b>a&amp;b</b></p>");
    assert.equal(html`${html`${html`<i>${"<"}</i>`}`}`.toString(), "<i>&lt;</i>");
    assert.equal(html`${NOTHING}`.toString(), "");
    // a string that merely looks like escaped markup is still escaped: only `SafeHtml` is trusted
    assert.equal(html`${"<i>&lt;</i>"}`.toString(), "&lt;i&gt;&amp;lt;&lt;/i&gt;");
    assert.equal(html`${inner.toString()}`.toString(), "&lt;b&gt;a&amp;amp;b&lt;/b&gt;");
  });

  it("joins arrays without a separator, escaping each string and keeping each SafeHtml", () => {
    assert.equal(html`<ul>${["<a>", html`<li>${"&"}</li>`, ["<", html`<br>`]]}</ul>`.toString(), "<ul>&lt;a&gt;<li>&amp;</li>&lt;<br></ul>");
    assert.equal(html`${[]}`.toString(), "");
  });

  it("joinHtml escapes the items that are strings and the separator", () => {
    assert.equal(joinHtml([html`<b>1</b>`, "<2>", 3], "\n").toString(), "<b>1</b>\n&lt;2&gt;\n3");
    assert.equal(joinHtml(["a", "b"], "<hr>").toString(), "a&lt;hr&gt;b");
  });

  it("an object that only looks like SafeHtml is escaped", () => {
    const fake = { toString: (): string => "<script>x</script>" };
    assert.equal(html`${fake}`.toString(), "{}");
    assert.equal(html`${[fake]}`.toString(), "{}");
  });

  it("attributes, buttons and links escape their label, title and args", () => {
    assert.equal(attr("title", MARK).toString(), ` title="${MARK_ESCAPED}"`);
    const b = button(MARK, "validate", { target: MARK }, MARK).toString();
    assert.ok(!b.includes("<b id"));
    assert.ok(b.startsWith('<button type="button" data-action="validate" data-args="{&quot;target&quot;:&quot;&lt;b id=pwn'));
    assert.ok(b.endsWith(`title="${MARK_ESCAPED}" disabled>${MARK_ESCAPED}</button>`));
    const a = link(MARK, "openFile", { file: MARK, line: 1 }, MARK).toString();
    assert.equal((a.match(/<a /g) ?? []).length, 1);
    assert.ok(a.endsWith(`title="${MARK_ESCAPED}">${MARK_ESCAPED}</a>`));
    assert.equal(html`${button("x", "exportJson", {})}`.toString(), button("x", "exportJson", {}).toString());
  });

  it("insertBeforeClosingTag puts markup before the closing tag, or says it cannot", () => {
    const section = html`<section id="s">${"<"}</section>`;
    assert.equal(insertBeforeClosingTag(section, ["</section>"], html`<p>${"&"}</p>`)?.toString(), '<section id="s">&lt;<p>&amp;</p></section>');
    assert.equal(insertBeforeClosingTag(section, ["</header>"], NOTHING), undefined);
    assert.equal(insertBeforeClosingTag(html`<p>x</p>${"<y>"}`, ["<y>"], NOTHING), undefined, "only closing tags are cut at");
  });

  it("unescaped passes text through (the style sheet and the script JSON only)", () => {
    assert.equal(html`${unescaped("a > b")}`.toString(), "a > b");
  });
});

// ------------------------------------------------------------------------------------------------
// a malicious string in every field of every fixture stays escaped in every section

/** Maps whose keys are report data (output names, handler names, ranks, package names). */
const DATA_KEYED = new Set(["verdicts", "max_abs_diff", "max_rel_diff", "handler_counts", "n_calls_per_rank", "versions", "per_rank", "atol", "rtol"]);

function poison(value: unknown, keyedByData = false): unknown {
  if (typeof value === "string") {
    return `${value}${MARK}`;
  }
  if (Array.isArray(value)) {
    return value.map((v) => poison(v));
  }
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [keyedByData ? `${k}${MARK}` : k, poison(v, DATA_KEYED.has(k))]));
  }
  return value;
}

function poisoned(name: string): ReportMessage {
  const m = message(name);
  return { target: `${name}${MARK}`, specUri: `vscode-remote://x/${MARK}`, notice: MARK, report: poison(m.report) as ReportMessage["report"] };
}

/** The page cut into its header and sections, by id ("summary" for the header). */
function sections(page: string): Map<string, string> {
  const out = new Map<string, string>();
  const header = /<header class="head">[\s\S]*?<\/header>/.exec(page);
  if (header) {
    out.set("summary", header[0]);
  }
  for (const m of page.matchAll(/<section id="([a-z]+)">[\s\S]*?<\/section>/g)) {
    out.set(m[1] ?? "", m[0]);
  }
  return out;
}

const SECTIONS = ["summary", "attempts", "outputs", "unrouted", "suspicious", "disagreements", "checked", "helpers", "layers", "errors", "partition", "spec"];

describe("a malicious report string", () => {
  const seen = new Set<string>();
  for (const name of FIXTURES) {
    it(`stays escaped in every section of ${name}`, () => {
      for (const trusted of [true, false]) {
        const page = renderReportHtml(poisoned(name), { ...OPTIONS, trusted });
        assert.ok(!page.includes("<b id=pwn"), `raw markup from the report in ${name}`);
        assert.ok(!page.includes("&amp;lt;b id=pwn"), `escaped twice in ${name}`);
        const parts = sections(page);
        for (const [id, part] of parts) {
          if (part.includes(MARK_SHOWN)) {
            seen.add(id);
          }
        }
        assert.ok(parts.get("summary")?.includes(MARK_ESCAPED), "the target and notice are shown, escaped");
      }
    });
  }
  it("reaches every section (so the check above covers each of them)", () => {
    assert.deepEqual(SECTIONS.filter((id) => !seen.has(id)), []);
  });
});

// ------------------------------------------------------------------------------------------------
// no hand escaping left in the renderers

describe("the renderers build markup only with html", () => {
  const dir = join(__dirname, "..", "..", "..", "extension", "src");
  for (const file of ["reportHtml.ts", "reportSections.ts", "reportDetails.ts", "reportEvidence.ts"]) {
    it(`${file} calls no escapeHtml and no unescaped on report text`, () => {
      const source = readFileSync(join(dir, file), "utf8");
      assert.equal(source.match(/\bescapeHtml\(/g), null, "escaping is the template's job");
      const raw = [...source.matchAll(/\bunescaped\(([^)]*)\)/g)].map((m) => m[1]);
      assert.deepEqual(raw, file === "reportHtml.ts" ? ["STYLE", "stateForScript(message"] : []);
    });
  }
});
