"""Every code block of README.md, CONTRIBUTING.md and docs/*.md that is a command or a model is checked.

- ```python defining `model_factory`: run as a module (named by its `# name.py` first line), the factory
  called, its spec read and, with a `sample_batch()`, the model run once on it in this process (no ranks:
  a validation of it is the examples' and the CLI's tests' work).
- any other ```python block: compiled, its imports run (a model block's module counts as installed) and
  every `distcheck.a.b` name it uses resolved.
- ```sh / ```bash / ```console (the `$ ` lines): every `distcheck ...` line (also under `python -m` and
  `torchrun ... -m distcheck`) parses with the real argument parser, `make X` names a Makefile target,
  `python -m M` names an importable module, `python FILE` an existing file, `cd DIR` a directory.
- ```json holding a distcheck spec is read by `MLIPSpec.from_dict`; other ```json and ```text blocks are
  illustrative output.

A python fragment that cannot be checked is marked with `<!-- docs-test: skip -->` on the line before
its fence (keep those few). Also: README.md stays a front door (at most 15 KB) and the relative links of
README.md and the topic pages point at files (and headings) that exist. Fast: no process is started."""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import json
import re
import shlex
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from distcheck import cli
from distcheck.spec.model import MLIPSpec

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
TOPIC_PAGES = ["spec", "validating", "safe-code", "real-models", "gpus", "editor", "processes"]
"""The pages README.md's topics moved to (issue 34); README.md links each."""
SKIP = "<!-- docs-test: skip -->"
COMMAND_LANGS = {"sh", "bash", "shell", "console"}
EXEMPT_LANGS = {"", "text", "json", "toml", "jsonc"}
OTHER_COMMANDS = {"pip", "rm", "npm", "pytest", "export"}
"""Commands a block may hold that are not distcheck's own (nothing to check in them)."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    skipped: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```\s*([\w+-]*)(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, info = len(m.group(1)), m.group(2).lower(), m.group(3)
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        assert j < len(lines), f"{path.relative_to(ROOT)}:{i + 1}: code block never closed"
        before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        text = "\n".join(line[indent:] for line in lines[i + 1 : j])
        out.append(Block(path, i + 1, lang, text, before == SKIP or "skip" in info.split()))
        i = j + 1
    return out


ALL = [b for p in DOCS for b in _blocks(p)]


def _ids(blocks: list[Block]) -> list[str]:
    return [b.where for b in blocks]


PYTHON = [b for b in ALL if b.lang in ("python", "py")]
MODELS = [b for b in PYTHON if re.search(r"^def model_factory\(", b.text, re.M) and not b.skipped]
FRAGMENTS = [b for b in PYTHON if b not in MODELS and not b.skipped]
COMMANDS = [b for b in ALL if b.lang in COMMAND_LANGS]


def test_every_block_has_a_known_kind_and_few_are_skipped() -> None:
    unknown = [b.where + f" ({b.lang})" for b in ALL if b.lang not in COMMAND_LANGS | EXEMPT_LANGS | {"python", "py"}]
    assert not unknown, f"a block language this test does not know (add it to the test): {unknown}"
    assert MODELS, "README.md's model block was not found"
    assert len([b for b in PYTHON if b.skipped]) <= 3, "keep skipped python fragments few"


# -- model blocks ------------------------------------------------------------------------------------


def _module_name(block: Block) -> str:
    first = block.text.splitlines()[0].strip()
    m = re.fullmatch(r"#\s*([A-Za-z_]\w*)\.py", first)
    return m.group(1) if m else f"docs_block_{block.line}"


def _load(block: Block) -> types.ModuleType:
    name = _module_name(block)
    module = types.ModuleType(name)
    module.__file__ = f"<{block.where}>"
    exec(compile(block.text, block.where, "exec"), module.__dict__)
    return module


@contextlib.contextmanager
def _model_modules() -> Iterator[None]:
    """The model blocks as importable modules (`from my_model import ...` in a later fragment)."""
    added = {}
    for block in MODELS:
        name = _module_name(block)
        if name not in sys.modules:
            added[name] = _load(block)
    sys.modules.update(added)
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)


@pytest.mark.parametrize("block", MODELS, ids=_ids(MODELS))
def test_model_block_builds_and_runs_in_one_process(block: Block) -> None:
    import torch

    module = _load(block)
    model = module.model_factory()
    assert isinstance(model, torch.nn.Module), block.where
    spec = MLIPSpec.coerce(model.distribution_spec)
    if hasattr(module, "sample_batch"):
        outputs = model(module.sample_batch())
        assert isinstance(outputs, dict) and outputs, block.where
        for name, value in outputs.items():
            assert torch.isfinite(value).all(), f"{block.where}: {name} is not finite"
        assert set(spec.output_kinds) <= set(outputs), block.where


# -- other python blocks -----------------------------------------------------------------------------


def _distcheck_names(tree: ast.AST) -> set[str]:
    """Every `distcheck.a.b...` chain the code reads (the longest at each place)."""
    names: set[str] = set()
    inner: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        parts, value = [], node
        while isinstance(value, ast.Attribute):
            parts.append(value.attr)
            inner.add(id(value.value))
            value = value.value
        if isinstance(value, ast.Name) and value.id == "distcheck":
            names.add(".".join(["distcheck", *reversed(parts)]))
    return names


def _resolves(dotted: str) -> bool:
    import distcheck

    obj: object = distcheck
    for part in dotted.split(".")[1:]:
        if hasattr(obj, part):
            obj = getattr(obj, part)
        elif isinstance(obj, types.ModuleType) and importlib.util.find_spec(f"{obj.__name__}.{part}"):
            obj = importlib.import_module(f"{obj.__name__}.{part}")  # a submodule not imported yet
        else:
            return False
    return True


@pytest.mark.parametrize("block", FRAGMENTS, ids=_ids(FRAGMENTS))
def test_python_fragment_compiles_imports_and_names_real_api(block: Block) -> None:
    tree = ast.parse(block.text, block.where)
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    with _model_modules():
        for node in imports:
            code = ast.Module(body=[node], type_ignores=[])
            exec(compile(code, block.where, "exec"), {})
    missing = sorted(n for n in _distcheck_names(tree) if not _resolves(n))
    assert not missing, f"{block.where}: names distcheck does not have: {missing}"


# -- command blocks ----------------------------------------------------------------------------------


def _command_lines(block: Block) -> list[tuple[int, str]]:
    """(line, command) for each command of the block: `\\` continuations joined, `$ ` lines only in a
    console block."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for k, raw in enumerate(block.text.splitlines(), start=block.line + 1):
        line = raw.rstrip()
        if block.lang == "console" and not pending:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if not pending:
            start = k
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return [(k, c) for k, c in out if c.strip() and not c.lstrip().startswith("#")]


