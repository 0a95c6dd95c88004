"""The distcheck language server: an LSP daemon (pygls) that validates models in a child runner.

`python -m distcheck.lsp` (or the `distcheck-lsp` script) speaks LSP over stdio; docs/protocol.md is
the contract with the VS Code extension. The daemon process never imports torch or the user's code:
`server.py` (wiring: the pygls server, features, commands), `commands.py` (typed command arguments),
`workspace.py` (buffers, configs, targets), `runs.py` and `runner_slot.py` (validations, the runner),
`runner_client.py` (the pipe to `distcheck.jobs.runner`, the child that validates), `store.py`
(published diagnostics), `code_actions.py` (quick fixes, saving the spec), `config.py` (targets and
settings), `diagnostics.py` (report → diagnostics), `actions.py` (quick fixes → edits, made with
`distcheck.spec.edit`), `locate.py` (source locations by text / AST scans) and `text.py` (positions).
"""
