"""The distcheck language server: an LSP daemon (pygls) that validates models in a child runner.

`python -m distcheck.lsp` (or the `distcheck-lsp` script) speaks LSP over stdio; docs/protocol.md is
the contract with the VS Code extension. The daemon process never imports torch or the user's code:
`server.py` (features), `config.py` (targets and settings), `runner.py` (the child process that
validates) and `runner_client.py` (its pipe), `diagnostics.py` (report → diagnostics), `actions.py`
(quick fixes → edits, made with `distcheck.spec.edit`), `locate.py` (source
locations by text / AST scans) and `text.py` (positions).
"""
