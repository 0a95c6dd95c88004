"""`distcheck validate` as ranks of a real `torchrun` job (gloo on the CPU): one node with two ranks,
two "nodes" on this host, a seeded bug, and failures on one rank reported by rank 0."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import distcheck
from distcheck import cli
from distcheck.report import TraceReport
from distcheck.runtime import SetupError
from distcheck.spec import MLIPSpec
from examples import unaware_model

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FAULTS = "tests/server/runtime/fault_models.py"
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    keep = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(Path(distcheck.__file__).parents[1]), str(ROOT), *keep])
    env["NO_COLOR"] = "1"
    return env


def _torchrun(launch: list[str], args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", *launch, "-m", "distcheck", "validate", *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"torchrun did not finish in {timeout} s:\n{out}\n{err}")
    return proc.returncode, out, err


def _standalone(args: list[str], cwd: Path = ROOT) -> tuple[int, str, str]:
    return _finish(_torchrun(["--standalone", "--nproc-per-node=2"], args, cwd))


@pytest.mark.procs
def test_one_node_two_ranks_finds_the_undeclared_helper_and_fixes_it(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    code, out, err = _standalone(["helper_model", "--json", str(report_path)], cwd=EXAMPLES)
    # a pass only after auto-fix is not a pass: rank 0 exits with its code, which torchrun reports as a failure
    assert code != 0 and f"exitcode  : {cli.EXIT_FIXED}" in err, out + err
    assert out.count("PASSED AFTER FIX") == 1, "only rank 0 reports"
    assert "--save-spec" in err
    assert "ranks started by torchrun on 1 host(s)" in out
    report = TraceReport.from_json(report_path.read_text())
    assert report.verdict == "passed"
    assert report.meta.launcher == "torchrun" and report.meta.world_size == 2
    assert report.meta.backend == "gloo" and report.meta.devices == ["cpu", "cpu"]
    assert len(report.meta.placement) == 2
    assert not report.attempts[0].passed and report.attempts[-1].passed
    assert report.attempts[-1].rule == "declare_helper_adapter"
    assert [h.attr_name for h in report.spec.distribution.third_party_helpers] == ["mol_sum"]


@pytest.mark.procs
def test_seeded_bug_is_found_and_fixed_across_ranks(tmp_path: Path) -> None:
    spec_path, report_path = tmp_path / "wrong.distspec.json", tmp_path / "report.json"
    MLIPSpec.from_dict(unaware_model.WRONG_SPEC).save(spec_path)
    args = ["examples.unaware_model:model_factory", "--spec", str(spec_path), "--json", str(report_path)]
    code, out, err = _standalone([*args, "--accept-fixed"])  # a pass after auto-fix, accepted: exit 0
    assert code == 0, out + err
    report = TraceReport.from_json(report_path.read_text())
    first = report.attempts[0]
    assert not first.passed and "forces" in first.failing_outputs
    assert report.verdict == "passed" and report.spec.distribution.policy.scatter_mode != "halo_correction"


@pytest.mark.procs
def test_two_nodes_on_one_host_with_a_static_rendezvous(tmp_path: Path) -> None:
    port = _free_port()
    nodes = []
    for node_rank in (0, 1):
        launch = ["--nnodes=2", f"--node-rank={node_rank}", "--nproc-per-node=1"]
        launch += ["--master-addr=127.0.0.1", f"--master-port={port}"]
        nodes.append(_torchrun(launch, ["mpnn", "--json", str(tmp_path / f"node{node_rank}.json")], EXAMPLES))
    (code0, out0, err0), (code1, out1, err1) = (_finish(p) for p in nodes)
    assert code0 == 0 and code1 == 0, out0 + err0 + out1 + err1
    assert out0.startswith("PASSED") and "PASSED" not in out1
    assert not (tmp_path / "node1.json").exists()
    report = TraceReport.from_json((tmp_path / "node0.json").read_text())
    assert report.meta.world_size == 2 and len(report.meta.placement) == 2
    assert len(report.attempts[0].partition_health.per_rank) == 2


@pytest.mark.procs
def test_factory_failing_on_one_rank_is_reported_by_rank_0_without_waiting(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    args = [f"{FAULTS}:factory_raises_on_rank1", "--sample", f"{FAULTS}:sample", "--timeout", "60"]
    t0 = time.perf_counter()
    code, out, err = _standalone([*args, "--json", str(report_path)])
    elapsed = time.perf_counter() - t0
    assert code != 0, out + err
    report = TraceReport.from_json(report_path.read_text())
    assert report.verdict == "error"
    error = report.attempts[0].error
    assert error is not None and error.rank == 1 and error.phase == "factory"
    assert "weights not found on this node" in error.message
    assert elapsed < 60, "a setup failure must not wait for the collective timeout"


@pytest.mark.procs
def test_forward_failure_names_the_rank_that_failed_not_the_one_left_waiting(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    args = [f"{FAULTS}:factory_raise_in_forward", "--sample", f"{FAULTS}:sample", "--timeout", "5"]
    code, out, err = _standalone([*args, "--json", str(report_path)])
    assert code != 0, out + err
    report = TraceReport.from_json(report_path.read_text())
    error = report.attempts[0].error
    assert error is not None and error.rank == 1 and error.phase == "forward"
    assert "injected failure on rank 1" in error.message
    assert out.startswith("ERROR")


@pytest.mark.procs
def test_what_the_model_prints_stays_out_of_the_report() -> None:
    code, out, err = _standalone([f"{FAULTS}:factory_prints", "--sample", f"{FAULTS}:sample"])
    assert code == 0, out + err
    assert out.startswith("PASSED") and "model says hello" not in out
    assert "model says hello on stdout" in err


def test_launcher_torchrun_outside_torchrun_says_how_to_start_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in LAUNCHER_VARS:
        monkeypatch.delenv(key, raising=False)
    code = cli.main(["validate", "examples.pair_potential:model_factory", "--launcher", "torchrun"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_ERROR
    assert "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are not set" in err
    assert cli.ONE_HOST_TORCHRUN in err


def test_stray_launcher_variables_run_locally_unless_torchrun_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in LAUNCHER_VARS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("RANK", "3")  # exported for something else
    assert cli._launcher("auto") is None
    assert cli._launcher("local") is None
    with pytest.raises(SetupError, match="set RANK but not WORLD_SIZE, MASTER_ADDR, MASTER_PORT"):
        cli._launcher("torchrun")


def test_world_size_flag_must_match_the_job(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code = cli.main(["validate", "examples.pair_potential:model_factory", "--world-size", "3"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_ERROR
    assert "--world-size 3 but the launcher started 2 ranks" in err and "(rank 0)" in err


GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
CHECKS_ENV = ["tests/server/validate/gpu_models.py:pair_potential_checks_nccl_env"]
CHECKS_ENV += ["--sample", "examples/pair_potential.py:sample_batch"]


@pytest.mark.gpu
@pytest.mark.skipif(GPUS == 0, reason="needs a CUDA device")
def test_ranks_sharing_one_gpu_use_gloo(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    code, out, err = _standalone([*CHECKS_ENV, "--device", "cuda:0", "--json", str(report_path)])
    assert code == 0, out + err
    report = TraceReport.from_json(report_path.read_text())
    assert report.meta.backend == "gloo" and report.meta.devices == ["cuda:0", "cuda:0"]


@pytest.mark.gpu
@pytest.mark.skipif(GPUS == 0, reason="needs a CUDA device")
def test_one_rank_per_gpu_uses_nccl_with_multicast_off(tmp_path: Path) -> None:
    ranks = min(GPUS, 2)
    report_path = tmp_path / "report.json"
    launch = ["--standalone", f"--nproc-per-node={ranks}"]
    code, out, err = _finish(_torchrun(launch, [*CHECKS_ENV, "--json", str(report_path)], ROOT))
    report = TraceReport.from_json(report_path.read_text())
    assert report.meta.backend == "nccl" and report.meta.devices == [f"cuda:{i}" for i in range(ranks)]
    assert all(a.error is None for a in report.attempts), out + err
    if ranks == 2:
        assert code == 0 and report.verdict == "passed", out + err


@pytest.mark.gpu
@pytest.mark.skipif(GPUS == 0, reason="needs a CUDA device")
def test_more_ranks_than_gpus_says_what_to_change() -> None:
    launch = ["--standalone", f"--nproc-per-node={GPUS + 1}"]
    code, _out, err = _finish(_torchrun(launch, CHECKS_ENV, ROOT))
    assert code != 0
    assert f"--nproc-per-node={GPUS}" in err and "cuda:0" in err
