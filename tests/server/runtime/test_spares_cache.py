"""What spares import ahead: the installed packages a target's model imported (never the user's own
modules), per target, dropped whenever the environment or any file of a listed package changes (a
submodule edited in place included: the warm spares that imported it are replaced, so a validation
gives what a fresh process gives); and the first spec, kept with the environment variables read."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distcheck import memory
from distcheck.processes.spares import learned


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A private cache, one fake site directory with package `sparepkg_a`, and a user directory with
    module `spare_usermod` (both importable)."""
    site, user = tmp_path / "site", tmp_path / "user"
    (site / "sparepkg_a").mkdir(parents=True)
    (site / "sparepkg_a" / "__init__.py").write_text("from . import sub\nVALUE = 1\n")
    (site / "sparepkg_a" / "sub.py").write_text("SCALE = 1.0\n")
    user.mkdir()
    (user / "spare_usermod.py").write_text("import sparepkg_a\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DISTCHECK_SPARE_PACKAGES", raising=False)
    monkeypatch.setattr(memory, "site_dirs", lambda: [os.path.realpath(site)])
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(user))
    yield site, user
    for name in ("sparepkg_a", "sparepkg_a.sub", "sparepkg_b", "spare_usermod"):
        sys.modules.pop(name, None)


def _learn(target: str = "models/m.py:factory") -> list[str]:
    before = set(sys.modules)
    importlib.import_module("spare_usermod")  # the user's module, which imports an installed package
    learned.record(target, learned.third_party_since(before))
    return learned.packages_for(target)


def test_installed_packages_are_learned_the_user_s_modules_never(env: tuple[Path, Path]) -> None:
    assert _learn() == ["sparepkg_a"]
    assert learned.packages_for("models/other.py:factory") == []  # per target


def test_a_run_that_found_a_package_already_imported_keeps_it_learned(env: tuple[Path, Path]) -> None:
    assert _learn() == ["sparepkg_a"]
    # the next reference runs in a spare that imported sparepkg_a ahead: the model's import finds it loaded
    assert _learn() == ["sparepkg_a"]
    learned.record("models/m.py:factory", {})
    assert learned.packages_for("models/m.py:factory") == ["sparepkg_a"]  # not flipped back to nothing


