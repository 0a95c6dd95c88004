// A diagnostic's code links its page shipped in the installed extension: the daemon's
// `distcheck-extension:` link becomes the extension's own copy; any other link, or a path outside the
// pages' folder, is left as it is; every page the daemon can link exists in the package's folder.
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { PAGES_DIR, PAGE_SCHEME, linkShippedPage, pagePath } from "../../extension/src/diagnosticDocs";

interface FakeUri {
  scheme: string;
  path: string;
}

const ROOT = join(__dirname, "..", "..", "..");
const INSTALLED: FakeUri = { scheme: "file", path: "/home/u/.vscode/extensions/distcheck.distcheck-0.1.0" };

function resolve(page: string): FakeUri {
  return { scheme: "file", path: `${INSTALLED.path}/${page}` };
}

describe("diagnostic documentation links", () => {
  const pages = readdirSync(join(ROOT, PAGES_DIR)).filter((f) => f.endsWith(".md"));

  it("every shipped page is linked to the installed copy", () => {
    assert.ok(pages.length >= 10, "the pages are generated into extension/media/diagnostics");
    for (const page of pages) {
      const d = { code: { value: page.replace(/\.md$/, ""), target: { scheme: PAGE_SCHEME, path: `/${PAGES_DIR}/${page}` } } };
      linkShippedPage(d, resolve);
      assert.deepEqual(d.code.target, resolve(`${PAGES_DIR}/${page}`));
      assert.ok(existsSync(join(ROOT, PAGES_DIR, page)));
    }
  });

  const untouched: Array<[string, { code?: string | number | { value: string | number; target: FakeUri } }]> = [
    ["another extension's web link", { code: { value: "E501", target: { scheme: "https", path: "/docs/rules" } } }],
    ["a path outside the pages' folder", { code: { value: "x", target: { scheme: PAGE_SCHEME, path: "/../../../etc/passwd" } } }],
    ["a page of another folder", { code: { value: "x", target: { scheme: PAGE_SCHEME, path: "/extension/dist/extension.js" } } }],
    ["a code without a link", { code: "failing-output" }],
    ["no code", {}],
  ];
  for (const [what, d] of untouched) {
    it(`leaves ${what} as it is`, () => {
      const before = JSON.stringify(d);
      linkShippedPage(d, resolve);
      assert.equal(JSON.stringify(d), before);
    });
  }

  it("reads only its own scheme", () => {
    assert.equal(pagePath({ scheme: PAGE_SCHEME, path: `/${PAGES_DIR}/spec-fix.md` }), `${PAGES_DIR}/spec-fix.md`);
    assert.equal(pagePath({ scheme: "file", path: `/${PAGES_DIR}/spec-fix.md` }), undefined);
  });
});
