"""The names older code and library users import from `distcheck.targets`, now each in the module of its job.

- the options record: `distcheck.options` (`OPTIONS`, `OPTION_TYPES`, `OPTION_ALIASES`, `Vocabulary`);
- its one check: `distcheck.option_check` (`check_option`, `check_options`, `OptionError`, `ConfigError`);
- rank counts: `distcheck.rank_limits` (`check_rank_count`, `check_world_size`, `RANKS_PER_CORE`);
- the target type and its references: `distcheck.jobs.target`;
- `[tool.distcheck]`: `distcheck.jobs.pyproject` (format in its docstring) and `distcheck.jobs.toml_index`.

No torch here.
"""

from __future__ import annotations

from .jobs.pyproject import Table, find_config, load_targets, read_table, select_target
from .jobs.target import (
    Target,
    absolute_reference,
    is_path_reference,
    sample_reference,
    split_reference,
    target_from_reference,
)
from .jobs.toml_index import TomlIndex
from .option_check import KIND_WORDS, ConfigError, OptionError, check_option, check_options, check_type, normalize
from .options import OPTION_ALIASES, OPTION_TYPES
from .rank_limits import (
    MIN_WORLD_SIZE,
    RANKS_PER_CORE,
    check_rank_count,
    check_world_size,
    cpu_rank_limit,
    usable_cores,
)

__all__ = [
    "KIND_WORDS",
    "MIN_WORLD_SIZE",
    "OPTION_ALIASES",
    "OPTION_TYPES",
    "RANKS_PER_CORE",
    "ConfigError",
    "OptionError",
    "Table",
    "Target",
    "TomlIndex",
    "absolute_reference",
    "check_option",
    "check_options",
    "check_rank_count",
    "check_type",
    "check_world_size",
    "cpu_rank_limit",
    "find_config",
    "is_path_reference",
    "load_targets",
    "normalize",
    "read_table",
    "sample_reference",
    "select_target",
    "split_reference",
    "target_from_reference",
    "usable_cores",
]