def test_named_packages_come_after_the_learned_ones(env: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTCHECK_SPARE_PACKAGES", "mace, e3nn,,sparepkg_a")
    assert _learn() == ["sparepkg_a", "mace", "e3nn"]


def _bump(path: Path) -> None:
    later = time.time() + 5
    os.utime(path, (later, later))


def test_every_module_file_of_a_learned_package_is_stamped(env: tuple[Path, Path]) -> None:
    site, _ = env
    before = set(sys.modules)
    importlib.import_module("spare_usermod")
    found = learned.third_party_since(before)
    package = os.path.realpath(site / "sparepkg_a")
    assert set(found) == {"sparepkg_a"}
    assert sorted(found["sparepkg_a"]) == [os.path.join(package, "__init__.py"), os.path.join(package, "sub.py")]


@pytest.mark.parametrize(
    "change", ["package-file", "submodule", "install", "uninstall", "interpreter", "torch", "distcheck"]
)
def test_a_changed_environment_drops_what_was_learned(
    env: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    site, _ = env
    assert _learn() == ["sparepkg_a"]
    if change == "package-file":
        _bump(site / "sparepkg_a" / "__init__.py")  # upgraded in place
    elif change == "submodule":
        (site / "sparepkg_a" / "sub.py").write_text("SCALE = 2.0\n")  # edited in place, the top file as it was
        _bump(site / "sparepkg_a" / "sub.py")
    elif change == "install":
        (site / "sparepkg_b").mkdir()
        _bump(site)
    elif change == "uninstall":
        (site / "sparepkg_a" / "__init__.py").unlink()
    elif change == "interpreter":
        monkeypatch.setattr(sys, "executable", "/elsewhere/bin/python")
    else:
        real = memory.environment()
        other = {"torch": "9.9.9"} if change == "torch" else {"distcheck": "0.0.0-other"}
        monkeypatch.setattr(memory, "environment", lambda: {**real, **other})
    assert learned.packages_for("models/m.py:factory") == []


def test_a_broken_cache_file_means_nothing_learned(env: tuple[Path, Path]) -> None:
    path = Path(learned.cache_path())
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert learned.packages_for("models/m.py:factory") == []
    assert _learn() == ["sparepkg_a"]  # and it is rewritten whole


def test_the_fingerprint_reads_torchs_version_again_only_when_a_site_directory_changed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import importlib.metadata

    site = tmp_path / "site-packages"
    site.mkdir()
    reads: list[str] = []

    def version(name: str) -> str:
        reads.append(name)
        return f"2.{len(reads)}.0"

    monkeypatch.setattr(memory, "site_dirs", lambda: [str(site)])
    monkeypatch.setattr(importlib.metadata, "version", version)
    os.utime(site, ns=(1_000_000_000, 1_000_000_000))
    first = learned.fingerprint()
    assert learned.fingerprint() == first and reads == ["torch"]
    os.utime(site, ns=(2_000_000_000, 2_000_000_000))  # a package installed or removed
    changed = learned.fingerprint()
    assert reads == ["torch", "torch"]
    assert changed["torch"] == "2.2.0" and changed["site"] != first["site"]


# -- a package edited in place while the spares stay warm ----------------------------------------------

_MODEL = '''
import fakepkg_warm
from examples import pair_potential


class Shifted(pair_potential.PairPotential):
    """The pair potential plus fakepkg_warm.sub.OFFSET per row held: 0 is right, anything else counts
    the halo rows a rank holds, which the single process has not."""

    def forward(self, batch):
        out = super().forward(batch)
        rows = float(batch.positions.shape[0])
        return {"energy": out["energy"] + fakepkg_warm.sub.OFFSET * rows, "forces": out["forces"]}


def model_factory():
    model = pair_potential.model_factory()
    model.__class__ = Shifted
    return model
'''

_SCRIPT = """
import json, os, sys, time

from distcheck import validate_on_cpu
from distcheck.processes import spares
from examples.pair_potential import sample_batch

mode, model, sub, out = sys.argv[1:5]
batch = sample_batch()
VOLATILE = {"timings", "elapsed_sec", "peak_memory_bytes"}


def stable(value):
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def run():
    report = validate_on_cpu(model + ":model_factory", batch, world_size=2, timeout_sec=120, auto_fix=False)
    return json.loads(json.dumps(stable(report.to_dict()), default=str))


if mode == "warm":
    run()  # learns fakepkg_warm
    run()  # its spares import it ahead, and stay warm after it
    deadline = time.time() + 60
    while time.time() < deadline:  # until the kept spares have imported the package
        pool = spares.report()
        cpu = pool["devices"].get("cpu", {})
        if "fakepkg_warm" in pool["packages"] and cpu.get("warm", 0) >= 3 and cpu["warm"] == cpu["idle"]:
            assert not cpu.get("failed_imports"), cpu
            break
        time.sleep(0.2)
    else:
        sys.exit("the spares kept warm never imported the package: " + json.dumps(spares.report(), default=str))
    later = time.time() + 5
    with open(sub, "w") as fh:
        fh.write("OFFSET = 0.25  # edited in place\\n")
    os.utime(sub, (later, later))
with open(out, "w") as fh:
    json.dump(run(), fh)
"""


def _validate_in(mode: str, tmp_path: Path, cache: str) -> dict[str, Any]:
    """The report of the last validation `_SCRIPT` runs in a new interpreter: `warm`, after two
    validations with the spares kept warm and the package's submodule edited; `cold`, the only one."""
    root = Path(__file__).resolve().parents[3]
    site = _user_site(tmp_path)
    env = {
        **os.environ,
        "PYTHONUSERBASE": str(tmp_path / "userbase"),  # `site` then counts `site` among the site directories
        "PYTHONPATH": os.pathsep.join([str(site), str(root), str(root / "server")]),
        "XDG_CACHE_HOME": str(tmp_path / cache),
        "DISTCHECK_SPARES_KEEP_S": "120",
    }
    env.pop("DISTCHECK_SPARES", None)
    out = tmp_path / f"{mode}.json"
    script = tmp_path / "script.py"
    script.write_text(_SCRIPT)
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            mode,
            str(tmp_path / "project" / "model.py"),
            str(site / "fakepkg_warm" / "sub.py"),
            str(out),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def _user_site(tmp_path: Path) -> Path:
    """The user site directory `site` gives a process whose PYTHONUSERBASE is `<tmp_path>/userbase`:
    one of the installation's site directories, where an installed package may live."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return tmp_path / "userbase" / "lib" / version / "site-packages"


@pytest.mark.procs
@pytest.mark.timeout(600)
def test_a_submodule_edited_while_the_spares_stay_warm_gives_a_fresh_process_s_verdict(tmp_path: Path) -> None:
    """A package installed in a site directory (the user site of PYTHONUSERBASE), imported by the
    model; two validations in one process teach its spares to import it ahead, and they stay warm
    (DISTCHECK_SPARES_KEEP_S); its submodule is edited in place; the next validation in that process
    reports what a fresh process reports."""
    package = _user_site(tmp_path) / "fakepkg_warm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import sub\n")
    (package / "sub.py").write_text("OFFSET = 0.0\n")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "model.py").write_text(_MODEL)
    warm = _validate_in("warm", tmp_path, "cache-warm")
    cold = _validate_in("cold", tmp_path, "cache-cold")  # a fresh process on the edited package
    assert cold["ok"] is False, cold["next_action"]
    assert warm == cold, (warm["next_action"], cold["next_action"])


# -- the first spec, and the environment its reference read ----------------------------------------------


def test_the_first_spec_is_taken_only_while_the_variables_its_reference_read_are_as_they_were(
    env: tuple[Path, Path],
) -> None:
    spec = {"version": 1, "distribution": {}}
    learned.record_first_spec("m.py:f", "prior", spec, {"MODEL_DEPTH": "3", "UNSET_ONE": None})
    assert learned.first_spec_for("m.py:f", "prior", {"MODEL_DEPTH": "3"}) == spec
    assert learned.first_spec_for("m.py:f", "other prior", {"MODEL_DEPTH": "3"}) is None
    assert learned.first_spec_for("m.py:f", "prior", {"MODEL_DEPTH": "4"}) is None
    assert learned.first_spec_for("m.py:f", "prior", {"MODEL_DEPTH": "3", "UNSET_ONE": "x"}) is None
    assert learned.first_spec_for("m.py:f", "prior", {}) is None


def test_the_first_spec_takes_the_reads_noted_for_its_target(
    env: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    learned.note_env_reads("m.py:f", {"MODEL_DEPTH": "3"})
    learned.record_first_spec("m.py:f", "", {"version": 1})
    monkeypatch.setenv("MODEL_DEPTH", "3")
    assert learned.first_spec_for("m.py:f", "") == {"version": 1}
    monkeypatch.setenv("MODEL_DEPTH", "2")
    assert learned.first_spec_for("m.py:f", "") is None
