"""Text / AST scans (`locate`), config line numbers (`distcheck.targets`), settings and targets (`config`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distcheck.jobs.pyproject import load_targets
from distcheck.jobs.toml_index import TomlIndex
from distcheck.lsp import locate
from distcheck.lsp.config import (
    convert_options,
    default_spec_path,
    file_target,
    find_workspace_config,
    load_workspace_targets,
    read_disk,
    read_settings,
)
from distcheck.lsp.text import LineIndex, units
from distcheck.option_check import ConfigError

from .harness import EXAMPLES, ROOT

SOURCE = '''"""doc"""
import torch
import pkg.third.nbops
import pkg.third.nbops as nb
from pkg.third import nbops
from pkg.third.nbops import mol_sum as ms, other
from . import helpers
from .third.nbops import mol_sum


@decorator
def model_factory():
    return nb.mol_sum(x) + nbops.mol_sum(y)


async def sample_batch(): pass


LIMIT: int = 3
class Outer:
    class Inner:
        def f(self):
            return ms(z) + pkg.third.nbops.mol_sum(w) + mol_sum(v) + other(u) + helpers.mol_sum(t)
'''


def test_definitions_classes_and_file_targets() -> None:
    factory = locate.definition(SOURCE, "model_factory", "m.py")
    assert factory is not None and (factory.line, factory.start, factory.end) == (12, 4, 17)
    sample = locate.definition(SOURCE, "sample_batch")
    assert sample is not None and (sample.line, sample.start) == (16, 10)
    limit = locate.definition(SOURCE, "LIMIT")
    assert limit is not None and (limit.line, limit.start, limit.end) == (19, 0, 5)
    assert locate.definition(SOURCE, "missing") is None
    assert locate.definition("def broken(:\n", "broken") is None
    inner = locate.class_location(SOURCE, "Outer.Inner")
    assert inner is not None and (inner.line, inner.start, inner.end) == (21, 10, 15)
    assert locate.class_location(SOURCE, "Inner") is None
    found = locate.file_target(SOURCE, "m.py")
    assert found is not None and found[0].line == 12 and found[1].line == 16
    assert locate.file_target("def model_factory(): pass\n") is None


def test_helper_call_sites_through_every_kind_of_import() -> None:
    sites = locate.helper_call_sites(SOURCE, "pkg.third.nbops", "mol_sum", file_module="pkg.model", path="pkg/model.py")
    text = SOURCE.splitlines()
    got = [text[s.line - 1][s.start : s.end] for s in sites]
    assert got == ["nb.mol_sum", "nbops.mol_sum", "ms", "pkg.third.nbops.mol_sum", "mol_sum"]
    # without knowing the file's module the relative import cannot be resolved
    plain = locate.helper_call_sites(SOURCE, "pkg.third.nbops", "mol_sum")
    assert len(plain) == 4
    assert locate.helper_call_sites(SOURCE, "other.module", "mol_sum") == []
    # inside the helper's own module, plain calls count
    own = "def mol_sum(x):\n    return x\n\ndef g():\n    return mol_sum(1)\n"
    (site,) = locate.helper_call_sites(own, "pkg.third.nbops", "mol_sum", file_module="pkg.third.nbops")
    assert site.line == 5
    # a non-ASCII line: columns are code points, not UTF-8 bytes
    wide = "import pkg.third.nbops as nb\ns = 'é✓'; y = nb.mol_sum(x)\n"
    (site,) = locate.helper_call_sites(wide, "pkg.third.nbops", "mol_sum")
    assert wide.splitlines()[1][site.start : site.end] == "nb.mol_sum"


def test_modules_files_and_frames(tmp_path: Path) -> None:
    assert locate.resolve_module("examples.thirdparty.nbops", [str(ROOT)]) == str(EXAMPLES / "thirdparty/nbops.py")
    assert locate.resolve_module("examples.thirdparty", [str(ROOT)]) == str(EXAMPLES / "thirdparty/__init__.py")
    assert locate.resolve_module("examples.nope", [str(ROOT)]) is None
    assert locate.module_name(str(EXAMPLES / "thirdparty/nbops.py"), [str(ROOT)]) == "examples.thirdparty.nbops"
    assert locate.module_name(str(EXAMPLES / "__init__.py"), [str(ROOT)]) == "examples"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("")
    for skipped in (".venv/lib", "node_modules/x", "build", "env_dir"):
        (tmp_path / skipped).mkdir(parents=True)
        (tmp_path / skipped / "b.py").write_text("")
    (tmp_path / "env_dir" / "pyvenv.cfg").write_text("")
    assert [os.path.relpath(p, tmp_path) for p in locate.iter_python_files([str(tmp_path)])] == ["pkg/a.py"]


def test_line_index_utf16() -> None:
    text = "a\U0001f600b\r\nsecond\nthird"
    index = LineIndex(text)
    assert index.position(3) == (0, 4) and index.position(text.index("second")) == (1, 0)
    assert index.offset(0, 3) == 2 and index.offset(1, 2) == text.index("cond")
    assert units("\U0001f600", "utf-8") == 4 and units("\U0001f600", "utf-32") == 1
    assert index.line_text(0) == "a\U0001f600b" and index.line_count == 3


CONFIG = """# comment
[tool.distcheck]
python_path = [
    "..",  # name = "not a key"
]
world_size = 2

