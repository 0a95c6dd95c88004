"""The command line as a new user meets it (issue 16, item 9): mistyped options get a did-you-mean,
`--dtype` for structure-file samples (and a hint naming it on a float32/float64 mismatch),
`--world-size 1` refused with one message (library too), module-level lambda factories refused,
and `--frames` (or `frames =` in a pyproject target) validating several frames of a trajectory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import ase
import ase.io
import pytest
import torch
from ase.build import bulk

import distcheck
from distcheck import cli
from distcheck.cli_args import suggest_option
from distcheck.jobs.pyproject import load_targets
from distcheck.jobs.sample import is_dtype_mismatch, read_structure
from distcheck.option_check import ConfigError, OptionError
from distcheck.rank_limits import check_rank_count
from distcheck.report import TraceReport
from distcheck.runtime.factory import FactoryError, FactoryRef, load_object, resolve_factory
from distcheck.sample_options import parse_frames
from examples import pair_potential

ROOT = Path(__file__).resolve().parents[2]
QUICK = ("--no-auto-fix", "--no-layer-diagnostic")
PAIR = "examples.pair_potential:model_factory"

# A pair model that computes in the dtype of its one parameter and does not cast the sample's positions:
# a float32 model meets a float64 sample in `index_add` (torch refuses to mix them there).
STRICT_MODEL = """
import torch
from torch import nn


class StrictPair(nn.Module):
    cutoff = 4.0
    num_interactions = 1

    def __init__(self, dtype):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([0.3], dtype=dtype))
        self.distribution_spec = {"format": "distcheck-spec", "version": 1,
                                  "output_kinds": {"energy": "per_graph", "forces": "per_node"}}

    def forward(self, batch):
        pos = batch.positions.detach().requires_grad_(True)
        nl = batch.neighbor_list(self.cutoff)
        r = nl.vectors(pos, batch.cell, batch.batch).norm(dim=-1)
        e_pair = torch.exp(-r * self.scale) * (torch.cos(torch.pi * r / self.cutoff) + 1)
        e_atom = torch.zeros(len(pos), dtype=self.scale.dtype).index_add(0, nl.edge_index[0], e_pair)
        energy = torch.zeros(batch.num_systems, dtype=self.scale.dtype).index_add(0, batch.batch, e_atom)
        return {"energy": energy, "forces": -torch.autograd.grad(energy.sum(), pos)[0]}


def model_factory32():
    return StrictPair(torch.float32)


def model_factory64():
    return StrictPair(torch.float64)


def sample_batch():
    from ase.build import bulk

    from distcheck import Batch

    atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 2, 8))
    atoms.rattle(0.08, seed=3)
    return Batch.from_ase(atoms)  # float64
"""

LAMBDA_MODEL = """
from examples.pair_potential import model_factory as _make, sample_batch

model_factory = lambda: _make()
"""


def _crystal(repeat_z: int, seed: int) -> ase.Atoms:
    """A rattled Cu box elongated along z (3.6 Å × repeat_z): at world size 2 with a 5 Å cutoff each rank
    owns, halos and misses atoms of it once repeat_z ≥ 8 (6 is too short: one rank holds it whole)."""
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 2, repeat_z))
    atoms.rattle(0.08, seed=seed)
    return atoms


@pytest.fixture(scope="module")
def trajectory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four frames of different sizes (128, 144, 160, 176 atoms), so a selection is visible in the counts."""
    path = tmp_path_factory.mktemp("traj") / "traj.extxyz"
    ase.io.write(path, [_crystal(8 + i, seed=i) for i in range(4)])
    return path


