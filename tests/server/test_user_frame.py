"""The one user-frame rule (`runtime.frames`) on several shapes of error, and what carries it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from distcheck.jobs import runner
from distcheck.jobs.sample import import_object
from distcheck.runtime.errors import Frame, RankFailure
from distcheck.runtime.frames import exception_frames, is_user_file, user_frame_of


@pytest.fixture()
def project(tmp_path: Path) -> Iterator[Path]:
    """A project directory and a fake installed package (`site-packages/thirdparty`) on `sys.path`."""
    site = tmp_path / "venv" / "lib" / "site-packages"
    (site / "thirdparty").mkdir(parents=True)
    (site / "thirdparty" / "__init__.py").write_text("def boom(x):\n    raise ValueError('bad input')\n")
    root = tmp_path / "proj"
    root.mkdir()
    sys.path[:0] = [str(root), str(site)]
    before = set(sys.modules)
    yield root
    sys.path[:] = [p for p in sys.path if p not in (str(root), str(site))]
    for name in set(sys.modules) - before:
        del sys.modules[name]


def _raised(call: Callable[[], object]) -> BaseException:
    try:
        call()
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def _line(path: Path, text: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if text in t)


def test_syntax_error_in_the_model_file_is_its_own_line(project: Path) -> None:
    model = project / "model.py"
    model.write_text("import torch\n\n\ndef model_factory(:\n    pass\n")
    exc = _raised(lambda: import_object(f"{model}:model_factory", "factory"))
    assert user_frame_of(exc) == Frame(str(model), 4, "<module>")
    # no traceback frame is the model's: importlib's frames stay <frozen ...>, never a workspace path
    assert {f.file for f in exception_frames(exc) if is_user_file(f.file)} == {__file__}
    assert "<frozen" not in str(exc) and f"{model}:4" in str(exc)


def test_syntax_error_in_a_module_the_model_imports(project: Path) -> None:
    (project / "layers.py").write_text("def f(:\n")
    model = project / "model.py"
    model.write_text("import layers\n\ndef model_factory():\n    return None\n")
    exc = _raised(lambda: import_object(f"{model}:model_factory", "factory"))
    assert user_frame_of(exc) == Frame(str(project / "layers.py"), 1, "<module>")


def test_torch_op_error_is_the_users_line_not_torch(project: Path) -> None:
    model = project / "net.py"
    model.write_text(
        "import torch\n\ndef forward(x):\n    w = torch.zeros(4, 2)\n    return torch.mm(x, w)  # shapes clash\n"
    )
    net = import_object(f"{model}:forward", "factory")
    exc = _raised(lambda: net(torch.zeros(1, 3)))
    found = user_frame_of(exc)
    assert found is not None and (found.file, found.line) == (str(model), _line(model, "torch.mm"))


def test_error_inside_a_third_party_package_is_the_call_in_user_code(project: Path) -> None:
    model = project / "uses.py"
    model.write_text("import thirdparty\n\ndef run():\n    return thirdparty.boom(1)\n")
    run = import_object(f"{model}:run", "factory")
    exc = _raised(run)
    assert exception_frames(exc)[-1].file.endswith("__init__.py")  # raised in the package ...
    assert user_frame_of(exc) == Frame(str(model), 4, "run")  # ... the user's line is the call


def test_error_in_the_sample_file(project: Path) -> None:
    sample = project / "sample.py"
    sample.write_text("def sample_batch():\n    return {}['positions']\n")
    make = import_object(f"{sample}:sample_batch", "sample")
    exc = _raised(make)
    assert user_frame_of(exc) == Frame(str(sample), 2, "sample_batch")


def test_synthetic_and_library_files_are_never_the_users(project: Path) -> None:
    assert not is_user_file("<frozen importlib._bootstrap>")
    assert not is_user_file(str(project / "<frozen importlib._bootstrap>"))  # what abspath made of it
    assert not is_user_file(torch.__file__)
    assert not is_user_file(runner.__file__)
    assert not is_user_file(str(project / "missing.py"))
    (project / "real.py").write_text("")
    assert is_user_file(str(project / "real.py"))


def test_records_carry_the_frame(project: Path) -> None:
    model = project / "model.py"
    model.write_text("x = (\n")
    exc = _raised(lambda: import_object(f"{model}:x", "factory"))
    answer = runner._error(exc)
    assert answer["user_frame"] == {"file": str(model), "line": 1, "function": "<module>"}
    assert all("<frozen" not in f["file"] or f["file"].startswith("<") for f in answer["frames"])
    report = answer["report"]  # what replaces the editor's previous report
    assert report["verdict"] == "error" and report["attempts"][0]["error"]["user_frame"] == answer["user_frame"]
    frames = [Frame(str(model), 1, "f"), Frame(torch.__file__, 3, "g")]
    failure = RankFailure(rank=1, type="RuntimeError", message="m", phase="forward", frames=frames)
    assert failure.user_frame == frames[0]
