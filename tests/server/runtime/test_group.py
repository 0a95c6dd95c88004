"""Reading a launcher's environment and choosing each rank's device and backend (no process group)."""

from __future__ import annotations

import pytest
import torch

from distcheck.runtime import SetupError
from distcheck.runtime.group import GroupSession, LauncherEnv, _node_devices, launcher_device, launcher_env
from distcheck.runtime.rank_devices import resolve_backend

BASE = {"RANK": "3", "WORLD_SIZE": "4", "MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusals on a machine without a GPU")


def _env(local_rank: int = 1, local_world_size: int = 2) -> LauncherEnv:
    return LauncherEnv(2 + local_rank, 4, local_rank, local_world_size, "node0", 29500)


def test_no_launcher_variables_means_not_launched() -> None:
    assert launcher_env({"PATH": "/usr/bin"}) is None


def test_torchrun_variables_are_read() -> None:
    env = launcher_env({**BASE, "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert env == LauncherEnv(3, 4, 1, 2, "node0", 29500)


def test_local_layout_defaults_to_one_node() -> None:
    env = launcher_env(BASE)
    assert env is not None and (env.local_rank, env.local_world_size) == (3, 4)


@pytest.mark.parametrize(
    ("environ", "words"),
    [
        ({"RANK": "0", "WORLD_SIZE": "2"}, "not MASTER_ADDR, MASTER_PORT"),
        ({**BASE, "MASTER_PORT": "http"}, "not a whole number"),
        ({**BASE, "RANK": "4"}, "inconsistent launcher variables"),
        ({**BASE, "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, "inconsistent launcher variables"),
    ],
)
def test_broken_launcher_variables_are_refused(environ: dict[str, str], words: str) -> None:
    with pytest.raises(SetupError, match=words):
        launcher_env(environ)


def test_cpu_and_auto_without_gpu() -> None:
    assert launcher_device("cpu", _env()) == "cpu"
    if not torch.cuda.is_available():
        assert launcher_device("auto", _env()) == "cpu"
    else:
        assert launcher_device("auto", _env(0, 1)) == "cuda:0"


def test_device_list_is_indexed_by_local_rank() -> None:
    assert launcher_device(["cpu", "cpu"], _env(1, 2)) == "cpu"
    with pytest.raises(SetupError, match="one device per rank of a node"):
        launcher_device(["cpu", "cpu", "cpu"], _env(1, 2))
    with pytest.raises(SetupError, match="list entries are 'cpu' or 'cuda:N'"):
        launcher_device(["cpu", "tpu"], _env(1, 2))


@NO_GPU
def test_gpu_devices_without_a_gpu_are_refused() -> None:
    with pytest.raises(SetupError, match="sees no GPU on this node"):
        launcher_device("cuda", _env())
    with pytest.raises(SetupError, match=r"cuda:0 requested but torch sees 0 GPU"):
        launcher_device("cuda:0", _env())
    with pytest.raises(SetupError, match="not understood"):
        launcher_device("gpu", _env())


def test_backend_follows_the_nodes_devices() -> None:
    assert resolve_backend("auto", _node_devices("cpu", _env())) == "gloo"
    with pytest.raises(SetupError, match="needs CUDA devices"):
        resolve_backend("nccl", _node_devices("cpu", _env()))
    # What each node computes for NCCL on its own GPUs, and for ranks sharing one GPU.
    assert resolve_backend("auto", ["cuda:0", "cuda:1"]) == "nccl"
    assert resolve_backend("auto", ["cuda:0", "cuda:0"]) == "gloo"


def _set_env(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]) -> None:
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)


def test_joining_outside_a_launcher_says_what_to_use_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_env(monkeypatch, {})
    with pytest.raises(SetupError, match=r"not started by a launcher.*validate_on_cpu"):
        GroupSession.join()


def test_nccl_on_cpu_is_refused_before_any_rendezvous(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_env(monkeypatch, {**BASE, "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"})
    with pytest.raises(SetupError, match="needs CUDA devices"):
        GroupSession.join(device="cpu", backend="nccl")