@pytest.fixture(scope="module")
def single_frame(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("one") / "one.xyz"
    ase.io.write(path, _crystal(8, seed=7))
    return path


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["validate", *args])
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------------------------------
# did-you-mean


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        (["--world_size", "2"], "--world-size"),
        (["--world_size=2"], "--world-size"),
        (["--WORLD-SIZE", "2"], "--world-size"),
        (["--atoll", "1e-3"], "--atol"),
        (["--sampel", "x.xyz"], "--sample"),
        (["--no-autofix"], "--no-auto-fix"),
        (["--jsn", "report.json"], "--json"),
        (["--frmaes", "0:3"], "--frames"),
    ],
)
def test_mistyped_option_suggests_the_real_one_and_exits_2(
    typed: list[str], meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _main(capsys, PAIR, *typed)
    assert code == cli.EXIT_ERROR == 2
    assert f"did you mean {meant}?" in err, err
    assert "unrecognized arguments" in err and "Traceback" not in err
    assert "reference run" not in err, "nothing may start after a usage error"


def test_several_mistyped_options_each_get_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, "--world_size", "2", PAIR, "--atoll", "1", "--sampel", "y.xyz")
    assert code == cli.EXIT_ERROR
    for meant in ("--world-size", "--atol", "--sample"):
        assert f"did you mean {meant}?" in err, err


def test_an_option_like_nothing_points_at_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, PAIR, "--frobnicate")
    assert code == cli.EXIT_ERROR
    assert "did you mean" not in err and "validate --help lists every option" in err


def test_suggest_option_needs_a_close_option() -> None:
    options = ["--world-size", "--atol", "--rtol", "--sample", "--json"]
    assert suggest_option("--world_size", options) == "--world-size"
    assert suggest_option("--rtoll=3", options) == "--rtol"
    assert suggest_option("--xyz", options) is None
    assert suggest_option("positional", options) is None


# --------------------------------------------------------------------------------------------------
# world size 1


def test_world_size_1_is_refused_with_one_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, PAIR, "--world-size", "1")
    assert code == cli.EXIT_ERROR
    assert out == "", "no report: the validation never started"
    assert "a distributed check needs at least 2 ranks" in err
    assert "INCONCLUSIVE" not in err + out and "fewer ranks" not in err and "reference run" not in err
    assert "--world-size 2" in err


def test_world_size_1_from_the_pyproject_is_refused_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text(f'[tool.distcheck]\npython_path = ["{ROOT}"]\nworld_size = 1\nfactory = "{PAIR}"\n')
    code, out, err = _main(capsys, "--config", str(config))
    assert code == cli.EXIT_ERROR and out == ""
    assert "a distributed check needs at least 2 ranks" in err


def test_the_library_refuses_world_size_1_with_the_same_message() -> None:
    with pytest.raises(OptionError, match="a distributed check needs at least 2 ranks") as info:
        distcheck.validate_on_cpu(pair_potential.model_factory, pair_potential.sample_batch(), world_size=1)
    assert info.value.option == "world_size" and info.value.value == 1
    with pytest.raises(OptionError, match="at least 2 ranks"):
        check_rank_count(1)
    with pytest.raises(OptionError, match="must be at least 1, got 0"):  # the bound itself is unchanged
        check_rank_count(0)
    check_rank_count(2)


# --------------------------------------------------------------------------------------------------
# lambda factories


@pytest.fixture
def lambda_module(tmp_path: Path) -> Path:
    path = tmp_path / "lambda_model.py"
    path.write_text(LAMBDA_MODEL)
    return path


def _lambda_refused(code: int, err: str) -> None:
    assert code == cli.EXIT_ERROR, err
    assert "is a lambda" in err and "def model_factory(): return" in err, err
    assert "reference run" not in err, "refused before anything starts"