[[tool.distcheck.targets]]
name = "a"
factory = "m.py:f"

[[tool.distcheck.targets]]
name = "b"
factory = "m.py:g"
atol = "tight"
"""


def _error(tmp_path: Path, text: str) -> ConfigError:
    path = tmp_path / "pyproject.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_targets(str(path))
    assert err.value.config == str(path)
    return err.value


def test_config_errors_carry_the_offending_line(tmp_path: Path) -> None:
    index = TomlIndex(CONFIG)
    assert index.table("tool.distcheck") == 2 and index.table("tool.distcheck.targets", 1) == 12
    assert index.key("tool.distcheck", 0, "world_size") == 6 and index.key("tool.distcheck.targets", 1, "atol") == 15
    assert ("tool.distcheck", 0, "name") not in index.keys, "keys inside a multi-line array are not keys"
    assert _error(tmp_path, CONFIG).line == 15
    assert _error(tmp_path, CONFIG.replace('atol = "tight"', "timeout = 0.5\nwatch = 3")).line == 16
    assert _error(tmp_path, CONFIG.replace('name = "b"\n', "")).line == 12
    assert _error(tmp_path, CONFIG.replace('name = "b"', 'name = "a"').replace('atol = "tight"', "")).line == 12
    bad_reference = CONFIG.replace('factory = "m.py:g"', 'factory = "not a reference"').replace('atol = "tight"', "")
    assert _error(tmp_path, bad_reference).line == 14
    broken = _error(tmp_path, CONFIG.replace('[[tool.distcheck.targets]]\nname = "b"', "[[tool.distcheck.targets]\n"))
    assert broken.line == 12 and "invalid TOML" in broken.message
    assert _error(tmp_path, "[tool.distcheck]\nworld_sise = 2\n").line == 2
    assert _error(tmp_path, "[tool.distcheck]\nworld_size = 2\n").line == 1  # no target: the table's line
    targets = load_targets(str(EXAMPLES / "pyproject.toml"))
    text = (EXAMPLES / "pyproject.toml").read_text().splitlines()
    assert all(t.line is not None and text[t.line - 1] == "[[tool.distcheck.targets]]" for t in targets)
    assert all(text[t.line] == f'name = "{t.name}"' for t in targets if t.line is not None)


def test_settings_overrides_and_workspace_targets(tmp_path: Path) -> None:
    settings = read_settings(
        {
            "worldSize": 4,
            "atol": 1,
            "watchedHelperPackages": ["a.b"],
            "device": "tpu",
            "bogus": 1,
            "trace": {"server": "verbose"},
            "autoFix": "yes",
        }
    )
    assert settings.options == {"world_size": 4, "atol": 1.0, "watched_helper_packages": ["a.b"]}
    assert settings.trace == "verbose" and len(settings.problems) == 3
    assert any("distcheck.device" in p and "not understood" in p for p in settings.problems)
    options, problems = convert_options({"world_size": 3, "timeout": 5, "maxFixAttempts": -1}, "override ")
    assert options == {"world_size": 3, "timeout_sec": 5.0} and problems == [
        "override maxFixAttempts: max_fix_attempts must be >= 0, got -1; give max_fix_attempts a value that is "
        ">= 0 (e.g. 8)"
    ]

    wt = load_workspace_targets(str(EXAMPLES), read_disk)
    assert wt.problem is None and [t.name for t in wt.targets][:2] == ["pair_potential", "mpnn"]
    helper = next(t for t in wt.targets if t.name == "helper_model")
    assert helper.spec_path == str(EXAMPLES / "helper_model.distspec.json") and not helper.spec_configured
    assert helper.factory_file == str(EXAMPLES / "helper_model.py") and helper.search_dirs == [str(ROOT), str(EXAMPLES)]
    assert helper.options["watched_helper_packages"] == ["examples.thirdparty.nbops"]
    sub = tmp_path / "deep" / "er"
    sub.mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text('[tool.distcheck]\nfactory = "pkg.mod:make"\nworld_size = 0\n')
    assert find_workspace_config(str(sub), read_disk) == str(tmp_path / "pyproject.toml")
    broken = load_workspace_targets(str(sub), read_disk)
    assert (
        broken.problem is not None
        and broken.problem.line == 3
        and "world_size must be at least 1" in (broken.problem.message)
    )
    assert default_spec_path("/w", "my model/v2") == "/w/my_model_v2.distspec.json"
    empty = load_workspace_targets(str(tmp_path / "deep"), lambda p: None)
    toy = file_target(str(tmp_path / "deep" / "toy.py"), "def model_factory(): ...\ndef sample_batch(): ...\n", empty)
    assert toy is not None and toy.name == "toy.py" and toy.line == 1
    assert toy.spec_path == str(tmp_path / "deep" / "toy.distspec.json")
