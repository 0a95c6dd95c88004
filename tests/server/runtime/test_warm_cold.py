"""Warm equals cold, as a property: a corpus of models validated one after another in one long-lived
process with every warm path on (spares, resident ranks, the first attempt run ahead forced on, the
stores), and over the editor's daemon, gives, model by model, the verdict, status, spec, rules and max
diffs of a fresh process per model with every switch off.

The corpus mixes the examples (a pass at attempt 1, passes after a fix on resident ranks, an adapter
fix), models that patch torch when imported (a wrapped `Tensor.index_add_`, a global forward hook), a
model that reads an environment variable the caller changes between two of its validations, and three
models whose setting changes on disk between validations, each in another kind of file: a config file
the factory opens, a helper module of the user's own, and a submodule of a package installed under a
`site-packages` directory (the setting is a far hop's weight, 0: as declared; 1e-7: one layer deeper,
under-declared, a wider halo, which no rounding of the outputs shows), and a slice of the accuracy
scoreboard (routed and buggy twins, a TorchScript fix, an unroutable op, ranks that disagree, a
model whose layers run under torch.utils.checkpoint). Each
model runs twice in the warm process (the second time with what the first left: spares, learned
packages, the remembered first spec and receptive field), and the torch-patching ones run before the
correct ones so that anything they left behind would show.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import distcheck
from distcheck.spec import MLIPSpec

pytestmark = pytest.mark.procs

ROOT = Path(__file__).resolve().parents[3]
SERVER = Path(distcheck.__file__).resolve().parents[1]
PATCHES = ROOT / "tests/server/validate/torch_patch_models"
FAR_HOP = ROOT / "tests/server/validate/far_hop_models.py"
CONTEXT = ROOT / "tests/server/runtime/caller_context_models.py"
MODE = "DISTCHECK_TEST_MODEL_MODE"  # caller_context_models.MODE_VARIABLE
WEAK = "1e-7"  # far_hop_models.WEAK: one layer deeper than declared

Entry = tuple[str, str, str, dict[str, str], dict[str, str]]
"""(name, factory, sample, environment of this validation, files written before it: path → text), the
factory and sample relative to the corpus directory where they name a file."""

PLAIN: list[Entry] = [
    ("index_add_wrapped", "double_index_add.py:model_factory", "pair.py:sample_batch", {}, {}),
    ("forward_hook", "scaling_hook.py:model_factory", "pair.py:sample_batch", {}, {}),
    ("mpnn", "examples.mpnn:model_factory", "examples.mpnn:sample_batch", {}, {}),
    ("unaware", "examples.unaware_model:model_factory", "examples.unaware_model:sample_batch", {}, {}),
    ("helper", "examples.helper_model:model_factory", "examples.helper_model:sample_batch", {}, {}),
]
ENVIRONMENT: list[Entry] = [
    ("env_clean", "caller_context_models.py:model_factory", "caller_context_models.py:sample_batch", {MODE: ""}, {}),
    (
        "env_buggy",
        "caller_context_models.py:model_factory",
        "caller_context_models.py:sample_batch",
        {MODE: "buggy"},
        {},
    ),
]
_SAMPLE = "far_hop_base.py:sample_batch"
EDITED: list[Entry] = [
    ("config_0", "config_model.py:model_factory", _SAMPLE, {}, {"far_hop.json": '{"w": 0.0}'}),
    ("config_weak", "config_model.py:model_factory", _SAMPLE, {}, {"far_hop.json": f'{{"w": {WEAK}}}'}),
    ("module_0", "module_model.py:model_factory", _SAMPLE, {}, {"hop_weight.py": "WEIGHT = 0.0\n"}),
    ("module_weak", "module_model.py:model_factory", _SAMPLE, {}, {"hop_weight.py": f"WEIGHT = {WEAK}\n"}),
    (
        "package_0",
        "package_model.py:model_factory",
        _SAMPLE,
        {},
        {"site-packages/hop_pkg/weights.py": "WEIGHT = 0.0\n"},
    ),
    (
        "package_weak",
        "package_model.py:model_factory",
        _SAMPLE,
        {},
        {"site-packages/hop_pkg/weights.py": f"WEIGHT = {WEAK}\n"},
    ),
]
ACCURACY: list[Entry] = [  # from the accuracy scoreboard (bench/accuracy.py): its spec is the module's SPEC
    ("acc_mask_loop", "examples.accuracy.mask_loop:model_factory", "examples.accuracy.mask_loop:sample_batch", {}, {}),
    (
        "acc_mask_loop_buggy",
        "examples.accuracy.mask_loop:buggy_model_factory",
        "examples.accuracy.mask_loop:sample_batch",
        {},
        {},
    ),
    (
        "acc_scripted_local",
        "examples.accuracy.scripted_local:model_factory",
        "examples.accuracy.scripted_local:sample_batch",
        {},
        {},
    ),
    (
        "acc_named_only",
        "examples.accuracy.named_only:model_factory",
        "examples.accuracy.named_only:sample_batch",
        {},
        {},
    ),
    ("acc_rank_constant", "rank_split.py:factory_rank_constant", "rank_split.py:sample_batch", {}, {}),
    (  # the handler mode swaps torch's checkpoint recomputation in and out per forward
        "acc_checkpointed",
        "examples.accuracy.checkpointed:model_factory",
        "examples.accuracy.checkpointed:sample_batch",
        {},
        {},
    ),
]
SPECS = {name: factory.partition(":")[0] + ":SPEC" for name, factory, *_ in ACCURACY if factory.startswith("examples.")}
"""The spec each accuracy entry is validated under (as the scoreboard does); the others: their wrapper's."""
CORPUS = PLAIN + ENVIRONMENT + EDITED + ACCURACY

