"""`distcheck validate TARGET`: validate a model from the terminal or CI.

TARGET is a factory reference (`path/file.py:factory` or `package.module:factory`), a `.py` file
defining `model_factory`, or the name of a target in `[tool.distcheck]` of the nearest
`pyproject.toml` (searched upwards from the current directory, or given with `--config`). Progress goes
to stderr one plain line per event; the report goes to stdout. Exit codes: 0 passed, 1 failed,
2 usage or setup error (and a report whose verdict is "error"), 3 inconclusive, 130 interrupted.

Targets and their configuration are read by `distcheck.targets` (see its docstring for the format).
The directory of the pyproject is put on `sys.path` too; with a factory reference on the command line
the current directory is (as `python -m` does).

Validator options (config key / flag): `world_size` (--world-size), `device` (--device), `atol`,
`rtol`, `auto_fix` (--no-auto-fix), `max_fix_attempts`, `backend`, `timeout_sec` (--timeout: one
run, i.e. the reference or one attempt's ranks), `deadline_sec` (--deadline: the whole validation),
`watched_helper_packages` (--watch / --no-watch), `helper_sample_every`, `layer_diagnostic`
(--no-layer-diagnostic), `allow_oversubscribe` (--allow-oversubscribe: more than 4 ranks per CPU
core). Flags win over the target's entry, which wins over the table's defaults. Every value is
checked before anything starts (NaN, inf or negative tolerances, a timeout or deadline that is not
a finite number > 0, more ranks than atoms of the sample's smallest system: exit code 2).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import socket
import sys
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TextIO

from . import __version__, importguard
from .report import tolerance_for
from .targets import (
    RANKS_PER_CORE,
    ConfigError,
    Target,
    check_options,
    find_config,
    is_path_reference,
    load_targets,
    read_table,
    sample_reference,
    select_target,
    target_from_reference,
)

if TYPE_CHECKING:
    from .report import TraceReport
    from .runtime.group import LauncherEnv

__all__ = [
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_INCONCLUSIVE",
    "EXIT_INTERRUPTED",
    "EXIT_PASSED",
    "ConfigError",
    "Target",
    "build_parser",
    "find_config",
    "junit_xml",
    "load_targets",
    "main",
]

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
EXIT_INCONCLUSIVE = 3
EXIT_INTERRUPTED = 130

_VERDICT_EXIT = {"passed": EXIT_PASSED, "failed": EXIT_FAILED, "error": EXIT_ERROR, "inconclusive": EXIT_INCONCLUSIVE}

_DISTCHECK_DIR = os.path.dirname(os.path.abspath(__file__))


def _resolve_target(args: argparse.Namespace) -> Target:
    """The target named by the command line (with the config's options when it comes from a config)."""
    cwd = os.getcwd()
    config = os.path.abspath(args.config) if args.config else None
    if config is not None and not os.path.isfile(config):
        raise ConfigError(f"config file {config} does not exist", "check the path given to --config")
    target: Target | None = None
    if args.target is not None:
        target = target_from_reference(args.target, cwd)
    if target is not None:
        if config is not None:  # a direct reference still takes the config's python_path and defaults
            table = read_table(config)
            target.python_path = list(table.python_path)
            target.options = dict(table.defaults)
            target.config = table.config
        target.python_path.append(cwd)
    else:
        if config is None:
            config = find_config(cwd)
        if config is None:
            raise ConfigError(
                f"{args.target!r} is not a factory reference and no pyproject.toml with [tool.distcheck] was "
                f"found from {cwd} upwards"
                if args.target is not None
                else f"no TARGET given and no pyproject.toml with [tool.distcheck] was found from {cwd} upwards",
                "give a factory reference such as 'path/file.py:model_factory' or 'package.module:model_factory', "
                "or point --config at a pyproject.toml that defines targets",
            )
        target = select_target(load_targets(config), args.target, config)
        target.python_path.append(target.root)
    if args.sample is not None:
        target.sample, target.sample_is_file = sample_reference(args.sample, cwd)
    if args.spec is not None:
        target.spec = os.path.abspath(os.path.expanduser(args.spec))
        target.spec_required = True
    return target


# --------------------------------------------------------------------------------------------------
# options


_VALUE_FLAGS = {
    "world_size": "world_size",
    "device": "device",
    "atol": "atol",
    "rtol": "rtol",
    "max_fix_attempts": "max_fix_attempts",
    "backend": "backend",
    "helper_sample_every": "helper_sample_every",
    "timeout": "timeout_sec",
    "deadline": "deadline_sec",
}
"""argparse destination → validator option (`distcheck.targets.OPTION_TYPES`) for flags that take a value."""
_SWITCHES = {
    "no_auto_fix": ("auto_fix", False),
    "no_layer_diagnostic": ("layer_diagnostic", False),
    "allow_oversubscribe": ("allow_oversubscribe", True),
}
"""argparse destination of a store_true flag → (validator option, the value it sets)."""


def _cli_options(args: argparse.Namespace) -> dict[str, Any]:
    """The validator options given as flags (unchecked: `check_options` runs on the merged options)."""
    out: dict[str, Any] = {}
    for dest, option in _VALUE_FLAGS.items():
        value = getattr(args, dest)
        if value is not None:
            out[option] = value
    for dest, (option, value) in _SWITCHES.items():
        if getattr(args, dest):
            out[option] = value
    if args.no_watch:
        out["watched_helper_packages"] = []
    elif args.watch:
        out["watched_helper_packages"] = [p.strip() for item in args.watch for p in item.split(",") if p.strip()]
    return out


# --------------------------------------------------------------------------------------------------
# output


class _Printer:
    """Plain progress and notice lines on stderr (no cursor tricks, so CI logs stay readable)."""

    def __init__(self, stream: TextIO, quiet: bool) -> None:
        self.stream = stream
        self.quiet = quiet
        self.t0 = time.perf_counter()

    def write(self, line: str, *, always: bool = False) -> None:
        if self.quiet and not always:
            return
        try:
            self.stream.write(line + "\n")
        except UnicodeEncodeError:
            enc = getattr(self.stream, "encoding", None) or "ascii"
            self.stream.write(line.encode(enc, "backslashreplace").decode(enc, "replace") + "\n")
        self.stream.flush()

    def notice(self, text: str) -> None:
        self.write(f"distcheck: {text}")

    def progress(self, event: str, info: Mapping[str, Any]) -> None:
        line = _progress_line(event, info)
        if line:
            self.write(f"[{time.perf_counter() - self.t0:6.1f}s] {line}")


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _progress_line(event: str, info: Mapping[str, Any]) -> str:
    if event == "reference_started":
        return "reference run…"
    if event == "reference_finished":
        seconds = info.get("seconds")
        return f"reference run finished ({seconds:.1f} s)" if isinstance(seconds, (int, float)) else "reference done"
    if event == "attempt_started":
        index = int(info.get("index", 0))
        rule = _one_line(info.get("rule") or "initial spec")
        rationale = _one_line(info.get("rationale") or "")
        return f"attempt {index + 1}/{info.get('total', '?')}: {rule}" + (f" — {rationale}" if rationale else "")
    if event == "rank_started":
        pid = info.get("pid")
        return f"rank {info.get('rank')} started" + (f" (pid {pid})" if pid is not None else "")
    if event == "rank_finished":
        code = info.get("exitcode")
        return f"rank {info.get('rank')} finished" + ("" if code in (0, None) else f" with exit code {code}")
    if event == "attempt_finished":
        index = int(info.get("index", 0))
        if info.get("passed"):
            return f"attempt {index + 1} passed"
        failing = [str(f) for f in info.get("failing") or []]
        return f"attempt {index + 1} failed" + (f" ({', '.join(failing)} out of tolerance)" if failing else "")
    if event == "finished":
        return "validation finished: " + ("ok" if info.get("ok") else "not ok")
    details = ", ".join(f"{k}={_one_line(v)}" for k, v in info.items())
    return f"{event}" + (f" ({details})" if details else "")


def _fmt(x: object) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return "-" if x is None else str(x)


def junit_xml(report: TraceReport, suite_name: str) -> ET.Element:
    """JUnit XML for CI (the `<testsuites>` root): one testsuite, one testcase per output of the best
    attempt (a `<failure>` with the abs/rel differences when it is out of tolerance), a `partition`
    testcase failing when the partition is degenerate, and a `run` testcase carrying the error when a
    run failed."""
    best = report.best_attempt
    classname = f"distcheck.{suite_name}"
    cases: list[ET.Element] = []
    meta = report.meta
    if best is not None:
        for name, v in best.verdicts.items():
            case = ET.Element("testcase", {"classname": classname, "name": name})
            if not v.passed:
                atol = tolerance_for(meta.get("atol"), name, v.kind)
                rtol = tolerance_for(meta.get("rtol"), name, v.kind)
                message = (
                    f"{name} ({v.kind}): {v.status}, max abs diff {_fmt(v.max_abs_diff)} (atol {_fmt(atol)}), "
                    f"max rel diff {_fmt(v.max_rel_diff)} (rtol {_fmt(rtol)}), "
                    f"{v.n_failing}/{v.n_total} elements out of tolerance"
                )
                failure = ET.SubElement(case, "failure", {"message": message, "type": v.status})
                details = [message]
                if v.worst_index is not None:
                    details.append(f"worst element at index {v.worst_index}")
                details.append(f"spec tried: {best.rationale}")
                failure.text = "\n".join(details)
            cases.append(case)
        partition = ET.Element("testcase", {"classname": classname, "name": "partition"})
        if best.degenerate:
            failure = ET.SubElement(
                partition,
                "failure",
                {"message": "degenerate partition: a pass proves nothing", "type": "degenerate"},
            )
            failure.text = "\n".join(best.degenerate)
        cases.append(partition)
        if best.error is not None or not best.verdicts:
            run = ET.Element("testcase", {"classname": classname, "name": "run"})
            if best.error is not None:
                e = best.error
                error = ET.SubElement(run, "error", {"message": _one_line(f"{e.type}: {e.message}"), "type": e.type})
                error.text = "\n".join(x for x in (e.hint, e.traceback) if x)
            else:
                ET.SubElement(run, "failure", {"message": "no outputs were compared", "type": "no-verdicts"})
            cases.append(run)
    else:
        run = ET.Element("testcase", {"classname": classname, "name": "run"})
        ET.SubElement(run, "error", {"message": "no attempt was made", "type": "error"})
        cases.append(run)
    failures = sum(1 for c in cases if c.find("failure") is not None)
    errors = sum(1 for c in cases if c.find("error") is not None)
    total = meta.get("timings", {}).get("total") if isinstance(meta.get("timings"), Mapping) else None
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": str(errors), "skipped": "0"}
    seconds = f"{float(total):.3f}" if isinstance(total, (int, float)) else "0"
    root = ET.Element("testsuites", {"name": "distcheck", **counts, "time": seconds})
    suite = ET.SubElement(
        root,
        "testsuite",
        {
            "name": classname,
            **counts,
            "time": seconds,
            "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
            "hostname": socket.gethostname(),
        },
    )
    properties = ET.SubElement(suite, "properties")
    props = {"verdict": report.verdict, "next_action": report.next_action.split("\n")[0]}
    for key in ("world_size", "device", "backend", "atol", "rtol", "factory"):
        if key in meta:
            props[key] = _one_line(meta[key])
    for key, value in props.items():
        ET.SubElement(properties, "property", {"name": key, "value": value})
    suite.extend(cases)
    out = ET.SubElement(suite, "system-out")
    out.text = report.render_text(color=False)
    ET.indent(root)
    return root


def _write_text(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


# --------------------------------------------------------------------------------------------------
# running


def _where_raised(exc: BaseException) -> str:
    """`" (at file:line in function)"` for the innermost frame outside distcheck, or ""."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_DISTCHECK_DIR)]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {f.filename}:{f.lineno} in {f.name})"


def _import(reference: str, what: str) -> Any:
    from .runtime.factory import FactoryError, load_object

    try:
        return load_object(reference)
    except FactoryError as err:
        raise ConfigError(f"{what}: {err}", "check the reference, the working directory and python_path") from err
    except Exception as exc:
        hint = "fix the error in that module (it is imported the same way in every rank)"
        if isinstance(exc, ModuleNotFoundError):
            hint = (
                f"{exc.name or 'that module'} is not importable here: install it, run from the project root, "
                "or list the directory that holds it in python_path under [tool.distcheck]"
            )
        raise ConfigError(
            f"importing the {what} {reference!r} raised {type(exc).__name__}: {exc}{_where_raised(exc)}", hint
        ) from exc


def _load_sample(target: Target, factory: Any) -> tuple[Any, dict[str, Any]]:
    """The sample batch and where it came from; `factory` is the loaded factory (its module's
    `sample_batch` is the default sample)."""
    from .batch import Batch, as_batch

    if target.sample_is_file:
        assert target.sample is not None
        try:
            return Batch.read(target.sample), {"file": target.sample}
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError(
                f"cannot read the sample structure file: {exc}", "give a structure file that ASE can read"
            ) from exc
    reference = target.sample
    if reference is None:
        module_ref = target.factory.rpartition(":")[0]
        if not hasattr(inspect.getmodule(factory), "sample_batch"):
            raise ConfigError(
                f"no sample for {target.label}: {module_ref} defines no sample_batch",
                "pass --sample (a structure file or 'path/file.py:callable'), add sample = ... to the target, "
                "or define sample_batch() next to the factory",
            )
        reference = f"{module_ref}:sample_batch"
    source = _import(reference, "sample")
    obj = source
    if callable(source) and not isinstance(source, type):
        try:
            obj = source()
        except Exception as exc:
            raise ConfigError(
                f"calling the sample {reference!r} raised {type(exc).__name__}: {exc}{_where_raised(exc)}",
                "fix the sample function (it is called with no arguments)",
            ) from exc
    try:
        batch = as_batch(obj)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"the sample {reference!r} is not a batch: {exc}",
            "return a distcheck.batch.Batch, an ase.Atoms or a list of them",
        ) from exc
    return batch, _source_of(source, reference)


def _source_of(obj: Any, reference: str) -> dict[str, Any]:
    info: dict[str, Any] = {"reference": reference, "qualname": reference.rpartition(":")[2]}
    try:
        target = inspect.unwrap(obj)
        file = inspect.getsourcefile(target)
        _, line = inspect.getsourcelines(target)
    except (TypeError, OSError):
        return info
    if file:
        info["file"] = os.path.abspath(file)
        info["line"] = int(line) if line else 1
    return info


def _resolve_device(options: dict[str, Any], printer: _Printer) -> str | list[str]:
    """`"cpu"`, a CUDA device string or one device per rank (from `cuda:0,cuda:1`, which also sets
    `world_size` when it is not given); `auto` becomes `cuda:0` when torch sees a GPU, else `"cpu"`
    (with a notice)."""
    import torch

    device = str(options.pop("device", "auto"))
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda:0"
        printer.notice("no GPU: validating on the CPU with gloo")
        return "cpu"
    if "," in device:
        devices = device.split(",")
        world_size = options.setdefault("world_size", len(devices))
        if world_size != len(devices):
            raise ConfigError(
                f"--device lists {len(devices)} devices but world_size is {world_size}",
                "give one device per rank, or leave out --world-size (the list sets it)",
            )
        return "cpu" if set(devices) == {"cpu"} else devices
    return device


def _prior_spec(target: Target, printer: _Printer) -> Any:
    """The spec to start from: the target's spec file when it exists (or was asked for), else None."""
    from .spec import MLIPSpec

    if target.spec is None:
        return None
    if os.path.exists(target.spec) or target.spec_required:
        return MLIPSpec.load(target.spec)
    printer.notice(
        f"spec file {target.spec} does not exist yet; starting from the wrapper's distribution_spec "
        f"(write it with --save-spec {os.path.relpath(target.spec)})"
    )
    return None


def _loaded_factory(target: Target) -> Any:
    factory = _import(target.factory, "factory")
    if not callable(factory):
        raise ConfigError(
            f"factory {target.factory!r} is a {type(factory).__name__}, not a callable",
            "point TARGET at a function that returns the model",
        )
    return factory


def _describe_target(report: TraceReport, target: Target, factory: Any, sample_info: dict[str, Any]) -> None:
    if report.target is None:
        report.target = {
            "name": target.name,
            "factory": _source_of(factory, target.factory),
            "sample": sample_info,
            "spec_path": target.spec,
            "config": target.config,
        }


def _validate(target: Target, options: dict[str, Any], printer: _Printer) -> TraceReport:
    from .validate import trace_and_validate, validate_on_cpu

    factory = _loaded_factory(target)
    batch, sample_info = _load_sample(target, factory)
    spec = _prior_spec(target, printer)
    device = _resolve_device(options, printer)
    kwargs = dict(options, progress=printer.progress, spec=spec)
    if device == "cpu":
        backend = kwargs.pop("backend", "auto")
        if backend == "nccl":
            raise ConfigError("backend nccl needs CUDA devices, but the device is cpu", "use --backend gloo or auto")
        report = validate_on_cpu(target.factory, batch, **kwargs)
    else:
        report = trace_and_validate(target.factory, batch, device=device, **kwargs)
    _describe_target(report, target, factory, sample_info)
    return report


def _launcher(choice: str) -> LauncherEnv | None:
    """Where this process sits in a launched job when the validation runs across it (`--launcher
    torchrun`, or `auto` with torchrun's variables set), else None (distcheck starts its own ranks)."""
    from .runtime.errors import SetupError
    from .runtime.group import launcher_env

    if choice == "local":
        return None
    try:
        env = launcher_env()
    except SetupError:
        if choice == "torchrun":
            raise
        return None  # `auto` with stray variables (a RANK exported for something else): run locally
    if env is None and choice == "torchrun":
        raise ConfigError(
            "--launcher torchrun, but RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are not set",
            "start it with torchrun, e.g. torchrun --nproc-per-node=2 -m distcheck validate TARGET",
        )
    return env


def _validate_launched(
    target: Target, options: dict[str, Any], printer: _Printer, job: LauncherEnv, cli_world_size: int | None
) -> TraceReport | None:
    """Every rank of a launched job runs this; rank 0 gets the report, the others None."""
    from .validate import validate_launched

    factory = _loaded_factory(target)
    batch: Any = None
    sample_info: dict[str, Any] = {}
    spec: Any = None
    if job.rank == 0:  # the sample and the prior spec travel from rank 0 with every attempt
        batch, sample_info = _load_sample(target, factory)
        spec = _prior_spec(target, printer)
    job_size = job.world_size
    world_size = options.pop("world_size", None)
    if world_size is not None and world_size != job_size:
        if cli_world_size is not None:
            raise ConfigError(
                f"--world-size {world_size} but the launcher started {job_size} ranks",
                "leave out --world-size under torchrun (the job's size is --nnodes × --nproc-per-node)",
            )
        printer.notice(f"world_size {world_size} from the config is replaced by the launcher's {job_size} ranks")
    text = str(options.pop("device", "auto"))
    device: str | list[str] = text.split(",") if "," in text else text
    report = validate_launched(target.factory, batch, device=device, progress=printer.progress, spec=spec, **options)
    if report is not None:
        _describe_target(report, target, factory, sample_info)
    return report


def _finish(report: TraceReport, target: Target, args: argparse.Namespace, printer: _Printer, out: TextIO) -> int:
    color = not args.no_color and "NO_COLOR" not in os.environ and bool(getattr(out, "isatty", lambda: False)())
    text = report.render_text(color=color)
    out.write(text.split("\n")[0] + "\n" if args.quiet else text)
    out.flush()
    code = _VERDICT_EXIT.get(report.verdict, EXIT_ERROR)
    args.report_written = True  # from here on a failure is about these files: no error report over them
    try:
        if args.json:
            _write_text(args.json, report.to_json(indent=True))
            printer.notice(f"wrote the report to {args.json}")
        if args.junit:
            root = junit_xml(report, target.name or _suite_name(target.factory))
            os.makedirs(os.path.dirname(os.path.abspath(args.junit)), exist_ok=True)
            ET.ElementTree(root).write(args.junit, encoding="utf-8", xml_declaration=True)
            printer.notice(f"wrote JUnit XML to {args.junit}")
        if args.save_spec:
            if report.verdict == "passed":
                _save_spec(report, args, printer)
            else:
                printer.notice(f"not saving the spec to {args.save_spec}: the validation {report.verdict}")
    except OSError as exc:
        raise ConfigError(f"cannot write {exc.filename}: {exc.strerror or exc}", "check the output path") from exc
    return code


def _save_spec_state(path: str | None) -> Any:
    """What the --save-spec file holds before the run (None without --save-spec), so that saving at the
    end can tell whether someone changed it meanwhile."""
    if not path:
        return None
    from .spec_file import FileState

    return FileState.of(path)


def _save_spec(report: TraceReport, args: argparse.Namespace, printer: _Printer) -> None:
    """Save the validated spec to --save-spec, minimally edited; if the file changed during the run it is
    left alone, the spec goes to a new file beside it, and the warning (shown even with --quiet) says where."""
    from .spec_file import FileState, save_guarded

    expected = getattr(args, "save_spec_state", None) or FileState.of(args.save_spec)
    outcome = save_guarded(report.spec, args.save_spec, expected)
    if outcome.conflict is None:
        printer.notice(outcome.message)
    else:
        printer.write(f"distcheck: warning: {outcome.message}", always=True)


def _error_report(
    args: argparse.Namespace, err: TextIO, error_type: str, message: str, hint: str, trace: str = ""
) -> None:
    """Write --json / --junit for a validation that ended in an error before it had a report (a setup
    error, a bug): CI always finds the files, with verdict "error" and the message shown on stderr. Not
    when the report's own files were being written (they are what failed), nor on a follower rank."""
    follower = bool(_rank_tag()) and os.environ.get("RANK") != "0"
    if not (args.json or args.junit) or getattr(args, "report_written", False) or follower:
        return
    from .report import Attempt, TraceReport, WorkerError
    from .spec import MLIPSpec

    error = WorkerError(
        type=error_type, message=message, rank=None, phase="setup", frames=[], hint=hint, traceback=trace
    )
    attempt = Attempt(
        index=0,
        spec=MLIPSpec(),
        rationale="setup: the validation did not start",
        rule=None,
        passed=False,
        max_abs_diff={},
        max_rel_diff={},
        verdicts={},
        handler_counts={},
        error=error,
        helper_diagnostics=[],
        layer_divergence=None,
        partition_health={"per_rank": {}, "degenerate": []},
        halo_completeness={},
        timings={},
    )
    meta = {"versions": {"distcheck": __version__}, "target": args.target}
    action = f"FAIL — {message}\nwhat to do: {hint}" if hint else f"FAIL — {message}"
    report = TraceReport(ok=False, spec=MLIPSpec(), attempts=[attempt], next_action=action, meta=meta)
    target = str(args.target or "distcheck")
    try:
        if args.json:
            _write_text(args.json, report.to_json(indent=True))
        if args.junit:
            root = junit_xml(report, _suite_name(target) if ":" in target else target)
            os.makedirs(os.path.dirname(os.path.abspath(args.junit)), exist_ok=True)
            ET.ElementTree(root).write(args.junit, encoding="utf-8", xml_declaration=True)
    except OSError as exc:
        _error(err, f"cannot write the error report {exc.filename}: {exc.strerror or exc}", "check the output path")


def _suite_name(reference: str) -> str:
    where, _, attr = reference.rpartition(":")
    stem = os.path.splitext(os.path.basename(where))[0] if is_path_reference(where) else where
    return f"{stem}.{attr}"


@dataclass
class _PathState:
    sys_path: list[str]
    pythonpath: str | None
    untrusted: list[str]


def _push_python_path(dirs: Sequence[str]) -> _PathState:
    """Put `dirs` first on `sys.path` (ranks inherit it) and on PYTHONPATH (processes they start),
    with the import guard on: the standard library, torch and distcheck never resolve to them."""
    importguard.install()
    state = _PathState(list(sys.path), os.environ.get("PYTHONPATH"), importguard.distrust(dirs))
    unique = list(dict.fromkeys(dirs))
    for d in reversed(unique):
        if d in sys.path:
            sys.path.remove(d)
        sys.path.insert(0, d)
    current = [p for p in (state.pythonpath or "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([*unique, *(p for p in current if p not in unique)])
    return state


def _pop_python_path(state: _PathState) -> None:
    sys.path[:] = state.sys_path
    importguard.restore(state.untrusted)
    if state.pythonpath is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = state.pythonpath


@contextlib.contextmanager
def _report_stream(out: TextIO) -> Iterator[TextIO]:
    """A stream on the real standard output for the report, with file descriptor 1 pointed at stderr
    meanwhile: whatever the model's packages print when this process imports them (and, under a
    launcher, while this process runs the model) must not end up inside the report."""
    try:
        out.flush()
        saved = os.dup(out.fileno())
    except (AttributeError, OSError, ValueError):  # not a real file (captured in tests): leave it be
        yield out
        return
    report = os.fdopen(os.dup(saved), "w", encoding=getattr(out, "encoding", None) or "utf-8", closefd=True)
    os.dup2(sys.stderr.fileno(), out.fileno())
    try:
        yield report
    finally:
        report.flush()
        out.flush()
        os.dup2(saved, out.fileno())
        os.close(saved)
        report.close()


def _cmd_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    args.save_spec_state = _save_spec_state(args.save_spec)  # first: edits made during the run must survive
    job = _launcher(args.launcher)
    printer = _Printer(err, args.quiet or (job is not None and job.rank != 0))  # rank 0 speaks for the job
    target = _resolve_target(args)
    options = {**target.options, **_cli_options(args)}
    check_options(options)
    state = _push_python_path(target.python_path)
    try:
        with _report_stream(out) as stream:
            if job is None:
                report = _validate(target, options, printer)
            else:
                launched = _validate_launched(target, options, printer, job, args.world_size)
                if launched is None:
                    return EXIT_PASSED  # a follower: rank 0 reports the verdict
                report = launched
            return _finish(report, target, args, printer, stream)
    finally:
        _pop_python_path(state)


# --------------------------------------------------------------------------------------------------
# command line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own usage errors, exit 2 like ours
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_ERROR)


def build_parser() -> argparse.ArgumentParser:
    """The `distcheck` argument parser."""
    parser = _Parser(
        prog="distcheck",
        description="Check that an interatomic potential gives the same answers domain-decomposed over ranks "
        "as in one process.",
    )
    parser.add_argument("--version", action="version", version=f"distcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    v = sub.add_parser(
        "validate",
        help="validate a model (exit 0 passed, 1 failed, 2 error, 3 inconclusive)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument(
        "target",
        nargs="?",
        metavar="TARGET",
        help="'path/file.py:factory', 'package.module:factory', a .py file defining model_factory, or a target "
        "name from [tool.distcheck] (optional when the config defines one target)",
    )
    v.add_argument(
        "--sample",
        metavar="SAMPLE",
        help="a structure file ASE can read (.xyz, .extxyz, .cif, ...) or 'path/file.py:callable_or_attr' / "
        "'package.module:attr' (default: the factory module's sample_batch)",
    )
    v.add_argument("--config", metavar="PATH", help="pyproject.toml to read targets from (default: nearest upwards)")
    g = v.add_argument_group("validator options")
    g.add_argument("--world-size", type=int, metavar="N", help="number of ranks (default 2)")
    g.add_argument(
        "--device",
        metavar="DEV",
        help="auto (cuda:0 when torch sees a GPU, else the CPU), cpu, cuda (one rank per GPU), cuda:N (every rank "
        "on GPU N) or one device per rank: cuda:0,cuda:1",
    )
    g.add_argument("--atol", type=float, metavar="X", help="absolute tolerance (default 1e-5)")
    g.add_argument("--rtol", type=float, metavar="X", help="relative tolerance (default 1e-4)")
    g.add_argument("--no-auto-fix", action="store_true", help="try the initial spec only")
    g.add_argument("--max-fix-attempts", type=int, metavar="N", help="auto-fix attempts after the first (default 8)")
    g.add_argument("--backend", choices=("auto", "gloo", "nccl"), help="collective backend (default auto)")
    g.add_argument(
        "--timeout",
        type=float,
        metavar="SEC",
        help="seconds one run (the single-process reference, or one attempt's ranks) may take before its "
        "processes are killed (default 120)",
    )
    g.add_argument(
        "--deadline",
        type=float,
        metavar="SEC",
        help="seconds the whole validation may take: past it no new attempt starts, each run gets at most what is "
        "left, and the report stands on the best attempt so far (default: no deadline)",
    )
    g.add_argument(
        "--watch",
        action="append",
        metavar="PKG",
        help="package whose helpers are traced (repeatable or comma-separated; replaces the default aimnet.nbops)",
    )
    g.add_argument("--no-watch", action="store_true", help="trace no third-party helpers")
    g.add_argument("--helper-sample-every", type=int, metavar="N", help="record every Nth helper call (default 8)")
    g.add_argument("--no-layer-diagnostic", action="store_true", help="skip the per-module divergence search")
    g.add_argument(
        "--allow-oversubscribe",
        action="store_true",
        help=f"on the CPU, start more than {RANKS_PER_CORE} ranks per core this process may use (refused otherwise)",
    )
    g.add_argument("--spec", metavar="PATH", help="prior spec file to start from")
    g.add_argument(
        "--launcher",
        choices=("auto", "local", "torchrun"),
        default="auto",
        help="local: distcheck starts the ranks on this machine; torchrun: this process is one rank of a job "
        "torchrun started (one node or many; see the README); auto (default): torchrun when its RANK, "
        "WORLD_SIZE, MASTER_ADDR and MASTER_PORT are set",
    )
    o = v.add_argument_group("output")
    o.add_argument("--json", metavar="FILE", help="write the report as JSON")
    o.add_argument("--junit", metavar="FILE", help="write JUnit XML (one testcase per output)")
    o.add_argument("--save-spec", metavar="FILE", help="save the validated spec when the validation passed")
    o.add_argument("--quiet", "-q", action="store_true", help="no progress; print only the verdict line")
    o.add_argument("--no-color", action="store_true", help="no ANSI colors (also: NO_COLOR set, or not a tty)")
    o.add_argument("--traceback", action="store_true", help=argparse.SUPPRESS)
    return parser


def _rank_tag() -> str:
    """` (rank N)` in a launched job of several ranks, where every rank writes to the same log."""
    rank, size = os.environ.get("RANK"), os.environ.get("WORLD_SIZE", "1")
    return f" (rank {rank})" if rank is not None and size.isdigit() and int(size) > 1 else ""


def _error(err: TextIO, message: str, hint: str = "") -> None:
    err.write(f"distcheck: error{_rank_tag()}: {message}\n")
    if hint:
        err.write(f"  what to do: {hint}\n")
    err.flush()


def _setup_error(exc: BaseException) -> tuple[str, str] | None:
    """`(message, hint)` for the errors that mean "cannot validate as asked", else None."""
    from .runtime.errors import SetupError
    from .runtime.factory import FactoryError
    from .spec import SpecError

    if isinstance(exc, SpecError):
        if exc.path == "$" and exc.line is None:
            return f"cannot use the spec: {exc.message}", "fix the path given to --spec (or spec = in the config)"
        where = f"{exc.file}:{exc.line}" if exc.file and exc.line else (exc.file or "the spec")
        return f"invalid spec in {where}: {exc}", "fix the spec file, or drop --spec to start from the wrapper's spec"
    if isinstance(exc, FactoryError):
        return str(exc), "check the factory reference; the factory must be a module-level function"
    if isinstance(exc, SetupError):
        return str(exc), "change the options (see distcheck validate --help)"
    if isinstance(exc, RuntimeError) and ("CUDA" in str(exc) or "cuda" in str(exc)):
        return str(exc), "use --device cpu (or auto) on a machine without a GPU"
    return None


class _Stopped(BaseException):
    """SIGTERM or SIGHUP in the CLI: raised like KeyboardInterrupt, so every `finally` on the way out
    runs (ranks and what they started killed, run directories removed) before the exit."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """While the command runs, the first SIGTERM or SIGHUP raises `_Stopped` in the main thread; one
    more while it cleans up exits at once (the warm pool then kills the ranks itself, see
    `runtime.lifeline`). The previous handlers are restored on the way out."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def handler(signum: int, frame: object) -> None:
        nonlocal stopping
        if stopping:
            os._exit(128 + signum)
        stopping = True
        raise _Stopped(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `distcheck` command line; returns the exit code (see the module docstring)."""
    out, err = sys.stdout, sys.stderr
    try:
        with _stop_signals():
            return _main(argv, out, err)
    except _Stopped as exc:
        name = _signal_name(exc.signum)
        with contextlib.suppress(OSError, ValueError):  # the terminal may be gone (SIGHUP)
            err.write(
                f"distcheck: stopped by {name}; the validation was cancelled, every process it started has ended "
                "and no report was written (run the command again for a verdict)\n"
            )
            err.flush()
        return 128 + exc.signum


def _main(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(list(argv) if argv is not None else None)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_ERROR)
        if args.command != "validate":
            parser.print_help(err)
            return EXIT_ERROR
        try:
            return _cmd_validate(args, out, err)
        except ConfigError as exc:
            if args.traceback:
                raise
            _error(err, exc.message, exc.hint)
            _error_report(args, err, "ConfigError", exc.message, exc.hint)
            return EXIT_ERROR
        except Exception as exc:
            if args.traceback:
                raise
            known = _setup_error(exc)
            if known is None:
                known = (
                    f"internal error: {type(exc).__name__}: {_one_line(exc)}{_where_raised(exc)}",
                    "rerun with --traceback for the full traceback and report it as a distcheck bug",
                )
            _error(err, *known)
            trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            _error_report(args, err, type(exc).__name__, *known, trace)
            return EXIT_ERROR
    except KeyboardInterrupt:
        err.write("distcheck: interrupted; the validation was stopped\n")
        err.flush()
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
