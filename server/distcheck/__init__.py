"""distcheck: does a machine-learning interatomic potential give the same answers domain-decomposed
over ranks as in one process — and if not, why, and what to change?

Names are loaded on first use, so `import distcheck.spec` (the editor daemon) never imports torch.
The layers and the contracts between them: `docs/architecture.md`.

Modules
=======

Subpackages, top layer first (each one's docstring maps its own modules):

- `lsp`: the editor's language server (pygls daemon; no torch, no user code);
- `jobs`: one validation of one target, shared by the CLI and the editor's runner;
- `validate`: the validation engine (reference, inference, attempts, auto-fix, report);
- `processes`: every process distcheck starts, who ends it, and `run_distributed`;
- `runtime`: what runs inside one rank (partition, handlers, exchange, consolidation);
- `spec`: the distribution spec, versioned JSON (no torch);
- `report`: the validation report, JSON that round-trips (no torch).

Top-level modules:

- `__main__`: `python -m distcheck`, the same command line as the `distcheck` script;
- `cli`: `distcheck validate TARGET` from the terminal or CI;
- `cli_args`: the command line's parser and flags, derived from the options record;
- `cli_exit`: the exit codes, stated once (`EXIT_CODES`);
- `cli_output`: progress and notice lines on stderr while it runs;
- `cli_report`: what a run leaves behind (report, `--json`, `--junit`, `--save-spec`);
- `cli_target`: the target and prior spec a command line names;
- `batch`: `Batch` and `NeighborList`, the atoms a wrapper sees (torch);
- `neighbors`: full neighbour lists of a `Batch`, system by system, via vesin;
- `options`: the validator options, declared once (`OPTIONS`);
- `option_check`: the one type and bound check of an option (`check_option`);
- `options_schema`: the editor settings' JSON Schema, derived from `OPTIONS`;
- `rank_limits`: how many ranks a sample and a machine allow (`check_world_size`);
- `safe_text`: the one rule for user-derived text on every surface (terminal, JUnit XML, JSON);
- `sample_options`: how a structure-file sample is read (`frames`, `dtype`);
- `environment`: every `DISTCHECK_*` variable, declared once (`SWITCHES`);
- `cache_home`: where distcheck keeps what it remembers, and who may write there;
- `memory`: what distcheck remembers between processes, and how to clear it;
- `importguard`: imports that workspace files can never shadow;
- `lazy`: a package's public names loaded on first use (`lazy_attribute`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .lazy import lazy_attribute

__version__ = "0.1.0"

_EXPORTS = {
    "Batch": "batch",
    "NeighborList": "batch",
    "MLIPSpec": "spec",
    "SpecError": "spec",
    "DistributedError": "runtime",
    "DistributedRun": "runtime",
    "RankTimeout": "runtime",
    "SetupError": "runtime",
    "run_distributed": "processes.launch",
    "TraceReport": "report",
    "trace_and_validate": "validate",
    "validate_on_cpu": "validate",
    "validate_launched": "validate",
}

__all__ = [
    "Batch",
    "DistributedError",
    "DistributedRun",
    "MLIPSpec",
    "NeighborList",
    "RankTimeout",
    "SetupError",
    "SpecError",
    "TraceReport",
    "__version__",
    "run_distributed",
    "trace_and_validate",
    "validate_launched",
    "validate_on_cpu",
]

if TYPE_CHECKING:
    from .batch import Batch, NeighborList
    from .processes.launch import run_distributed
    from .report import TraceReport
    from .runtime import DistributedError, DistributedRun, RankTimeout, SetupError
    from .spec import MLIPSpec, SpecError
    from .validate import trace_and_validate, validate_launched, validate_on_cpu


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _EXPORTS, globals(), name)
