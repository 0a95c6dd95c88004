"""Nothing of distcheck's is left in TMPDIR or its cache directory after any way the editor's daemon or
the CLI ends: SIGTERM, SIGHUP, SIGINT, SIGKILL of the owner, its stdin closed. Each test has its own
TMPDIR and XDG_CACHE_HOME, warms the processes (the daemon validates a small example, so its runner,
the runner's forkserver, spares and standby runner exist; the CLI is stopped while a rank runs), ends
it, and lists whatever is left of distcheck's: run directories, multiprocessing's `pymp-*`
directories, `distcheck-*` directories, and in the cache anything but the stores `memory` documents
(a half-written temporary file, say)."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import MODELS, ROOT, SOURCE, Faults, model, own_leftovers

pytestmark = pytest.mark.procs

STORES = {"spare-packages.json", "receptive-fields.json", "bytecode", "empty"}
"""What `memory` documents under the cache directory: anything else there is a leftover."""

LEFT_WAIT_S = 20.0


def distchecks_leftovers(tmpdir: Path, cache: Path) -> list[str]:
    """What of distcheck's is in `tmpdir` and the cache `cache` (its `distcheck` directory), as paths."""
    found = [
        str(tmpdir / name)
        for name in sorted(os.listdir(tmpdir))
        if name.startswith(("distcheck", "pymp-", "torch_", "tmp"))
    ]
    home = cache / "distcheck"
    if home.is_dir():
        for name in sorted(os.listdir(home)):
            if name not in STORES:
                found.append(str(home / name))
        for base, _dirs, files in os.walk(home):
            found += [os.path.join(base, f) for f in files if f.endswith(".tmp")]
    return found


def wait_nothing_left(tmpdir: Path, cache: Path, timeout: float = LEFT_WAIT_S) -> list[str]:
    """Wait (bounded) until nothing of distcheck's is left; what is left then."""
    deadline = time.monotonic() + timeout
    while True:
        left = distchecks_leftovers(tmpdir, cache)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _frame(obj: Any) -> bytes:
    data = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


class Daemon:
    """`python -m distcheck.lsp` of one test (its Faults environment: TMPDIR, marker), driven raw."""

    def __init__(self, faults: Faults, cache: Path) -> None:
        env = faults.env(XDG_CACHE_HOME=str(cache))
        env["PYTHONPATH"] = os.pathsep.join([str(SOURCE), *filter(None, env.get("PYTHONPATH", "").split(":"))])
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "distcheck.lsp", "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(faults.work / "daemon.err", "w"),
            env=env,
            cwd=str(faults.work),
            start_new_session=True,
        )
        faults.started.append(self.proc)  # type: ignore[arg-type]
        self.err = faults.work / "daemon.err"
        self._buf = b""
        self._id = 0
        self.messages: list[dict[str, Any]] = []
        self.log: list[str] = []

    def send(self, obj: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(_frame(obj))
        self.proc.stdin.flush()

    def request(self, method: str, params: Any = None, timeout: float = 60.0) -> Any:
        self._id += 1
        msg_id = self._id
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            for message in self.messages:
                if message.get("id") == msg_id and "method" not in message:
                    self.messages.remove(message)
                    assert "result" in message, message
                    return message["result"]
            assert time.monotonic() < deadline, f"no answer to {method}: {self.err.read_text()[-3000:]}"
            self._read(0.2)

    def _read(self, timeout: float) -> None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return
        data = os.read(self.proc.stdout.fileno(), 65536)
        assert data, f"the daemon closed stdout (exit {self.proc.poll()}): {self.err.read_text()[-3000:]}"
        self._buf += data
        while True:
            head, sep, rest = self._buf.partition(b"\r\n\r\n")
            if not sep:
                return
            length = int(next(h for h in head.split(b"\r\n") if h.startswith(b"Content-Length:")).split(b":")[1])
            if len(rest) < length:
                return
            message = json.loads(rest[:length])
            self._buf = rest[length:]
            if "method" in message and "id" in message:  # a request to the client
                result: Any = None
                if message["method"] == "workspace/configuration":
                    result = [{} for _ in message["params"]["items"]]
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            elif "id" in message:
                self.messages.append(message)
            elif message.get("method") == "window/logMessage":
                self.log.append(str(message["params"]["message"]))

    def initialize(self, workspace: Path) -> None:
        """Initialise on the trusted workspace folder `workspace`."""
        folder = workspace.as_uri()
        self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "capabilities": {},
                "initializationOptions": {"trusted": True},
                "rootUri": folder,
                "workspaceFolders": [{"uri": folder, "name": workspace.name}],
            },
        )
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def validate(self, target: str) -> None:
        """Start a validation of `target` (the command answers at once)."""
        self.request("workspace/executeCommand", {"command": "distcheck.validate", "arguments": [target]})

    def warm(self, target: str, tmpdir: Path, timeout: float = 150.0) -> None:
        """Validate `target` to its report, then wait for the standby runner's forkserver."""
        self.validate(target)
        deadline = time.monotonic() + timeout
        while self.request("distcheck/lastReport", {"target": target}) is None:
            assert time.monotonic() < deadline, f"no report within {timeout} s: " + "\n".join(self.log[-30:])
            time.sleep(0.3)
        # one socket directory per runner's forkserver
        while len([n for n in os.listdir(tmpdir) if n.startswith(("pymp-", "distcheck-mp-"))]) < 2:
            assert time.monotonic() < deadline, "no standby runner:\n" + "\n".join(self.log[-20:])
            self._read(0.2)