@pytest.mark.procs
def test_lambda_factory_by_file_reference_is_refused(
    lambda_module: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    _lambda_refused(*_main(capsys, f"{lambda_module}:model_factory")[::2])


@pytest.mark.procs
def test_lambda_factory_of_a_py_target_is_refused(
    lambda_module: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    _lambda_refused(*_main(capsys, str(lambda_module))[::2])  # a .py file: its model_factory


@pytest.mark.procs
def test_lambda_factory_by_module_reference_is_refused(
    lambda_module: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(lambda_module.parent)  # the current directory goes on the path for a module reference
    monkeypatch.syspath_prepend(str(ROOT))
    _lambda_refused(*_main(capsys, "lambda_model:model_factory", "--sample", f"{PAIR.split(':')[0]}:sample_batch")[::2])
    sys.modules.pop("lambda_model", None)


def test_resolve_factory_refuses_a_lambda_reference_wherever_it_is_loaded(lambda_module: Path) -> None:
    reference = f"{lambda_module}:model_factory"
    # Not imported yet: nothing is imported to resolve it; the process that loads it refuses it.
    ref = resolve_factory(reference)
    with pytest.raises(FactoryError, match="is a lambda"):
        ref.load()
    # Imported (as the CLI and the editor do first): refused before anything starts.
    assert callable(load_object(reference))
    with pytest.raises(FactoryError, match="is a lambda"):
        resolve_factory(reference)
    with pytest.raises(FactoryError, match="lambda"):
        resolve_factory(load_object(reference))  # the callable itself, as before
    assert resolve_factory(PAIR) == FactoryRef(module="examples.pair_potential", path=None, qualname="model_factory")


# --------------------------------------------------------------------------------------------------
# --dtype


@pytest.fixture
def strict_module(tmp_path: Path) -> Path:
    path = tmp_path / "strict_model.py"
    path.write_text(STRICT_MODEL)
    return path


@pytest.mark.procs
@pytest.mark.parametrize(
    ("factory", "sample", "dtype", "code", "where"),
    [
        ("model_factory32", "file", None, cli.EXIT_ERROR, "read from one.xyz"),
        ("model_factory32", "file", "float64", cli.EXIT_ERROR, "read from one.xyz"),
        ("model_factory32", "python", None, cli.EXIT_ERROR, "as sample_batch gave it"),
        ("model_factory32", "file", "float32", cli.EXIT_PASSED, None),
        ("model_factory32", "python", "float32", cli.EXIT_PASSED, None),
        ("model_factory64", "file", None, cli.EXIT_PASSED, None),
    ],
)
def test_dtype_of_the_sample(
    factory: str,
    sample: str,
    dtype: str | None,
    code: int,
    where: str | None,
    strict_module: Path,
    single_frame: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A float32 model meeting a float64 sample (from a file, or a Python sample_batch) fails with the
    --dtype that fixes it on the report's second line; with that --dtype it passes."""
    report_path = tmp_path / "report.json"
    source = str(single_frame) if sample == "file" else f"{strict_module}:sample_batch"
    args = [f"{strict_module}:{factory}", "--sample", source, "--world-size", "2", "--no-auto-fix"]
    args += ["--no-layer-diagnostic", "--json", str(report_path), *(["--dtype", dtype] if dtype else [])]
    got, out, err = _main(capsys, *args)
    assert got == code, out + err
    report = TraceReport.from_json(report_path.read_text())
    if where is None:
        assert "--dtype" not in report.next_action
        return
    assert "--dtype float32" in out.split("\n")[1], "the hint is the report's second line"
    assert "the sample is float64" in report.next_action and where in report.next_action


def test_dtype_casts_a_python_sample(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from distcheck.jobs.sample import load_sample
    from distcheck.jobs.target import Target

    target = Target(name=None, factory=PAIR, sample="examples.pair_potential:sample_batch", dtype="float32")
    batch, info = load_sample(target, pair_potential.model_factory)
    assert batch.dtype == torch.float32 and info["dtype"] == "float32"
    target.dtype = "float16"
    with pytest.raises(ConfigError, match="dtype must be float64 or float32"):
        load_sample(target, pair_potential.model_factory)


def _torch_error(op: Callable[[], object]) -> str:
    try:
        op()
    except RuntimeError as exc:
        return str(exc)
    raise AssertionError("expected torch to refuse")


def test_dtype_mismatch_messages_are_recognised() -> None:
    f, d = torch.ones(3, 3, dtype=torch.float32), torch.ones(3, 3, dtype=torch.float64)
    mismatches = [
        _torch_error(lambda: torch.zeros(3).index_add(0, torch.tensor([0, 1, 2]), d[0])),
        _torch_error(lambda: f @ d),
        _torch_error(lambda: torch.nn.functional.linear(d, f)),
        _torch_error(lambda: torch.zeros(3).index_add_(0, torch.tensor([0, 1, 2]), d[0])),
    ]
    for message in mismatches:
        assert is_dtype_mismatch(message), message
    others = [
        _torch_error(lambda: f @ torch.ones(2, 2)),
        _torch_error(lambda: torch.zeros(3).index_add(0, torch.tensor([0, 1]), f[0])),
        "index 5 is out of bounds for dimension 0 with size 3",
    ]
    for message in others:
        assert not is_dtype_mismatch(message), message


# --------------------------------------------------------------------------------------------------
# --frames


@pytest.mark.parametrize(
    ("frames", "indices"),
    [("0:3", [0, 1, 2]), ("2", [2]), ("::2", [0, 2]), ("-1", [3]), ("1:", [1, 2, 3]), ("3:0:-1", [3, 2, 1]), (1, [1])],
)
def test_frames_select_systems_of_one_batch(frames: str | int, indices: list[int], trajectory: Path) -> None:
    batch, info = read_structure(str(trajectory), frames, None)
    sizes = [128 + 16 * i for i in indices]
    assert batch.num_systems == len(indices)
    assert torch.bincount(batch.batch).tolist() == sizes
    assert info["frame_indices"] == indices and info["frames"] == str(frames)
    assert batch.dtype == torch.float64


def test_every_frame_is_read_by_default(trajectory: Path) -> None:
    batch, info = read_structure(str(trajectory), None, torch.float32)
    assert batch.num_systems == 4 and batch.dtype == torch.float32
    assert "frames" not in info and info["dtype"] == "float32"


@pytest.mark.parametrize(
    ("frames", "message"),
    [
        ("7", "frames '7' is out of range: .* has 4 frames \\(indices 0 to 3"),
        ("-5", "frames '-5' is out of range"),
        ("5:9", "frames '5:9' selects no frame: .* has 4 frames"),
        ("2:2", "selects no frame"),
        ("1:x", "neither an index nor a slice"),
        ("0:4:0", "a step of 0"),
        ("first", "neither an index nor a slice"),
    ],
)
def test_frames_out_of_range_or_malformed(frames: str, message: str, trajectory: Path) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        read_structure(str(trajectory), frames, None)
    assert info.value.hint


def test_frames_of_a_single_frame_file(single_frame: Path) -> None:
    for frames in ("0", "-1", "0:3", ":"):
        batch, _ = read_structure(str(single_frame), frames, None)
        assert batch.num_systems == 1
    with pytest.raises(ConfigError, match=r"frames '1' is out of range: .* has 1 frame \(index 0\)"):
        read_structure(str(single_frame), "1", None)
    with pytest.raises(ConfigError, match="selects no frame"):
        read_structure(str(single_frame), "1:", None)


def test_frames_rejects_bools_and_floats() -> None:
    for value in (True, 1.5, None, [0, 1]):
        with pytest.raises(ValueError, match="frames must be an index or a slice"):
            parse_frames(value)


@pytest.mark.procs
def test_frames_on_the_command_line_validate_each_frame_as_a_system(
    trajectory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    report_path = tmp_path / "frames.json"
    args = [PAIR, "--sample", str(trajectory), "--frames", "0:3", "--world-size", "2", "--no-auto-fix"]
    code, out, err = _main(capsys, *args, "--no-layer-diagnostic", "--json", str(report_path))
    assert code == cli.EXIT_PASSED, out + err
    report = TraceReport.from_json(report_path.read_text())
    assert report.target is not None
    assert report.target.sample == {"file": str(trajectory), "frames": "0:3", "frame_indices": [0, 1, 2]}
    per_rank = report.attempts[0].partition_health.per_rank
    assert per_rank, "the partition of each rank is reported"
    assert report.attempts[0].verdicts["energy"].n_total == 3, "one energy per frame"


@pytest.mark.procs
def test_frames_need_a_structure_file_sample(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    code, _, err = _main(capsys, PAIR, "--frames", "0:2")
    assert code == cli.EXIT_ERROR
    assert "selects frames of a structure file" in err and "give --sample a structure file" in err


def _config(tmp_path: Path, trajectory: Path, extra: str) -> Path:
    config = tmp_path / "pyproject.toml"
    config.write_text(
        f'[tool.distcheck]\npython_path = ["{ROOT}"]\nworld_size = 2\n\n'
        f'[[tool.distcheck.targets]]\nname = "traj"\nfactory = "{PAIR}"\nsample = "{trajectory}"\n{extra}'
    )
    return config


def test_frames_and_dtype_in_a_pyproject_target(trajectory: Path, tmp_path: Path) -> None:
    (target,) = load_targets(str(_config(tmp_path, trajectory, 'frames = "::2"\ndtype = "float32"\n')))
    assert target.frames == "::2" and target.dtype == "float32"
    (target,) = load_targets(str(_config(tmp_path, trajectory, "frames = 3\n")))
    assert target.frames == "3"
    for extra, message, line in [
        ('frames = "a:b"\n', "neither an index nor a slice", 9),  # the line of the key
        ("frames = 1.5\n", "frames must be an index or a slice", 9),
        ('dtype = "half"\n', "dtype must be float64 or float32", 9),
    ]:
        with pytest.raises(ConfigError, match=message) as info:
            load_targets(str(_config(tmp_path, trajectory, extra)))
        assert info.value.line == line, (extra, info.value.line)
    config = tmp_path / "pyproject.toml"
    config.write_text(
        f'[tool.distcheck]\nfactory = "{PAIR}"\nsample = "{PAIR.split(":")[0]}:sample_batch"\nframes = "0:2"\n'
    )
    with pytest.raises(ConfigError, match="frames selects frames of a structure file") as info:
        load_targets(str(config))
    assert info.value.line == 4


@pytest.mark.procs
def test_frames_from_a_pyproject_target_as_a_subprocess(trajectory: Path, tmp_path: Path) -> None:
    config = _config(tmp_path, trajectory, 'frames = "::2"\n')
    report_path = tmp_path / "report.json"
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(Path(distcheck.__file__).parents[1]))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distcheck",
            "validate",
            "traj",
            "--config",
            str(config),
            *QUICK,
            "--json",
            str(report_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == cli.EXIT_PASSED, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    sample = json.loads(report_path.read_text())["target"]["sample"]
    assert sample["frame_indices"] == [0, 2] and sample["frames"] == "::2"


@pytest.mark.procs
def test_the_editor_runner_takes_frames_and_dtype_from_the_pyproject(trajectory: Path, tmp_path: Path) -> None:
    """The daemon passes a target's frames / dtype to the runner, which reads the sample as the CLI does
    and adds the same dtype hint."""
    from distcheck.jobs.runner import validate
    from distcheck.lsp.config import load_workspace_targets, read_disk

    _config(tmp_path, trajectory, 'frames = "1:3"\ndtype = "float32"\n')
    workspace = load_workspace_targets(str(tmp_path), read_disk)
    assert workspace.problem is None, workspace.problem
    (target,) = workspace.targets
    params = target.runner_params(
        {"world_size": 2, "device": "cpu", "auto_fix": False, "layer_diagnostic": False}, None
    )
    assert params["target"]["frames"] == "1:3" and params["target"]["dtype"] == "float32"
    report, _ = validate(params, lambda e, i: None)
    assert report.target.sample == {
        "file": str(trajectory),
        "frames": "1:3",
        "frame_indices": [1, 2],
        "dtype": "float32",
    }
    # pair_potential computes in float64 (its neighbour-list shifts come in the sample's float32): the
    # runner's report names the dtype that fixes it, as the CLI's does
    assert report.verdict == "error"
    assert "the sample is float32 (read from traj.extxyz)" in report.next_action
    assert 'dtype = "float64" in the pyproject target' in report.next_action.split("\n")[1]
