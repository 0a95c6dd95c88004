"""The distcheck language server: an LSP daemon (pygls) that validates models in a child runner.

`python -m distcheck.lsp` (or the `distcheck-lsp` script) speaks LSP over stdio; docs/protocol.md is
the contract with the VS Code extension and with the runner. The daemon process never imports torch
or the user's code: everything it places comes from the report (file + line) or from text and AST
scans (`locate`), and every validation runs in the runner child (`distcheck.jobs.runner`).

Modules
=======

- `__main__`: `python -m distcheck.lsp`, the server on stdio;
- `server`: wiring: the pygls server, its features and commands;
- `transport`: stdio behind distcheck's own framer, and the daemon's wind-down;
- `framing`: LSP base-protocol framing that survives a badly framed message (`FrameParser`);
- `errors`: the daemon's own JSON-RPC errors;
- `commands`: typed arguments of the `workspace/executeCommand` commands;
- `workspace`: folders, open buffers, configs, spec documents and targets;
- `discovery`: the workspace scan for file targets, and `model-syntax-error` for one that does not parse;
- `config`: targets (`[tool.distcheck]`) and the client's `distcheck.*` settings;
- `trust`: what a validation may run: workspace trust, code outside the workspace;
- `runs`: validations (`distcheck.validate` / `distcheck.cancel`), their progress and reports;
- `runner_slot`: the runner child: started lazily, replaced, restarted; its standby;
- `runner_client`: the daemon's side of the runner pipe (JSON lines), without blocking the loop;
- `runner_tree`: the processes under the runner, tracked and killed by the daemon;
- `store`: every published diagnostic, by document and by owner;
- `diagnostics`: a `TraceReport` (and spec / config problems) → LSP diagnostics;
- `diagnostics_codes`: the diagnostic codes and where each is documented, stated once;
- `diagnostics_documents`: `spec-invalid` and `config-invalid`, diagnostics of documents;
- `diagnostics_evidence`: a report's trust evidence as diagnostics;
- `diagnostics_ops`: ranks that disagree and the first op that departs, as diagnostics;
- `diagnostics_place`: placing diagnostics without importing user code (`PlaceContext`, `Placer`);
- `code_actions`: quick fixes, `Save validated spec`, `source.fixAll`;
- `actions`: quick fixes → `WorkspaceEdit`s on the spec JSON that keep its formatting;
- `locate`: where things are in the user's source, by text and AST scans;
- `text`: code-point offsets ⇄ LSP positions;
- `uris`: file URIs ⇄ normalised absolute paths.
"""