BLOCK = "\n[[tool.distcheck.targets]]\nname = 'block'\nfactory = 'grandchild.py:model_factory'\n" + (
    "sample = 'grandchild.py:sample_batch'\ntimeout_sec = 120\n"
)


def _workspace(faults: Faults) -> Path:
    """A copy of `examples/` (the editor's examples workspace), whose target `pair_potential` is quick,
    with target `block`: rank 1 starts a grandchild in a new session, then blocks in the forward."""
    ws = faults.work / "examples"
    shutil.copytree(ROOT / "examples", ws, ignore=shutil.ignore_patterns("__pycache__", "*.distspec.json"))
    for name in ("faultkit.py", "grandchild.py"):
        shutil.copy(MODELS / name, ws / name)
    with (ws / "pyproject.toml").open("a") as fh:
        fh.write(BLOCK)
    return ws


DAEMON_ENDINGS = {
    "SIGTERM": (lambda d: d.proc.send_signal(signal.SIGTERM), 128 + signal.SIGTERM),
    "SIGHUP": (lambda d: d.proc.send_signal(signal.SIGHUP), 128 + signal.SIGHUP),
    "SIGINT": (lambda d: os.killpg(d.proc.pid, signal.SIGINT), None),  # Ctrl-C in the terminal it runs in
    "SIGKILL": (lambda d: d.proc.kill(), -signal.SIGKILL),
    "stdin-closed": (lambda d: d.proc.stdin.close(), 0),  # the editor window closed
}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("moment", ["warm", "mid-validation"])
@pytest.mark.parametrize("ending", list(DAEMON_ENDINGS))
def test_daemon_leaves_nothing(faults: Faults, tmp_path: Path, ending: str, moment: str) -> None:
    """Ended once warm (a validation done: its runner, forkserver, spares and the standby runner up),
    or while a rank blocks in the forward with a grandchild in a new session."""
    cache = tmp_path / "cache"
    daemon = Daemon(faults, cache)
    daemon.initialize(_workspace(faults))
    if moment == "warm":
        daemon.warm("pair_potential", faults.tmpdir)
    else:
        daemon.validate("block")
        faults.wait_marker("grandchild", daemon.proc, timeout=120)  # type: ignore[arg-type]
    end, code = DAEMON_ENDINGS[ending]
    end(daemon)
    returned = faults.finish(daemon.proc, timeout=20)  # type: ignore[arg-type]
    if code is not None:
        assert returned == code, daemon.err.read_text()[-3000:]
    left = wait_nothing_left(faults.tmpdir, cache)
    assert not left, f"left behind after {ending} of the daemon: {left}"


CLI_ENDINGS = {
    "SIGTERM": (signal.SIGTERM, False, 143),
    "SIGHUP": (signal.SIGHUP, True, 129),
    "SIGINT": (signal.SIGINT, True, 130),
    "SIGKILL": (signal.SIGKILL, False, -9),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("ending", [*CLI_ENDINGS, "stdin-closed"])
def test_cli_leaves_nothing(faults: Faults, tmp_path: Path, ending: str) -> None:
    """The CLI stopped while a rank is in the forward (its spares and forkserver up); with its stdin
    closed it runs to its end."""
    cache = tmp_path / "cache"
    if ending == "stdin-closed":
        argv = [sys.executable, "-m", "distcheck", "validate", model("grandchild_returns"), "--world-size", "2"]
        argv += ["--device", "cpu", "--no-auto-fix", "--no-layer-diagnostic", "--timeout", "120"]
        proc = subprocess.Popen(
            argv,
            cwd=faults.work,
            env=faults.env(XDG_CACHE_HOME=str(cache)),
            stdin=subprocess.PIPE,
            stdout=open(faults.work / "cli.out", "w"),
            stderr=open(faults.work / "cli.err", "w"),
            text=True,
            start_new_session=True,
        )
        proc.name = "cli"  # type: ignore[attr-defined]
        faults.started.append(proc)
        assert proc.stdin is not None
        proc.stdin.close()
        assert faults.finish(proc, timeout=90) == 0, faults.stderr(proc)
    else:
        sig, to_group, code = CLI_ENDINGS[ending]
        proc = faults.cli(model("grandchild"), "--timeout", "120", XDG_CACHE_HOME=str(cache))
        faults.wait_marker("grandchild", proc)
        (os.killpg if to_group else os.kill)(proc.pid, sig)
        assert faults.finish(proc, timeout=20) == code, faults.stderr(proc)
    left = wait_nothing_left(faults.tmpdir, cache)
    assert not left, f"left behind after {ending} of the CLI: {left}"
    assert not own_leftovers()
