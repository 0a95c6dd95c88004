"""The diagnostics store: every published diagnostic, by document and by owner.

An owner is whoever computed a set of diagnostics — a target's last run (`target:<name>`), one spec
document (`spec-invalid:<path>`), the configs (`config-invalid`) — and replacing an owner's set
republishes exactly the documents it touched, before and after, so a fixed problem disappears and
no owner wipes another's diagnostics from a shared document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from lsprotocol import types

from .uris import uri_of

__all__ = ["DiagnosticsStore"]

_SCANNED = "model-syntax-error"


class DiagnosticsStore:
    """Diagnostics by document URI and owner; `send` publishes one document's merged list."""

    def __init__(self, send: Callable[[types.PublishDiagnosticsParams], None]) -> None:
        self._send = send
        self._diags: dict[str, dict[str, list[types.Diagnostic]]] = {}
        self._owned: dict[str, set[str]] = {}

    def replace(self, owner: str, by_path: Mapping[str, Sequence[types.Diagnostic]]) -> None:
        """Replace every diagnostic of `owner` with `by_path` (paths → diagnostics) and republish
        each document whose diagnostics changed."""
        new = {uri_of(path): list(diags) for path, diags in by_path.items() if diags}
        old = self._owned.get(owner, set())
        for uri in old - set(new):
            self._diags.get(uri, {}).pop(owner, None)
        for uri, diags in new.items():
            self._diags.setdefault(uri, {})[owner] = diags
        self._owned[owner] = set(new)
        for uri in old | set(new):
            self.publish(uri)

    def publish(self, uri: str) -> None:
        """Send every stored diagnostic of `uri` (an empty list clears the document)."""
        self._send(types.PublishDiagnosticsParams(uri=uri, diagnostics=self.stored(uri)))

    def stored(self, uri: str) -> list[types.Diagnostic]:
        """The diagnostics currently published for `uri`, every owner's; a `model-syntax-error` (the
        workspace scan's) gives way to a validation's diagnostic of the same SyntaxError on its line."""
        found = [d for diags in self._diags.get(uri, {}).values() for d in diags]
        reported = {d.range.start.line for d in found if d.code != _SCANNED and "SyntaxError" in d.message}
        return [d for d in found if d.code != _SCANNED or d.range.start.line not in reported]