def _simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command (split at `&&`, `||`, `;`, `|`; redirections and leading
    `NAME=value` assignments dropped)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = list(lexer)
    out: list[list[str]] = [[]]
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
        elif word in (";", "&&", "||", "|", "&"):
            out.append([])
        elif word in (">", ">>", "<", "2>", "2>&1"):
            skip_next = True
        else:
            out[-1].append(word)
    for simple in out:
        while simple and re.fullmatch(r"[A-Za-z_]\w*=.*", simple[0]):
            simple.pop(0)
    return [s for s in out if s]


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M))


def _parse_distcheck(args: list[str], where: str) -> None:
    parser = cli.build_parser()
    try:
        parser.parse_args(args)
    except SystemExit as exc:  # --help / --version exit 0; a bad line exits 2
        assert exc.code == 0, f"{where}: `distcheck {' '.join(args)}` does not parse"


def _check_python(words: list[str], where: str, cwd: Path) -> None:
    rest = words[1:]
    if rest[:1] == ["-m"]:
        module, args = rest[1], rest[2:]
        if module == "distcheck":
            _parse_distcheck(args, where)
        else:
            assert importlib.util.find_spec(module) is not None, f"{where}: no module {module}"
    elif rest:
        assert (cwd / rest[0]).is_file(), f"{where}: no file {rest[0]}"


