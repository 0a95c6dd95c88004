"""Single-host launches listen on loopback only, unless the user names a host (issue 33, item 6).

While a validation runs, the LISTEN sockets (TCP and TCP6) of every process of the job — the launcher
and all its descendants — are sampled every few tenths of a second; the model's ranks sleep in their
forward (`fixtures/slow_pair.py`) so that the job's sockets are up while it is sampled. Cases:
distcheck's own local launcher, the documented single-host torchrun command (`cli.ONE_HOST_TORCHRUN`,
run as written), and the same command with a host named (this machine's own non-loopback address),
which must not be forced onto loopback."""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

import distcheck
from distcheck import cli

ROOT = Path(__file__).resolve().parents[2]
SLOW = "tests/server/fixtures/slow_pair.py"
TARGET_ARGS = [f"{SLOW}:model_factory", "--sample", f"{SLOW}:sample_batch", "--device", "cpu", "--timeout", "120"]
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
FRESH_FILE = '"$(mktemp -d)/rdzv"'
"""The rendezvous file of `cli.ONE_HOST_TORCHRUN`, replaced here by one in the test's directory."""
MIN_SAMPLES = 3
"""Samples that must have seen the job listening, so that a pass is not a job sampled too late."""


@dataclass
class Listening:
    """What the samples saw: each listening socket as `(process, address, port)`, and how many
    samples saw any."""

    sockets: set[tuple[str, str, int]] = field(default_factory=set)
    samples_with_sockets: int = 0

    def off_loopback(self) -> list[tuple[str, str, int]]:
        """The sockets bound to an address that is not loopback (a wildcard address counts as not)."""
        return sorted(s for s in self.sockets if not _is_loopback(s[1]))


def _is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _sample(root: psutil.Process, seen: Listening) -> None:
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    found = False
    for proc in procs:
        try:
            conns = proc.net_connections(kind="inet")
            name = " ".join(proc.cmdline()[:6])
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue  # ended between the listing and the look
        for conn in conns:
            if conn.status == psutil.CONN_LISTEN:
                seen.sockets.add((f"pid {proc.pid}: {name}", conn.laddr.ip, conn.laddr.port))
                found = True
    seen.samples_with_sockets += found


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS and not k.endswith("_SOCKET_IFNAME")}
    keep = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(Path(distcheck.__file__).parents[1]), str(ROOT), *keep])
    env["NO_COLOR"] = "1"
    return {**env, **extra}


def _run_sampled(argv: list[str], extra_env: dict[str, str], tmp_path: Path, timeout: float = 240) -> Listening:
    """Run `argv` to its end from the checkout, sampling its job's listening sockets meanwhile; fails
    the test unless it exits 0 with a PASSED report."""
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    seen = Listening()
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen(argv, cwd=ROOT, env=_env(extra_env), stdout=out, stderr=err)
        root = psutil.Process(proc.pid)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            _sample(root, seen)
            time.sleep(0.1)
        if proc.poll() is None:
            for child in root.children(recursive=True):
                child.kill()
            proc.kill()
        code = proc.wait()
    text = out_path.read_text() + err_path.read_text()
    assert code == 0 and text.startswith("PASSED"), f"exit {code}:\n{text}"
    assert seen.samples_with_sockets >= MIN_SAMPLES, f"the job was seen listening {seen.samples_with_sockets} time(s)"
    return seen


def _one_host_torchrun(rdzv: Path, local_addr: str | None = None) -> tuple[list[str], dict[str, str]]:
    """`cli.ONE_HOST_TORCHRUN` as an argv and its environment assignments, with a fresh rendezvous
    file, this test's target, and `--local-addr` replaced when a host is named."""
    assert FRESH_FILE in cli.ONE_HOST_TORCHRUN
    words = shlex.split(cli.ONE_HOST_TORCHRUN.replace(FRESH_FILE, shlex.quote(str(rdzv))))
    env: dict[str, str] = {}
    while re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    assert words[0] == "torchrun" and words[-1] == "TARGET"
    if local_addr is not None:
        assert "--local-addr=127.0.0.1" in words
        words = [f"--local-addr={local_addr}" if w == "--local-addr=127.0.0.1" else w for w in words]
    return [sys.executable, "-m", "torch.distributed.run", *words[1:-1], *TARGET_ARGS], env


def _own_address() -> str | None:
    """An IPv4 address of this machine that is not loopback nor link-local and can be bound, or None."""
    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family != socket.AF_INET:
                continue
            ip = ipaddress.ip_address(a.address)
            if ip.is_loopback or ip.is_link_local:
                continue
            try:
                with socket.socket() as s:
                    s.bind((a.address, 0))
            except OSError:
                continue
            return str(a.address)
    return None


@pytest.mark.procs
def test_the_local_launcher_listens_on_loopback_only(tmp_path: Path) -> None:
    seen = _run_sampled([sys.executable, "-m", "distcheck", "validate", *TARGET_ARGS], {}, tmp_path)
    assert not seen.off_loopback(), f"listening off loopback: {seen.off_loopback()}"


@pytest.mark.procs
def test_the_documented_one_host_torchrun_listens_on_loopback_only(tmp_path: Path) -> None:
    argv, env = _one_host_torchrun(tmp_path / "rdzv")
    seen = _run_sampled(argv, env, tmp_path)
    assert not seen.off_loopback(), f"listening off loopback: {seen.off_loopback()}"


@pytest.mark.procs
def test_a_named_host_is_not_forced_onto_loopback(tmp_path: Path) -> None:
    address = _own_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to name as the job's host")
    argv, env = _one_host_torchrun(tmp_path / "rdzv", local_addr=address)
    seen = _run_sampled(argv, env, tmp_path)
    reachable = [s for s in seen.off_loopback() if s[1] in (address, "0.0.0.0", "::")]
    assert reachable, f"the job named {address} as its host but listens on loopback only: {sorted(seen.sockets)}"


def test_the_docs_show_the_one_host_command_the_cli_suggests() -> None:
    text = (ROOT / "docs" / "gpus.md").read_text(encoding="utf-8")
    joined = " ".join(re.sub(r"\\\n", " ", text).split())
    command = cli.ONE_HOST_TORCHRUN.replace("TARGET", "my_model.py:model_factory")
    assert command in joined, f"docs/gpus.md does not show {command}"
