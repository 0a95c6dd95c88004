"""Command arguments through pygls' converter: typed, optional trailing ones may be left out, and a
bad one is a `-32602` error that says what to pass instead — never a traceback, never a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from distcheck.lsp import commands
from distcheck.lsp.commands import TargetArg, ValidateExtra

from .harness import copy_examples, lsp_session

CONVERTER = commands.converter_factory({"distcheck.validate": 3, "distcheck.cancel": 1})()


def _arguments(command: str, arguments: Any) -> list[Any] | None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "workspace/executeCommand"}
    message["params"] = {"command": command} if arguments is None else {"command": command, "arguments": arguments}
    request = CONVERTER.structure(message, types.ExecuteCommandRequest)
    args = request.params.arguments
    return None if args is None else list(args)


def test_left_out_trailing_arguments_arrive_as_null() -> None:
    assert _arguments("distcheck.validate", None) == [None, None, None]
    assert _arguments("distcheck.validate", []) == [None, None, None]
    assert _arguments("distcheck.validate", ["a"]) == ["a", None, None]
    assert _arguments("distcheck.cancel", []) == [None]
    assert _arguments("distcheck.validate", [1, 2, 3, 4]) == [1, 2, 3, 4], "extra arguments are the handler's to refuse"
    assert _arguments("someone.else", ["x"]) == ["x"] and _arguments("someone.else", None) is None


def test_arguments_are_structured_by_type() -> None:
    optional: Any = TargetArg | None  # as the handlers annotate it
    assert CONVERTER.structure("file:///w/m.py", optional) == TargetArg("file:///w/m.py")
    assert CONVERTER.structure(None, optional) is None
    extra = CONVERTER.structure({"worldSize": 3, "atol": 1e-6}, ValidateExtra)
    assert extra.overrides == {"world_size": 3, "atol": 1e-6} and extra.confirmed == ()
    both = CONVERTER.structure({"confirmOutsideWorkspace": ["/o/a.py"], "rtol": 0.5}, ValidateExtra)
    assert both.confirmed == ("/o/a.py",) and both.overrides == {"rtol": 0.5}


BAD: list[tuple[type, Any, str]] = [
    (TargetArg, 5, "the target must be a string"),
    (TargetArg, True, "the target must be a string"),
    (TargetArg, {"name": "a"}, "the target must be a string"),
    (TargetArg, ["a"], "the target must be a string"),
    (ValidateExtra, "fast", "an object of option overrides"),
    (ValidateExtra, 3, "an object of option overrides"),
    (ValidateExtra, [{"atol": 1}], "an object of option overrides"),
    (ValidateExtra, {"confirmOutsideWorkspace": "/o/a.py"}, "confirmOutsideWorkspace takes a list of paths"),
    (ValidateExtra, {"confirmOutsideWorkspace": [1]}, "confirmOutsideWorkspace takes a list of paths"),
    (ValidateExtra, {"worldSize": 0}, "override worldSize: world_size must be at least 1"),
    (ValidateExtra, {"wordSize": 2}, "override wordSize is not a distcheck option"),
]


@pytest.mark.parametrize(("kind", "value", "words"), BAD)
def test_a_bad_argument_says_what_to_pass(kind: type, value: Any, words: str) -> None:
    with pytest.raises(ValueError) as raised:
        CONVERTER.structure(value, kind)
    assert words in str(raised.value)


REFUSED: list[tuple[tuple[Any, ...], str]] = [
    (("distcheck.validate", 5), "the target must be a string"),
    (("distcheck.validate", {"worldSize": 2}), "the target must be a string"),
    (("distcheck.validate", "pair_potential", "fast"), "an object of option overrides"),
    (("distcheck.validate", "pair_potential", {"confirmOutsideWorkspace": "/o"}), "list of paths"),
    (("distcheck.validate", "pair_potential", {}, {}, {}), "1 argument(s) too many"),
    (("distcheck.validate",), "several targets"),
    (("distcheck.cancel", 5), "the target must be a string"),
    (("distcheck.cancel", "pair_potential", "mpnn"), "distcheck.cancel takes [target?: string]"),
    (("distcheck.saveSpec", ["pair_potential"]), "the target must be a string"),
    (("distcheck.saveSpec",), "no target has been validated yet"),
    (("distcheck.saveSpec", "pair_potential", 1), "distcheck.saveSpec takes [target?: string]"),
]


@pytest.mark.procs
@pytest.mark.asyncio
@pytest.mark.timeout(90)
async def test_bad_command_arguments_are_clear_errors_and_start_nothing(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    async with lsp_session(ws) as s:
        for (command, *args), words in REFUSED:
            with pytest.raises(JsonRpcException) as refused:
                await s.command(command, *args)
            err = refused.value
            assert err.code == -32602 and words in err.message, (command, args, err.message)
            assert "Traceback" not in err.message and not err.data, (command, args, err.data)
        assert await s.command("distcheck.cancel") == {"cancelled": []}
        assert await s.command("distcheck.cancel", None) == {"cancelled": []}
        info = await s.debug_info()
        assert info["runs"] == {} and info["runner"] is None, "no refused command started anything"