MODELS = {
    "config_model.py": """
        import json, os
        from far_hop_base import _model

        def model_factory():
            with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "far_hop.json")) as fh:
                return _model(float(json.load(fh)["w"]))
    """,
    "module_model.py": """
        from far_hop_base import _model

        def model_factory():
            from hop_weight import WEIGHT
            return _model(WEIGHT)
    """,
    "package_model.py": """
        import os, sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
        from far_hop_base import _model
        import hop_pkg

        def model_factory():
            return _model(hop_pkg.WEIGHT)
    """,
    "site-packages/hop_pkg/__init__.py": "from .weights import WEIGHT\n",
}

WARM = {"DISTCHECK_ATTEMPT_AHEAD": "1"}
COLD = {
    "DISTCHECK_SPARES": "0",
    "DISTCHECK_RESIDENT_RANKS": "0",
    "DISTCHECK_ATTEMPT_AHEAD": "0",
    "DISTCHECK_FIELD_CACHE": "0",
    "DISTCHECK_BYTECODE_CACHE": "0",
}

SCRIPT = """
import json, os, sys
corpus = {corpus!r}
sys.path[:0] = [corpus, {root!r}]
from distcheck import validate_on_cpu
from distcheck.runtime import load_object

for name, factory, sample, env, files, spec, repeats in json.loads(sys.argv[1]):
    for path, text in files.items():
        with open(os.path.join(corpus, path), "w") as fh:
            fh.write(text)
    for _ in range(repeats):
        saved = {{k: os.environ.get(k) for k in env}}
        os.environ.update(env)
        try:
            given = load_object(spec) if spec else None
            report = validate_on_cpu(factory, load_object(sample)(), spec=given, max_fix_attempts=4)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        print("REPORT " + json.dumps([name, report.to_dict()]), flush=True)
"""


def make_corpus(where: Path) -> Path:
    """The corpus's files in `where` (the examples' modules come from the repository root)."""
    for name in ("pair.py", "double_index_add.py", "scaling_hook.py"):
        shutil.copy(PATCHES / name, where / name)
    shutil.copy(CONTEXT, where / CONTEXT.name)
    shutil.copy(ROOT / "tests/server/validate/accuracy_models/rank_split.py", where / "rank_split.py")
    shutil.copy(FAR_HOP, where / "far_hop_base.py")
    for path, text in MODELS.items():
        (where / path).parent.mkdir(parents=True, exist_ok=True)
        (where / path).write_text(textwrap.dedent(text).lstrip())
    for *_, files in EDITED[:1] + EDITED[2:3] + EDITED[4:5]:  # each setting's first value
        for path, text in files.items():
            (where / path).write_text(text)
    return where


def _absolute(corpus: Path, reference: str) -> str:
    module, _, attr = reference.partition(":")
    return f"{corpus / module}:{attr}" if module.endswith(".py") else reference


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """What must be the same warm and cold: verdict, state, spec, fix, and per attempt its result, rule,
    spec and max diffs (from the report's JSON, as the library, the CLI and the daemon all give it)."""
    return {
        "ok": report["ok"],
        "verdict": report["verdict"],
        "state": report["state"],
        "spec": MLIPSpec.coerce(report["spec"]).signature(),
        "fix_applied": report["fix_applied"],
        "attempts": [
            [a["passed"], a["rule"], MLIPSpec.coerce(a["spec"]).signature(), dict(a["max_abs_diff"] or {})]
            for a in report["attempts"]
        ],
    }


