"""The validator options record (`distcheck.options`) and everything derived from it: package.json's
settings, the CLI flags, the pyproject keys, the editor settings, the library signatures and the one
check; per-output tolerances end to end; hints in the caller's words (the job layer)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from distcheck import cli, cli_args
from distcheck.jobs.devices import resolve_device
from distcheck.jobs.pyproject import load_targets
from distcheck.jobs.runner import _error
from distcheck.jobs.sample import load_sample
from distcheck.jobs.setup_errors import setup_error
from distcheck.jobs.target import Target
from distcheck.lsp.config import SETTING_KEYS, TargetInfo, read_settings
from distcheck.option_check import (
    ConfigError,
    OptionError,
    check_option,
    check_options,
    tolerance_of,
    unknown_tolerance_keys,
    with_default,
)
from distcheck.options import (
    CLI,
    EDITOR,
    EDITOR_SETTINGS,
    LIBRARY,
    OPTIONS,
    PYPROJECT,
    Vocabulary,
    option,
    option_values,
)
from distcheck.options_schema import SCHEMA_KEYS, setting_schema
from distcheck.rank_limits import check_rank_count, check_world_size
from distcheck.report import TraceReport
from distcheck.validate import trace_and_validate, validate_on_cpu
from distcheck.validate.diff import compare_outputs
from distcheck.validate.launched import validate_launched
from distcheck.validate.run_setup import ValidationRequest
from examples import pair_potential

ROOT = Path(__file__).resolve().parents[2]
PAIR = "examples.pair_potential:model_factory"

# --------------------------------------------------------------------------------------------------
# package.json against the record


def _settings() -> dict[str, Any]:
    package = json.loads((ROOT / "package.json").read_text())
    props: dict[str, Any] = package["contributes"]["configuration"]["properties"]
    return {k: v for k, v in props.items() if k.removeprefix("distcheck.").split(".")[0] not in EDITOR_SETTINGS}


def test_package_json_declares_every_option_and_nothing_else() -> None:
    assert sorted(_settings()) == sorted(f"distcheck.{o.setting}" for o in OPTIONS)
    assert set(SETTING_KEYS) == {o.setting for o in OPTIONS}


@pytest.mark.parametrize("o", OPTIONS, ids=[o.name for o in OPTIONS])
def test_package_json_setting_states_the_records_facts(o: Any) -> None:
    """Type, default, bound, enum and pattern of each setting are the record's; no fact the record lacks
    (a `maximum`, an enum) is declared."""
    declared = _settings()[f"distcheck.{o.setting}"]
    facts = {k: v for k, v in declared.items() if k in (*SCHEMA_KEYS, "maximum", "exclusiveMaximum")}
    assert facts == setting_schema(o)
    assert declared.get("description") or declared.get("markdownDescription")
    if o.choices:
        assert len(declared["enumDescriptions"]) == len(o.choices)


def test_the_settings_schema_accepts_what_check_option_accepts() -> None:
    """The package.json schema and `check_option` agree on valid and invalid values of every shape."""
    jsonschema = pytest.importorskip("jsonschema")
    cases: list[tuple[str, Any]] = [
        ("worldSize", 2),
        ("worldSize", 0),
        ("worldSize", 2.5),
        ("atol", 1e-6),
        ("atol", -1.0),
        ("atol", {"forces": 1e-4, "default": 1e-6}),
        ("atol", {"forces": -1.0}),
        ("atol", {"forces": "x"}),
        ("rtol", {"per_node": 0.0}),
        ("timeoutSec", 0),
        ("timeoutSec", 0.5),
        ("deadlineSec", None),
        ("deadlineSec", -1),
        ("device", "cuda:0,cuda:1"),
        ("device", "tpu"),
        ("device", "cuda:"),
        ("backend", "nccl"),
        ("backend", "mpi"),
        ("maxFixAttempts", -1),
        ("helperSampleEvery", 0),
        ("watchedHelperPackages", ["a.b"]),
        ("watchedHelperPackages", [1]),
        ("allowOversubscribe", "yes"),
    ]
    settings = _settings()
    for key, value in cases:
        schema = {k: v for k, v in settings[f"distcheck.{key}"].items() if k in SCHEMA_KEYS}
        schema_ok = jsonschema.Draft7Validator(schema).is_valid(value)
        try:
            check_option(SETTING_KEYS[key], value)
            check_ok = True
        except OptionError:
            check_ok = False
        assert schema_ok == check_ok, (key, value, schema_ok, check_ok)


# --------------------------------------------------------------------------------------------------
# the entry points derived from (or checked against) the record


@pytest.mark.parametrize("entry", [trace_and_validate, validate_on_cpu, validate_launched], ids=lambda f: f.__name__)
def test_library_keywords_are_the_records(entry: Any) -> None:
    params = inspect.signature(entry).parameters
    names = [n for n in params if n not in ("model_factory", "sample_batch", "progress", "spec")]
    launched = {"world_size"} if entry is validate_launched else set()  # a launched job's size is the launcher's
    expected = [o.name for o in OPTIONS if (o.library or o.name in params) and o.name not in launched]
    assert sorted(names) == sorted(expected)
    for name in names:
        o = option(name)
        default = params[name].default
        if o.name == "device":
            continue  # each entry point has its own device default (cuda:0, auto)
        assert default == o.default or (default is None and o.nullable), (entry.__name__, name, default)


def test_the_request_has_a_field_per_option() -> None:
    """The entry points hand their options on by the record's names (`option_values`): the request
    holds exactly those, beside the factory, the sample and the spec."""
    fields = [f.name for f in dataclasses.fields(ValidationRequest)]
    assert sorted(fields) == sorted(["model_factory", "sample_batch", "spec", *(o.name for o in OPTIONS)])
    assert option_values({"model_factory": PAIR, "progress": None, "world_size": 3, "atol": 0.1}) == {
        "atol": 0.1,
        "world_size": 3,
    }
    assert list(option_values({"atol": 0.1, "world_size": 3})) == ["world_size", "atol"]  # the record's order


class _Session:
    """A launched job's rank 0 without a job: two ranks on the CPU."""

    is_leader = True
    world_size = 2
    devices = ("cpu", "cpu")
    backend = "gloo"

    @classmethod
    def join(cls, **_: Any) -> _Session:
        return cls()

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize("entry", [trace_and_validate, validate_on_cpu, validate_launched], ids=lambda f: f.__name__)
def test_every_keyword_reaches_the_request(entry: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each entry point's keywords arrive in the request unchanged, its own defaults for those not given;
    what it fixes itself (the CPU's device and backend, a launched job's size, devices and backend) wins."""
    import distcheck.validate.api as api
    import distcheck.validate.launched as launched

    seen: list[ValidationRequest] = []
    for module in (api, launched):
        monkeypatch.setattr(module, "run_validation", lambda request, **_: seen.append(request))
    monkeypatch.setattr(api.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(launched, "GroupSession", _Session)
    params = inspect.signature(entry).parameters
    given = {"atol": 0.5, "max_fix_attempts": 3, "deadline_sec": 60.0, "watched_helper_packages": ["a.b"]}
    entry(PAIR, "sample", spec={"format": "distcheck-spec"}, **given)
    (request,) = seen
    assert (request.model_factory, request.sample_batch, request.spec) == (PAIR, "sample", {"format": "distcheck-spec"})
    fixed = {
        validate_on_cpu: {"device": "cpu", "backend": "gloo"},
        validate_launched: {"world_size": 2, "device": ("cpu", "cpu"), "backend": "gloo"},
    }.get(entry, {})
    for o in OPTIONS:
        expected = fixed[o.name] if o.name in fixed else given.get(o.name, params[o.name].default)
        assert getattr(request, o.name) == expected, o.name


def test_every_option_has_its_flag_and_the_flags_reach_the_options() -> None:
    parser = cli.build_parser()
    flags = set(cli_args._long_options(parser))
    for o in OPTIONS:
        assert o.flag in flags and (not o.cli_off or o.cli_off in flags)
    args = parser.parse_args(
        [
            *["validate", PAIR, "--world-size", "3", "--atol", "forces=1e-3", "--atol", "1e-6", "--rtol", "0.5"],
            *["--no-auto-fix", "--timeout", "7", "--watch", "a,b", "--watch", "c", "--allow-oversubscribe"],
        ]
    )
    assert cli_args.cli_options(args) == {
        "world_size": 3,
        "atol": {"forces": 1e-3, "default": 1e-6},
        "rtol": 0.5,
        "auto_fix": False,
        "timeout_sec": 7.0,
        "watched_helper_packages": ["a", "b", "c"],
        "allow_oversubscribe": True,
    }
    assert cli_args.cli_options(parser.parse_args(["validate", "--no-watch"]))["watched_helper_packages"] == []


@pytest.mark.parametrize("bad", ["forces=abc", "=1e-3", "abc", "forces="])
def test_a_bad_tolerance_flag_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", PAIR, "--atol", bad]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "argument --atol" in err and "Traceback" not in err and ("OUTPUT=number" in err or "name the output" in err)


# --------------------------------------------------------------------------------------------------
# the one check never raises anything but OptionError


@pytest.mark.parametrize(
    "options",
    [
        None,
        [("atol", 1e-5)],
        "atol=1",
        {1: 2},
        {("atol",): 1.0},
        {"atol": 10**400},
        {"timeout_sec": -(10**400)},
        {"atol": {"forces": math.nan}},
        {"atol": {"forces": True}},
        {"atol": {}},
        {"atol": {3: 1e-5}},
        {"atol": {"forces": [1e-5]}},
        {"rtol": object()},
        {"device": 3},
        {"backend": ["gloo"]},
        {"watched_helper_packages": "aimnet"},
        {"watched_helper_packages": [None]},
    ],
    ids=repr,
)
def test_check_options_raises_only_option_errors(options: Any) -> None:
    with pytest.raises(OptionError) as refused:
        check_options(options)
    assert refused.value.message and refused.value.hint and isinstance(refused.value, ValueError)


def test_valid_per_output_tolerances_pass_every_reader(tmp_path: Path) -> None:
    check_option("atol", {"forces": 0.0, "per_graph": 1e-3, "default": 1e-6})
    settings = read_settings({"atol": {"forces": 0, "default": 1e-6}, "rtol": 1e-3})
    assert settings.problems == [] and settings.options == {"atol": {"forces": 0.0, "default": 1e-6}, "rtol": 1e-3}
    (tmp_path / "pyproject.toml").write_text(
        '[tool.distcheck]\nfactory = "m.py:f"\natol = { forces = 1e-4, default = 1e-6 }\nrtol.energy = 0.0\n'
    )
    (target,) = load_targets(str(tmp_path / "pyproject.toml"))
    assert target.options == {"atol": {"forces": 1e-4, "default": 1e-6}, "rtol": {"energy": 0.0}}
    (tmp_path / "pyproject.toml").write_text('[tool.distcheck]\nfactory = "m.py:f"\n\natol = { forces = -1 }\n')
    with pytest.raises(OptionError) as refused:
        load_targets(str(tmp_path / "pyproject.toml"))
    assert refused.value.line == 4 and "atol must be a finite number >= 0, got forces=-1.0" in refused.value.message


def test_tolerance_lookup_name_then_kind_then_default() -> None:
    tol = with_default({"forces": 1.0, "per_graph": 2.0}, 3.0)
    assert [tolerance_of(tol, n, k) for n, k in [("forces", "per_node"), ("energy", "per_graph"), ("q", "global")]] == [
        1.0,
        2.0,
        3.0,
    ]
    assert with_default({"default": 5.0}, 3.0) == {"default": 5.0} and with_default(2, 3.0) == 2.0
    assert unknown_tolerance_keys({"force": 1.0, "per_node": 1.0, "default": 1.0}, {"forces": "per_node"}) == ["force"]


def test_compare_outputs_applies_each_outputs_tolerance() -> None:
    ref = {"energy": torch.tensor([1.0]), "forces": torch.ones(4, 3), "charges": torch.ones(4)}
    got = {"energy": torch.tensor([1.01]), "forces": torch.ones(4, 3) + 0.01, "charges": torch.ones(4) + 0.01}
    kinds = {"energy": "per_graph", "forces": "per_node", "charges": "per_node"}

    def passed(atol: Any, rtol: Any) -> dict[str, bool]:
        return {n: bool(v["passed"]) for n, v in compare_outputs(got, ref, kinds, atol, rtol).items()}

    assert passed(1e-5, 1e-4) == {"energy": False, "forces": False, "charges": False}
    assert passed(with_default({"forces": 0.1}, 1e-5), 1e-4) == {"energy": False, "forces": True, "charges": False}
    assert passed(with_default({"per_node": 0.1}, 1e-5), 1e-4) == {"energy": False, "forces": True, "charges": True}
    by_name_first = with_default({"per_node": 0.1, "charges": 0.0}, 1e-5)
    assert passed(by_name_first, 0.0) == {"energy": False, "forces": True, "charges": False}
    assert passed(1e-5, with_default({"energy": 0.1}, 0.0)) == {"energy": True, "forces": False, "charges": False}


@pytest.mark.procs
@pytest.mark.timeout(180)
def test_a_per_output_tolerance_changes_the_verdict_end_to_end(tmp_path: Path) -> None:
    """The same validation passes with the default tolerances and fails when only the energy's are 0
    (its distributed sum differs from the reference at round-off): the forces keep theirs."""
    batch = pair_potential.sample_batch()
    common: dict[str, Any] = {"auto_fix": False, "layer_diagnostic": False}
    strict = validate_on_cpu(
        pair_potential.model_factory, batch, atol={"energy": 0.0}, rtol={"per_graph": 0.0}, **common
    )
    best = strict.attempts[-1]
    assert strict.verdict == "failed", strict.next_action
    assert best.verdicts["energy"].status == "mismatch" and best.verdicts["forces"].passed
    assert strict.meta.atol == {"default": 1e-5, "energy": 0.0}
    assert strict.meta.rtol == {"default": 1e-4, "per_graph": 0.0}
    assert "energy" in strict.next_action.split("\n")[0]
    again = TraceReport.from_json(strict.to_json())
    assert again.meta.atol == strict.meta.atol and "energy (max abs" in again.render_text(color=False)
    relaxed = validate_on_cpu(pair_potential.model_factory, batch, atol={"forces": 1e-5}, **common)
    assert relaxed.verdict == "passed" and relaxed.meta.atol == {"default": 1e-5, "forces": 1e-5}
    with pytest.raises(OptionError, match=r"atol names 'energie'.*its outputs: energy, forces"):
        validate_on_cpu(pair_potential.model_factory, batch, atol={"energie": 0.0}, **common)


@pytest.mark.procs
@pytest.mark.timeout(180)
def test_cli_per_output_tolerance_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    report_path = tmp_path / "r.json"
    args = ["validate", PAIR, "--device", "cpu", "--no-auto-fix", "--no-layer-diagnostic", "-q"]
    code = cli.main([*args, "--atol", "energy=0", "--rtol", "energy=0", "--json", str(report_path)])
    assert code == cli.EXIT_FAILED
    report = json.loads(report_path.read_text())
    assert report["meta"]["atol"] == {"default": 1e-5, "energy": 0.0}


# --------------------------------------------------------------------------------------------------
# hints in the caller's words


VOCABULARIES = [CLI, EDITOR, LIBRARY, PYPROJECT]


def _speaks(words: Vocabulary, text: str) -> None:
    """`text` names options only as `words`' caller spells them."""
    if words is CLI:
        assert "distcheck." not in text and "=True" not in text
    elif words is EDITOR:
        assert " --" not in text and "(--" not in text
    elif words is LIBRARY:
        assert " --" not in text and "distcheck." not in text
    else:
        assert " --" not in text and "distcheck." not in text and "=True" not in text


@pytest.mark.parametrize("words", VOCABULARIES, ids=lambda w: w.style)
def test_rank_limit_hints_speak_the_callers_language(words: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    import distcheck.rank_limits as limits

    monkeypatch.setattr(limits, "usable_cores", lambda: 1)
    hints = []
    for call in (
        lambda: check_rank_count(1, words),
        lambda: check_world_size(3, [2], on_cpu=False, vocabulary=words),
        lambda: check_world_size(6, [100], on_cpu=True, vocabulary=words),
    ):
        with pytest.raises(OptionError) as refused:
            call()
        hints.append(refused.value.hint)
        _speaks(words, refused.value.hint)
    assert words.assign("allow_oversubscribe", True) in hints[2]
    assert words.assign("world_size", 2) in hints[0]


@pytest.mark.parametrize("words", VOCABULARIES, ids=lambda w: w.style)
def test_job_layer_hints_speak_the_callers_language(words: Vocabulary, tmp_path: Path) -> None:
    """Every shape of a sample or device mistake the job layer refuses, in each caller's words."""
    python_sample = Target(name=None, factory=PAIR, sample="examples.pair_potential:sample_batch")
    mistakes = [
        Target(name=None, factory=PAIR, sample=python_sample.sample, frames="0:2"),  # frames on a Python sample
        Target(name=None, factory=PAIR, sample=python_sample.sample, dtype="float16"),
        Target(name=None, factory=PAIR, sample=str(tmp_path / "gone.xyz"), sample_is_file=True),
        Target(name=None, factory="examples.structures:make_batch"),  # a module without sample_batch
    ]
    for target in mistakes:
        with pytest.raises(ConfigError) as refused:
            load_sample(target, pair_potential.model_factory, words)
        _speaks(words, refused.value.hint)
    for options in ({"device": "cpu", "backend": "nccl"}, {"device": "cpu,cpu", "world_size": 3}):
        with pytest.raises(ConfigError) as refused:
            resolve_device(dict(options), lambda _: None, words)
        _speaks(words, refused.value.hint)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError) as refused:
            resolve_device({"device": "cuda:0"}, lambda _: None, words)
        _speaks(words, refused.value.hint)
    known = setup_error(RuntimeError("CUDA error: no kernel image"), words)
    assert known is not None
    _speaks(words, known[1])


def test_the_runner_refuses_in_editor_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the runner sends back for a refusal names settings, never CLI flags (it used to say --dtype)."""
    import distcheck.rank_limits as limits
    from distcheck.jobs.runner import validate

    monkeypatch.setattr(limits, "usable_cores", lambda: 1)
    info = TargetInfo(name="pair", factory=PAIR, root=str(ROOT), spec=str(ROOT / "pair.distspec.json"))
    params = info.runner_params({"world_size": 6, "device": "cpu"}, None)
    assert set(params) == {"target", "spec"} and Target.from_wire(params["target"]).factory == PAIR
    with pytest.raises(OptionError) as refused:
        validate(params, lambda e, i: None)
    sent = _error(refused.value)
    assert sent["type"] == "ConfigError" and "distcheck.allowOversubscribe: true" in sent["hint"]
    assert "--" not in sent["hint"]


@pytest.mark.parametrize(
    "wire",
    [
        None,
        [],
        {"factory": ""},
        {"name": "x"},
        {"factory": PAIR, "trusted": True},
        {"factory": PAIR, "options": {"atol": -1}},
    ],
    ids=repr,
)
def test_a_target_off_the_wire_is_checked(wire: Any) -> None:
    with pytest.raises(ConfigError):
        Target.from_wire(wire)


@pytest.mark.parametrize("setting", EDITOR_SETTINGS)
def test_the_daemon_does_not_call_an_editor_setting_unknown(setting: str) -> None:
    """The extension's own settings reach the daemon with the rest; they are not validator options and
    not problems."""
    from distcheck.lsp.config import convert_options

    options, problems = convert_options({setting: "always"}, "distcheck.")
    assert options == {} and problems == []
