"""The job layer shared by the CLI (`distcheck.cli`) and the editor's runner (`distcheck.jobs.runner`).

A job is one validation of one `Target`: where the target comes from (`target`: references and the one
target type, also what crosses the daemon → runner pipe; `pyproject` and `toml_index`: `[tool.distcheck]`;
`spec_source`: the one rule of which spec file a job starts from and where its fixes are saved),
the directories its code is imported from (`paths`), its sample (`sample`, `dtype_hint`), its devices
(`devices`) and the run itself (`run`, `setup_errors`). Hints produced here are phrased in the caller's
words (a `distcheck.options.Vocabulary`).

`target`, `toml_index`, `pyproject`, `spec_source`, `serving` and `paths` import no torch (the editor daemon
uses them), nor do `early_start` and `devices.named_devices` (the CLI starts its processes before it imports
torch); the other modules import it when called.

Modules
=======

- `target`: the one target type (`Target`) and its references; what crosses the daemon → runner pipe;
- `pyproject`: validation targets from `[tool.distcheck]` in a `pyproject.toml`;
- `toml_index`: where tables and keys are in TOML text, so every config error names its line;
- `spec_source`: which spec file a job starts from and where its fixes are saved;
- `paths`: the directories a job's code is imported from, put first and restored afterwards;
- `sample`: the factory and the sample of a job, imported in this process (ASE for structure files);
- `devices`: the `device` and `backend` options → what the library entry point takes;
- `run`: one job, start to end (`run_job`): factory, sample, devices, rank count, the entry point;
- `setup_errors`: the exceptions that mean "cannot validate as asked", as message and hint;
- `early_start`: the validation's processes started before the target and sample load;
- `bytecode`: torch imported with its bytecode kept, and the notice where it cannot be;
- `serving`: which target a runner process may serve (`serving_key`);
- `runner`: `python -m distcheck.jobs.runner`, the editor daemon's child that runs validations.
"""
