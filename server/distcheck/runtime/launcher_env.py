"""Where this process sits in a job started by a launcher (`torchrun`, or anything that sets the
`env://` variables), read from its environment, and whether the job is on this host's loopback
(`on_loopback`). No torch: the CLI asks before it imports torch, and starts its own processes at once
when no launcher started it."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import SetupError

__all__ = ["LauncherEnv", "launcher_env", "loopback_address"]

_REQUIRED = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class LauncherEnv:
    """Where this process sits in a launched job, read from the launcher's environment variables."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int


def launcher_env(environ: Mapping[str, str] | None = None) -> LauncherEnv | None:
    """The launcher's layout (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR`,
    `MASTER_PORT`, as torchrun sets them), or None when this process was not started by a launcher.
    Raises `SetupError` when only some of them are set or one is not a valid number."""
    env = os.environ if environ is None else environ
    present = [k for k in _REQUIRED if k in env]
    if not present:
        return None
    missing = [k for k in _REQUIRED if k not in env]
    if missing:
        raise SetupError(
            f"the launcher set {', '.join(present)} but not {', '.join(missing)}; start the validation with "
            "torchrun (which sets all of them) or set every one of RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT"
        )
    try:
        rank, world_size, port = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["MASTER_PORT"])
        local_rank = int(env.get("LOCAL_RANK", env["RANK"]))
        local_world_size = int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"]))
    except ValueError as exc:
        raise SetupError(f"a launcher variable is not a whole number ({exc}); check RANK, WORLD_SIZE, …") from None
    if world_size < 1 or not 0 <= rank < world_size or not 0 <= local_rank < local_world_size:
        raise SetupError(
            f"inconsistent launcher variables RANK={rank} WORLD_SIZE={world_size} LOCAL_RANK={local_rank} "
            f"LOCAL_WORLD_SIZE={local_world_size}; let torchrun set them"
        )
    return LauncherEnv(rank, world_size, local_rank, local_world_size, env["MASTER_ADDR"], port)


def loopback_address(host: str) -> str | None:
    """The loopback address `host` names (a loopback IP such as `127.0.0.1` or `::1`, or `localhost`),
    else None: the user named a host that others may reach (a host name that resolves to a loopback
    address here, as /etc/hosts often makes this host's own name, may be another's way to reach it).
    A job whose `MASTER_ADDR` is loopback runs on this host alone: its store and its backends listen
    on loopback only."""
    if host.lower().rstrip(".") in ("localhost", "localhost.localdomain"):
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return str(address) if address.is_loopback else None
