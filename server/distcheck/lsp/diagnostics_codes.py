"""The diagnostic codes the daemon publishes and where each is documented, stated once.

Every code has a section of `docs/diagnostics.md` (one heading per code, its anchor the code itself)
and a page the extension ships, `extension/media/diagnostics/<code>.md`, generated from that section
(`python -m distcheck.lsp.diagnostics_codes` writes them; `pages` says what each holds).
`code_description` is the `Diagnostic.codeDescription` that links a diagnostic to its page: a
`distcheck-extension:` URI whose path is the page's path inside the extension, which the extension's
client turns into the installed copy's `file:` URI (`extension/src/diagnosticDocs.ts`), so the link
opens the documentation of the very version that published it, with no network.
`MESSAGE_LIMIT` bounds a diagnostic's one-sentence message (the remedy and the evidence go in its
related information). `tests/server/lsp/test_diagnostics_texts.py` checks every code has its section
and its page, and that the pages are up to date.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from lsprotocol import types

__all__ = [
    "CODES",
    "MESSAGE_LIMIT",
    "PAGES_DIR",
    "PAGE_SCHEME",
    "code_description",
    "page_path",
    "pages",
]

MESSAGE_LIMIT = 120
"""The most characters of a diagnostic's message (what Problems shows on one line)."""

PAGES_DIR = "extension/media/diagnostics"
"""Where the pages live, relative to the extension's root (packaged: `.vscodeignore` keeps `extension/media/**`)."""

PAGE_SCHEME = "distcheck-extension"
"""The scheme of a `codeDescription` href: its path is relative to the installed extension's root."""

CODES: dict[str, str] = {
    "failing-output": "failing-output",
    "spec-fix": "spec-fix",
    "spec-missing": "spec-missing",
    "undeclared-helper": "undeclared-helper",
    "worker-error": "worker-error",
    "first-divergent-module": "first-divergent-module",
    "divergent-op": "divergent-op",
    "degenerate-partition": "degenerate-partition",
    "halo-incomplete": "halo-incomplete",
    "unrouted-aggregation": "unrouted-aggregation",
    "undeclared-custom-op": "undeclared-custom-op",
    "suspicious-output": "suspicious-output",
    "rank-disagreement": "rank-disagreement",
    "receptive-field": "receptive-field",
    "spec-invalid": "spec-invalid",
    "config-invalid": "config-invalid",
    "model-syntax-error": "model-syntax-error",
}
"""Each code the daemon can publish → its anchor in `docs/diagnostics.md` (and its page's name)."""


def page_path(code: str) -> str:
    """The page of `code`, relative to the extension's root; `KeyError` for a code not in `CODES`."""
    return f"{PAGES_DIR}/{CODES[code]}.md"


def code_description(code: str) -> types.CodeDescription:
    """The link to the shipped page of `code` (`PAGE_SCHEME`); `KeyError` for a code not in `CODES`."""
    return types.CodeDescription(href=f"{PAGE_SCHEME}:/{page_path(code)}")


_GENERATED = (
    "<!-- Generated from docs/diagnostics.md by `python -m distcheck.lsp.diagnostics_codes`; edit that file "
    "and run it again. -->"
)


def pages(docs: str) -> dict[str, str]:
    """The page of each code (by `page_path`) from the text of `docs/diagnostics.md`: the code's own
    section, then what the introduction says of every diagnostic (after its paragraph on the file
    itself). `ValueError` names a code without a section."""
    intro, *parts = re.split(r"(?m)^## ", docs)
    sections = {part.split("\n", 1)[0].strip(): part.split("\n", 1)[1].strip() for part in parts}
    shared = "\n\n".join(intro.strip().split("\n\n")[2:])  # the title and the paragraph on this file dropped
    missing = [code for code in CODES if CODES[code] not in sections]
    if missing:
        raise ValueError(f"docs/diagnostics.md has no section for {', '.join(missing)}: add a '## <code>' section")
    return {
        page_path(code): (
            f"# distcheck: {code}\n\n{sections[CODES[code]]}\n\n"
            f"## Every distcheck diagnostic\n\n{shared}\n\n{_GENERATED}\n"
        )
        for code in CODES
    }


def _write(root: Path) -> None:
    folder = root / PAGES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    wanted = pages((root / "docs" / "diagnostics.md").read_text(encoding="utf-8"))
    for stale in folder.glob("*.md"):
        if f"{PAGES_DIR}/{stale.name}" not in wanted:
            stale.unlink()
    for rel, text in wanted.items():
        (root / rel).write_text(text, encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover - a developer's command
    _write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd())