def _check(words: list[str], where: str, cwd: Path) -> Path:
    """Check one simple command; returns the directory the next one runs in."""
    head = Path(words[0]).name
    if head == "distcheck":
        _parse_distcheck(words[1:], where)
    elif re.fullmatch(r"python[\d.]*", head):
        _check_python(words, where, cwd)
    elif head == "torchrun":
        assert "-m" in words and words[words.index("-m") + 1] == "distcheck", f"{where}: torchrun runs distcheck"
        _parse_distcheck(words[words.index("-m") + 2 :], where)
    elif head == "make":
        targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        unknown = [t for t in targets if t not in _make_targets()]
        assert not unknown, f"{where}: not Makefile targets: {unknown}"
    elif head == "cd":
        cwd = cwd / words[1]
        assert cwd.is_dir(), f"{where}: no directory {words[1]}"
    else:
        assert head in OTHER_COMMANDS, f"{where}: a command this test cannot check: {words[0]}"
    return cwd


@pytest.mark.parametrize("block", COMMANDS, ids=_ids(COMMANDS))
def test_command_block_lines_parse(block: Block) -> None:
    lines = _command_lines(block)
    assert lines, f"{block.where}: a command block without a command"
    for line, command in lines:
        cwd = ROOT
        for words in _simple_commands(command):
            cwd = _check(words, f"{block.path.relative_to(ROOT)}:{line}", cwd)


def test_the_command_checks_catch_a_wrong_line() -> None:
    block = Block(ROOT / "README.md", 1, "sh", "distcheck validate m.py:f --world-sise 2", False)
    with pytest.raises(AssertionError, match="does not parse"):
        test_command_block_lines_parse(block)
    with pytest.raises(AssertionError, match="not Makefile targets"):
        _check(["make", "no-such-target"], "x", ROOT)
    assert _simple_commands("cd server && A=1 python -m distcheck.environment > ../docs/environment.md") == [
        ["cd", "server"],
        ["python", "-m", "distcheck.environment"],
    ]


# -- spec blocks -------------------------------------------------------------------------------------

SPECS = [b for b in ALL if b.lang == "json" and '"distcheck-spec"' in b.text]


@pytest.mark.parametrize("block", SPECS, ids=_ids(SPECS))
def test_spec_block_is_a_valid_spec(block: Block) -> None:
    MLIPSpec.from_dict(json.loads(block.text))


# -- the front door and its links --------------------------------------------------------------------


def test_readme_is_a_front_door_linking_every_topic_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 15 * 1024, "README.md is the front door: move topics to docs/"
    for page in TOPIC_PAGES:
        assert f"(docs/{page}.md)" in readme, f"README.md links docs/{page}.md"
    assert "make demo" in readme and "make test" in readme


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    heads = re.findall(r"^#+\s+(.*)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("page", ["README.md", *(f"docs/{p}.md" for p in TOPIC_PAGES)])
def test_relative_links_point_at_files_and_headings(page: str) -> None:
    path = ROOT / page
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, f"{page}: broken links {broken}"


def test_argparse_is_what_the_cli_runs() -> None:
    assert isinstance(cli.build_parser(), argparse.ArgumentParser)


def test_the_fragment_check_catches_a_wrong_name() -> None:
    block = Block(ROOT / "README.md", 1, "python", "import distcheck\ndistcheck.no_such_api(1)\n", False)
    with pytest.raises(AssertionError, match="no_such_api"):
        test_python_fragment_compiles_imports_and_names_real_api(block)
