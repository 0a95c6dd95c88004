"""The editor's runner driven over its JSON-lines protocol as the daemon drives it (`lsp.runner_slot`):
a validation goes to the current runner unless it has exited or refuses the target (it serves one
target, `jobs.serving`), then to a fresh one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

import distcheck
from distcheck.jobs.serving import RETIRED_ERROR

SERVER = Path(distcheck.__file__).resolve().parents[1]


class Runners:
    """Runner processes started one after the other in `home`, with `env` added to this process's."""

    def __init__(self, home: Path, env: Mapping[str, str]) -> None:
        self.home, self.env = home, dict(env)
        self.proc: subprocess.Popen[str] | None = None
        self.started: list[subprocess.Popen[str]] = []
        self.next_id = 0

    def _start(self) -> None:
        env = dict(os.environ, PYTHONSAFEPATH="1", PYTHONPATH=str(SERVER), **self.env)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "distcheck.jobs.runner"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=self.home,
            env=env,
            start_new_session=True,
        )
        self.started.append(self.proc)

    def request(self, method: str, params: Any = None) -> dict[str, Any] | None:
        """The answer of the current runner, or None when it exited before answering."""
        proc = self.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        self.next_id += 1
        try:
            proc.stdin.write(json.dumps({"id": self.next_id, "method": method, "params": params}) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            return None
        while True:
            line = proc.stdout.readline()
            if not line:
                return None
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == self.next_id and "event" not in message:
                return message

    def validate(self, params: Mapping[str, Any]) -> tuple[dict[str, Any], int, list[dict[str, Any]]]:
        """(the answer, the pid of the runner that gave it, the refusals met on the way)."""
        refusals: list[dict[str, Any]] = []
        for _ in range(3):
            if self.proc is None or self.proc.poll() is not None:
                self._start()
                assert (self.request("ping") or {}).get("pong") is True
            assert self.proc is not None
            answer = self.request("validate", dict(params))
            if answer is not None and (answer.get("error") or {}).get("type") != RETIRED_ERROR:
                return answer, self.proc.pid, refusals
            if answer is not None:
                refusals.append(answer["error"])
            self.proc.wait(timeout=30)  # it refused the target: it exits
        raise AssertionError(f"no runner validated {params}: {refusals}")

    def close(self) -> None:
        """Close every runner's stdin (they exit), killing what does not exit within 30 s."""
        for proc in self.started:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                for child in psutil.Process(proc.pid).children(recursive=True):
                    child.kill()
                proc.kill()
                proc.wait()
