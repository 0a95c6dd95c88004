/**
 * The documentation link of a distcheck diagnostic: the daemon's `codeDescription` is a
 * `distcheck-extension:` URI whose path is the page's path inside the extension
 * (`server/distcheck/lsp/diagnostics_codes.py`), which becomes the installed extension's copy, a
 * `file:` URI VS Code opens in an editor, with no network. Pure (the URI type is the caller's).
 */

/** The scheme of a page link (`diagnostics_codes.PAGE_SCHEME`). */
export const PAGE_SCHEME = "distcheck-extension";

/** Where the pages live inside the extension (`diagnostics_codes.PAGES_DIR`). */
export const PAGES_DIR = "extension/media/diagnostics";

/** What this module reads of a URI. */
export interface UriParts {
  readonly scheme: string;
  readonly path: string;
}

/** A diagnostic's code as `vscode.Diagnostic` holds it. */
export type DiagnosticCode<U> = string | number | { value: string | number; target: U } | undefined;

/** The page a link names, relative to the extension's root; undefined for any other link, or a path outside the pages' folder. */
export function pagePath(target: UriParts): string | undefined {
  if (target.scheme !== PAGE_SCHEME) {
    return undefined;
  }
  const rel = target.path.replace(/^\/+/, "");
  return new RegExp(`^${PAGES_DIR}/[a-z0-9-]+\\.md$`).test(rel) ? rel : undefined;
}

/** `diagnostic` with its page link turned into `resolve(page)` (the installed copy); other codes unchanged. */
export function linkShippedPage<U extends UriParts, D extends { code?: DiagnosticCode<U> }>(diagnostic: D, resolve: (page: string) => U): D {
  const code = diagnostic.code;
  if (typeof code === "object") {
    const page = pagePath(code.target);
    if (page !== undefined) {
      diagnostic.code = { value: code.value, target: resolve(page) };
    }
  }
  return diagnostic;
}