def _run(corpus: Path, entries: list[tuple[Any, ...]], switches: dict[str, str], cache: Path) -> list[Any]:
    """The summaries of validating `entries` (`Entry` and a repeat count) in order, in one fresh
    interpreter under `switches`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTCHECK_")}
    env.update(switches, XDG_CACHE_HOME=str(cache), PYTHONPATH=os.pathsep.join([str(SERVER), str(ROOT)]))
    wire = [
        [name, _absolute(corpus, f), _absolute(corpus, smp), env_, files, SPECS.get(name), n]
        for name, f, smp, env_, files, n in entries
    ]
    code = textwrap.dedent(SCRIPT.format(corpus=str(corpus), root=str(ROOT)))
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(wire)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=str(ROOT),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [json.loads(line[len("REPORT ") :]) for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    return [(name, summary(report)) for name, report in lines]


def _same(warm: dict[str, Any], cold: dict[str, Any], where: str) -> None:
    keys = ("ok", "verdict", "state", "spec", "fix_applied")
    assert {k: warm[k] for k in keys} == {k: cold[k] for k in keys}, where
    assert [a[:3] for a in warm["attempts"]] == [a[:3] for a in cold["attempts"]], where
    for (*_, got), (*_, want) in zip(warm["attempts"], cold["attempts"]):
        assert got.keys() == want.keys(), where
        for output, value in got.items():  # round-off: the same ranks' sums in another order
            assert value == pytest.approx(want[output], rel=1e-6, abs=1e-12), (where, output, got, want)


def cold_summaries(corpus: Path, entries: list[Entry], cache: Path) -> dict[str, dict[str, Any]]:
    """Each entry's summary from a fresh process of its own with every switch off."""
    found = {}
    for entry in entries:
        ((name, cold),) = _run(corpus, [(*entry, 1)], COLD, cache / f"cold-{entry[0]}")
        found[name] = cold
    return found


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def cold(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    found = cold_summaries(corpus, CORPUS, tmp_path_factory.mktemp("cold-caches"))
    for setting in ("config", "module", "package"):  # the corpus tells the settings apart, as a fresh process does
        assert found[f"{setting}_0"]["spec"] != found[f"{setting}_weak"]["spec"], setting
    return found


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_long_lived_process_gives_every_model_the_verdict_of_a_fresh_one(
    corpus: Path, cold: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    warm = _run(corpus, [(*entry, 2) for entry in CORPUS], WARM, tmp_path / "warm-cache")
    assert [name for name, _ in warm] == [entry[0] for entry in CORPUS for _ in range(2)]
    for k, (name, got) in enumerate(warm):
        _same(got, cold[name], f"{name}, warm run {k % 2 + 1}")


def _harness() -> Any:
    """tests/server/lsp/harness.py (its package is not importable from here by name)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("warm_cold_lsp_harness", ROOT / "tests/server/lsp/harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _daemon_workspace(where: Path, entries: list[Entry]) -> Path:
    """The corpus as an editor's workspace: one `[tool.distcheck]` target per entry."""
    ws = make_corpus(where)
    # the examples inside the workspace: the daemon runs no code from outside it unless told to trust it
    shutil.copytree(ROOT / "examples", ws / "examples", ignore=shutil.ignore_patterns("__pycache__", "*.distspec.json"))
    lines = ["[tool.distcheck]", 'python_path = ["."]', "max_fix_attempts = 4", ""]
    for name, factory, sample, _env, _files in entries:
        lines += [
            "[[tool.distcheck.targets]]",
            f'name = "{name}"',
            f'factory = "{factory}"',
            f'sample = "{sample}"',
            "",
        ]
    (ws / "pyproject.toml").write_text("\n".join(lines))
    return ws


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.timeout(1500)
async def test_the_daemon_gives_every_model_the_verdict_of_a_fresh_one(
    cold: dict[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same corpus through the editor's daemon (its runner and standby, spares, resident ranks, the
        first attempt run ahead), each target twice, files edited on disk between targets as a user saves
        them. The environment entries are left out (a daemon's environment is the one it started with), and so
    are the accuracy entries (their spec is a module's attribute, which a pyproject target cannot name)."""
    lsp_session = _harness().lsp_session

    entries = PLAIN + EDITED
    (tmp_path / "ws").mkdir()
    ws = _daemon_workspace(tmp_path / "ws", entries)
    monkeypatch.setenv("DISTCHECK_ATTEMPT_AHEAD", "1")
    async with lsp_session(ws) as s:
        for name, _factory, _sample, _env, files in entries:
            for path, text in files.items():
                (ws / path).write_text(text)
            for k in range(2):
                mark = s.rec.mark()
                await s.command("distcheck.validate", name)
                payload = await s.wait_report(name, mark, timeout=300)
                _same(summary(payload["report"]), cold[name], f"daemon: {name}, run {k + 1}")
