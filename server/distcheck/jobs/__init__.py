"""The job layer shared by the CLI (`distcheck.cli`) and the editor's runner (`distcheck.jobs.runner`).

A job is one validation of one `Target`: where the target comes from (`target`: references and the one
target type, also what crosses the daemon → runner pipe; `pyproject` and `toml_index`: `[tool.distcheck]`;
`spec_source`: the one rule of which spec file a job starts from and where its fixes are saved),
the directories its code is imported from (`paths`), its sample (`sample`, `dtype_hint`), its devices
(`devices`) and the run itself (`run`, `setup_errors`). Hints produced here are phrased in the caller's
words (a `distcheck.options.Vocabulary`).

`target`, `toml_index`, `pyproject`, `spec_source` and `paths` import no torch (the editor daemon uses them), nor do
`early_start` and `devices.named_devices` (the CLI starts its processes before it imports torch); the
other modules import it when called.
"""
