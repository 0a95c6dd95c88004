"""The diagnostic codes the daemon publishes and where each is documented, stated once.

Every code has a section of `docs/diagnostics.md` (one heading per code, its anchor the code itself);
`code_description` is the `Diagnostic.codeDescription` that links a diagnostic there, and
`MESSAGE_LIMIT` bounds a diagnostic's one-sentence message (the remedy and the evidence go in its
related information). `tests/server/lsp/test_diagnostics_texts.py` checks every anchor exists.
"""

from __future__ import annotations

from lsprotocol import types

__all__ = ["CODES", "DOCS_URL", "MESSAGE_LIMIT", "code_description"]

DOCS_URL = "https://github.com/distcheck/distcheck/blob/main/docs/diagnostics.md"
"""`docs/diagnostics.md` where the project publishes it (package.json's `repository`)."""

MESSAGE_LIMIT = 120
"""The most characters of a diagnostic's message (what Problems shows on one line)."""

CODES: dict[str, str] = {
    "failing-output": "failing-output",
    "spec-fix": "spec-fix",
    "spec-missing": "spec-missing",
    "undeclared-helper": "undeclared-helper",
    "worker-error": "worker-error",
    "first-divergent-module": "first-divergent-module",
    "degenerate-partition": "degenerate-partition",
    "halo-incomplete": "halo-incomplete",
    "unrouted-aggregation": "unrouted-aggregation",
    "undeclared-custom-op": "undeclared-custom-op",
    "suspicious-output": "suspicious-output",
    "rank-disagreement": "rank-disagreement",
    "receptive-field": "receptive-field",
    "spec-invalid": "spec-invalid",
    "config-invalid": "config-invalid",
}
"""Each code the daemon can publish → its anchor in `docs/diagnostics.md`."""


def code_description(code: str) -> types.CodeDescription:
    """The link to the documentation of `code`; `KeyError` for a code that is not in `CODES`."""
    return types.CodeDescription(href=f"{DOCS_URL}#{CODES[code]}")
