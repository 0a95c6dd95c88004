"""The daemon places errors at the frame the runner stored, a SyntaxError at its own line, and never
turns `<frozen importlib._bootstrap>` into a workspace path."""

from __future__ import annotations

from pathlib import Path

from distcheck.jobs import runner
from distcheck.jobs.sample import import_object
from distcheck.lsp import locate
from distcheck.lsp.config import read_disk
from distcheck.lsp.diagnostics import PlaceContext, runner_error_diagnostics


def _context(root: Path) -> PlaceContext:
    return PlaceContext(
        target="model.py",
        spec_path=str(root / "model.distspec.json"),
        spec_text=None,
        roots=[str(root)],
        search_dirs=[str(root)],
        read=read_disk,
        files=lambda: locate.iter_python_files([str(root)]),
        factory_file=str(root / "model.py"),
    )


def _answer(root: Path, source: str) -> dict[str, object]:
    (root / "model.py").write_text(source)
    try:
        import_object(f"{root / 'model.py'}:model_factory", "factory")
    except Exception as exc:
        return runner._error(exc)
    raise AssertionError("did not raise")


def test_syntax_error_lands_on_its_line_in_the_model_file(tmp_path: Path) -> None:
    answer = _answer(tmp_path, "import os\n\n\ndef model_factory(:\n    return None\n")
    frame = answer["user_frame"]
    assert isinstance(frame, dict)
    cause = answer["cause"]
    assert isinstance(cause, str)
    out = runner_error_diagnostics(
        "ConfigError", str(answer["message"]), "fix it", frame, _context(tmp_path), cause=cause
    )
    assert list(out) == [str(tmp_path / "model.py")]
    (d,) = out[str(tmp_path / "model.py")]
    assert d.code == "worker-error" and d.range.start.line == 3
    # at its own line the diagnostic says what the line raised; the whole error is beside it
    assert d.message == "SyntaxError: invalid syntax (model.py, line 4)"
    assert any("importing the factory" in r.message for r in d.related_information or [])


def test_an_error_raised_at_import_says_what_the_user_line_raised(tmp_path: Path) -> None:
    for source, line, words in (
        (
            "import os\n\nVALUE = undefined_name\n\ndef model_factory():\n    return None\n",
            2,
            "NameError: name 'undefined_name' is not defined",
        ),
        (
            "import not_a_module_anywhere\n\ndef model_factory():\n    return None\n",
            0,
            "ModuleNotFoundError: No module named 'not_a_module_anywhere'",
        ),
        (
            "def model_factory():\n    return None\n\nraise RuntimeError('broken\\nsecond line')\n",
            3,
            "RuntimeError: broken",
        ),
    ):
        answer = _answer(tmp_path, source)
        cause = answer["cause"]
        assert cause == words, cause
        out = runner_error_diagnostics(
            "ConfigError", str(answer["message"]), "fix it", answer["user_frame"], _context(tmp_path), cause=cause
        )
        (d,) = out[str(tmp_path / "model.py")]
        assert (d.range.start.line, d.message) == (line, words)


def test_a_synthetic_or_missing_frame_falls_back_to_the_factory(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("def model_factory():\n    return None\n")
    for frame in (
        {"file": str(tmp_path / "<frozen importlib._bootstrap>"), "line": 241, "function": "_call"},
        {"file": str(tmp_path / "gone.py"), "line": 3, "function": "f"},
        None,
    ):
        out = runner_error_diagnostics("ConfigError", "boom", "fix it", frame, _context(tmp_path))
        assert list(out) == [str(tmp_path / "model.py")], frame
