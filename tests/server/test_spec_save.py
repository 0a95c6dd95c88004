"""Saving a spec never loses a user's edit: minimal edits of hand-formatted files, and no overwrite of a
file that changed since it was read (library and `distcheck validate --save-spec`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distcheck
from distcheck import cli
from distcheck.spec import CustomOp, Distribution, HelperAdapter, MLIPSpec, Policy
from distcheck.spec import file as spec_file
from distcheck.spec.file import FileState, SpecConflict, beside_path, save_guarded, spec_text_over
from distcheck.spec.jsontext import Node, find, parse

ROOT = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------ hand-formatted specs

FIVE_LINES = """{
  "format": "distcheck-spec", "version": 1,
  "distribution": {"policy": {"scatter_mode": "local"}},
  "output_kinds": {"energy": "per_graph", "forces": "per_node"}
}
"""

_FULL = {
    "format": "distcheck-spec",
    "version": 1,
    "distribution": {
        "policy": {"kind": "halo", "scatter_mode": "halo_correction", "gather_mode": "halo_read", "halo_width": None},
        "custom_ops": [{"op": "mylib::fused", "arg_transforms": {"0": "gather_inputs"}, "output_transforms": {}}],
        "third_party_helpers": [],
    },
    "system_reductions": True,
    "output_kinds": {"energy": "per_graph", "forces": "per_node"},
    "all_reduce_outputs": [],
    "owned_only_outputs": [],
}

SHAPES: dict[str, str] = {
    "five_lines": FIVE_LINES,
    "compact_one_line": json.dumps(
        {"format": "distcheck-spec", "version": 1, "output_kinds": {"energy": "per_graph"}}, separators=(",", ":")
    ),
    "two_space": json.dumps(_FULL, indent=2) + "\n",
    "four_space": json.dumps(_FULL, indent=4) + "\n",
    "tabs": json.dumps(_FULL, indent="\t") + "\n",
    "crlf": FIVE_LINES.replace("\n", "\r\n"),
    "crlf_expanded": (json.dumps(_FULL, indent=2) + "\n").replace("\n", "\r\n"),
    "unusual_key_order": """{
    "output_kinds": {"forces": "per_node", "energy": "per_graph"},
    "version": 1,
    "distribution": {
        "policy": {"halo_width": 6.0, "scatter_mode": "halo_correction", "kind": "halo"}
    },
    "format": "distcheck-spec"
}
""",
    "nested_inline_and_expanded": """{"format": "distcheck-spec", "version": 1,
 "distribution": {
   "policy": {"scatter_mode": "halo_correction"},
   "custom_ops": [
     {"op": "mylib::fused", "arg_transforms": {"0": "gather_inputs"}}
   ]
 },
 "output_kinds": {"energy": "per_graph"}}""",
    "no_trailing_newline": json.dumps(_FULL, indent=2),
    "unicode": """{
  "format": "distcheck-spec",
  "version": 1,
  "output_kinds": {"énergie": "per_graph", "\\u529b": "per_node", "\U0001f600": "global"}
}
""",
    "bom": "\ufeff" + FIVE_LINES,
}


def _set_scatter(spec: MLIPSpec) -> list[tuple[Any, ...]]:
    policy = spec.distribution.policy
    policy.scatter_mode = "local" if policy.scatter_mode == "halo_correction" else "halo_correction"
    return [("distribution", "policy", "scatter_mode")]


def _set_halo_width(spec: MLIPSpec) -> list[tuple[Any, ...]]:
    spec.distribution.policy.halo_width = 7.25
    return [("distribution", "policy", "halo_width")]


def _add_output_kind(spec: MLIPSpec) -> list[tuple[Any, ...]]:
    spec.output_kinds["stress"] = "per_graph"
    return [("output_kinds", "stress")]


def _append_reduced(spec: MLIPSpec) -> list[tuple[Any, ...]]:
    spec.all_reduce_outputs.append("stress")
    return [("all_reduce_outputs",)]


def _no_system_reductions(spec: MLIPSpec) -> list[tuple[Any, ...]]:
    spec.system_reductions = False
    return [("system_reductions",)]


def _declare_helper(spec: MLIPSpec) -> list[tuple[Any, ...]]:
    spec.distribution.third_party_helpers.append(HelperAdapter("reduction", "examples.thirdparty.nbops", "mol_sum"))
    return [("distribution", "third_party_helpers")]


def _change_custom_op(spec: MLIPSpec) -> list[tuple[Any, ...]]:
    if spec.distribution.custom_ops:
        spec.distribution.custom_ops[0].arg_transforms["0"] = "slice_owned"
        return [("distribution", "custom_ops", 0, "arg_transforms", "0")]
    spec.distribution.custom_ops.append(CustomOp("mylib::other"))
    return [("distribution", "custom_ops")]


def _drop_output_kind(spec: MLIPSpec) -> list[tuple[Any, ...]]:
    name = next(iter(spec.output_kinds))
    del spec.output_kinds[name]
    return [("output_kinds",)]


MUTATIONS: dict[str, Callable[[MLIPSpec], list[tuple[Any, ...]]]] = {
    "set_scatter_mode": _set_scatter,
    "add_halo_width": _set_halo_width,
    "add_output_kind": _add_output_kind,
    "append_all_reduce_output": _append_reduced,
    "system_reductions_off": _no_system_reductions,
    "declare_helper": _declare_helper,
    "change_custom_op": _change_custom_op,
    "drop_output_kind": _drop_output_kind,
}


def _allowed_span(text: str, root: Node, path: tuple[Any, ...]) -> tuple[int, int]:
    """The span of `text` a change at `path` may touch: the value there when it exists, else the insertion
    point in the deepest existing container on the way (after its last member, up to its closing bracket)."""
    node = find(root, list(path))
    if node is not None:
        return node.start, node.end
    for depth in range(len(path) - 1, -1, -1):
        container = find(root, list(path[:depth]))
        if container is not None:
            children = [m.value for m in container.members] or container.items
            return (children[-1].end if children else container.start), container.end
    return 0, len(text)


def _changed_region(old: str, new: str) -> tuple[int, int]:
    """[start, end) of `old` outside the common prefix and suffix of `old` and `new`."""
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    q = 0
    while q < min(len(old), len(new)) - p and old[len(old) - 1 - q] == new[len(new) - 1 - q]:
        q += 1
    return p, len(old) - q


def _write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8"))


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_saving_an_unchanged_spec_leaves_the_file_alone(shape: str, tmp_path: Path) -> None:
    path = tmp_path / "m.distspec.json"
    _write(path, SHAPES[shape])
    before = os.stat(path)
    assert MLIPSpec.load(path).save(path) is False
    assert _read(path) == SHAPES[shape]
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), "nothing may be written"


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_save_over_a_hand_formatted_spec_changes_only_the_changed_members(
    shape: str, mutation: str, tmp_path: Path
) -> None:
    old = SHAPES[shape]
    path = tmp_path / "m.distspec.json"
    _write(path, old)
    os.chmod(path, 0o640)
    spec = MLIPSpec.load(path)
    paths = MUTATIONS[mutation](spec)
    assert spec.save(path) is True
    new = _read(path)
    assert MLIPSpec.load(path) == spec
    # every byte outside the changed members (their values, or the object or array they go into) is kept
    (path_changed,) = paths
    lo, hi = _allowed_span(old, parse(old.removeprefix("\ufeff")), path_changed)
    lo, hi = (lo + 1, hi + 1) if old.startswith("\ufeff") else (lo, hi)
    start, end = _changed_region(old, new)
    assert lo <= start and end <= hi, (old, new)
    # the file's own conventions survive
    assert new.startswith("\ufeff") == old.startswith("\ufeff")
    assert new.endswith("\n") == old.endswith("\n")
    if "\r\n" in old:
        assert "\n" not in new.replace("\r\n", ""), "a CRLF file keeps CRLF line endings"
    if "\n" not in old:
        assert "\n" not in new, "a one-line spec stays on one line"
    if shape == "tabs":
        assert all(not line.startswith(" ") for line in new.splitlines()), "a tab-indented file stays tab-indented"
    if shape == "five_lines" and mutation in ("set_scatter_mode", "add_halo_width", "add_output_kind"):
        assert new.count("\n") == old.count("\n") == 5, new
    if shape == "unicode":
        assert '"\\u529b"' in new, "an escaped key stays as written"
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.distspec.json"], "no temp file is left"


def test_issue_five_line_spec_stays_five_lines(tmp_path: Path) -> None:
    """The report of issue 12: a 5-line spec saved back became the 21-line canonical form."""
    path = tmp_path / "m.distspec.json"
    _write(path, FIVE_LINES)
    spec = MLIPSpec.load(path)
    spec.distribution.policy.halo_width = 9.0
    spec.save(path)
    assert _read(path) == FIVE_LINES.replace('"local"}', '"local", "halo_width": 9.0}')


def test_new_files_and_files_that_are_not_json_objects_get_the_pretty_form(tmp_path: Path) -> None:
    spec = MLIPSpec(system_reductions=False)
    new = tmp_path / "deep" / "new.distspec.json"
    assert spec.save(new) is True and _read(new) == spec.to_json()
    for junk in ("not json {", "[1, 2]", "", "\xff"):
        path = tmp_path / "junk.json"
        path.write_bytes(junk.encode("latin-1"))
        spec.save(path)
        assert _read(path) == spec.to_json()


def test_save_through_a_symlink_edits_the_target_minimally(tmp_path: Path) -> None:
    real = tmp_path / "real.distspec.json"
    _write(real, FIVE_LINES)
    link = tmp_path / "link.distspec.json"
    link.symlink_to(real)
    spec = MLIPSpec.load(link)
    spec.system_reductions = False
    spec.save(link)
    assert link.is_symlink() and MLIPSpec.load(real) == spec
    assert _read(real).startswith(FIVE_LINES[: FIVE_LINES.rindex("}")].rstrip())


_names = st.sampled_from(["energy", "forces", "stress", "charges", "énergie", "力", "a b", 'q"uote'])
_idents = st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True)


@st.composite
def _specs(draw: st.DrawFn) -> MLIPSpec:
    kinds = draw(st.dictionaries(_names, st.sampled_from(["per_node", "per_graph", "global"]), max_size=4))
    return MLIPSpec(
        distribution=Distribution(
            policy=Policy(
                scatter_mode=draw(st.sampled_from(["halo_correction", "local"])),
                halo_width=draw(st.none() | st.floats(0.5, 20.0) | st.integers(1, 30)),
            ),
            custom_ops=draw(
                st.lists(
                    st.builds(
                        CustomOp,
                        op=st.tuples(_idents, _idents).map("::".join),
                        arg_transforms=st.dictionaries(st.sampled_from(["0", "1"]), st.just("gather_inputs")),
                    ),
                    unique_by=lambda o: o.op,
                    max_size=2,
                )
            ),
            third_party_helpers=draw(
                st.lists(
                    st.builds(
                        HelperAdapter,
                        kind=st.just("reduction"),
                        module_path=_idents,
                        attr_name=_idents,
                        atom_dim=st.integers(0, 2),
                    ),
                    unique_by=lambda h: h.qualname,
                    max_size=2,
                )
            ),
        ),
        system_reductions=draw(st.booleans()),
        output_kinds=kinds,
        all_reduce_outputs=draw(st.lists(_names, unique=True, max_size=3)),
    )


def _sparse(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` written by hand: only what differs from the defaults."""
    default = MLIPSpec().to_dict()
    out = {k: v for k, v in doc.items() if k in ("format", "version") or v != default[k]}
    if "distribution" in out:
        dist = {k: v for k, v in out["distribution"].items() if v != default["distribution"][k]}
        if "policy" in dist:
            dist["policy"] = {k: v for k, v in dist["policy"].items() if v != default["distribution"]["policy"][k]}
        out["distribution"] = dist
    return out


_STYLES: dict[str, Callable[[dict[str, Any]], str]] = {
    "compact": lambda d: json.dumps(d, ensure_ascii=False, separators=(",", ":")),
    "four": lambda d: json.dumps(d, ensure_ascii=False, indent=4) + "\n",
    "tabs": lambda d: json.dumps(d, ensure_ascii=False, indent="\t"),
    "crlf": lambda d: (json.dumps(d, ensure_ascii=False, indent=2) + "\n").replace("\n", "\r\n"),
    "sparse": lambda d: json.dumps(_sparse(d), ensure_ascii=False, indent=1) + "\n",
    "sparse_compact": lambda d: json.dumps(_sparse(d), ensure_ascii=True),
}


@settings(max_examples=150, deadline=None)
@given(old=_specs(), new=_specs(), style=st.sampled_from(sorted(_STYLES)))
def test_any_spec_saved_over_any_hand_formatted_spec_reads_back_and_keeps_the_style(
    old: MLIPSpec, new: MLIPSpec, style: str
) -> None:
    text = _STYLES[style](old.to_dict())
    out = spec_text_over(new, text.encode("utf-8"))
    assert MLIPSpec.from_json(out) == new
    assert spec_text_over(old, text.encode("utf-8")) == text, "saving what the file already means changes nothing"
    # the minimal edit was used (the pretty fallback would break these)
    if style in ("compact", "sparse_compact"):
        assert "\n" not in out
    if style == "tabs":
        assert not any(line.startswith(" ") for line in out.splitlines())
    if style == "crlf":
        assert "\n" not in out.replace("\r\n", "")
    if style.startswith("sparse"):
        assert ('"gather_mode"' in out) == ('"gather_mode"' in text), "defaults the file leaves out stay out"


@pytest.mark.parametrize("where", ["f/x.json", "f/a/b/x.json"])
def test_save_under_a_file_names_the_file_in_the_way(where: str, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("user data")
    with pytest.raises(NotADirectoryError) as info:
        MLIPSpec().save(tmp_path / where)
    assert info.value.strerror is not None and f"{tmp_path / 'f'} is a file" in info.value.strerror
    assert [p.name for p in tmp_path.iterdir()] == ["f"] and (tmp_path / "f").read_text() == "user data"


def test_save_over_a_directory_refuses_and_leaves_it(tmp_path: Path) -> None:
    (tmp_path / "d.json").mkdir()
    (tmp_path / "d.json" / "keep").write_text("user data")
    with pytest.raises(IsADirectoryError):
        MLIPSpec().save(tmp_path / "d.json")
    assert _snapshot(tmp_path) == {"d.json": "<dir>", "d.json/keep": b"user data"}


# ------------------------------------------------------------------ changed since it was read

# the user's edit declares another output: a spec of their own, not the one a run would save
_USER_EDIT = (
    FIVE_LINES.replace('"local"', '"halo_correction"')
    .replace("{\n", "{\n  \n", 1)
    .replace('"per_node"}', '"per_node", "virial": "per_graph"}')
)


def _change_content(path: Path) -> None:
    _write(path, _USER_EDIT)


def _change_same_size_same_mtime(path: Path) -> None:
    st = os.stat(path)
    text = _read(path)
    _write(path, text.replace('"energy"', '"enerGY"'))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _delete(path: Path) -> None:
    path.unlink()


def _to_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "keep.txt").write_text("user data")


def _to_symlink(path: Path) -> None:
    other = path.with_name("other.json")
    _write(other, _USER_EDIT)
    path.unlink()
    path.symlink_to(other)


CHANGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "content": (_change_content, "was changed on disk"),
    "same_size_and_mtime": (_change_same_size_same_mtime, "was changed on disk"),
    "deleted": (_delete, "was deleted"),
    "directory": (_to_directory, "was replaced by a directory"),
    "symlink": (_to_symlink, "was replaced by a symbolic link"),
}


def _snapshot(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = ("-> " + os.readlink(p)) if p.is_symlink() else ("<dir>" if p.is_dir() else p.read_bytes())
    return out


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_save_refuses_a_file_changed_since_it_was_read(change: str, tmp_path: Path) -> None:
    path = tmp_path / "m.distspec.json"
    _write(path, FIVE_LINES)
    state = FileState.of(path)
    spec = MLIPSpec.load(path)
    spec.system_reductions = False
    mutate, reason = CHANGES[change]
    mutate(path)
    before = _snapshot(tmp_path)
    with pytest.raises(SpecConflict) as info:
        spec.save(path, expected=state)
    assert info.value.reason == reason and str(path) in str(info.value)
    assert _snapshot(tmp_path) == before, "not one byte of the user's files may change"


def test_a_file_created_during_the_run_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "m.distspec.json"
    state = FileState.of(path)
    _write(path, _USER_EDIT)
    with pytest.raises(SpecConflict, match="was created"):
        MLIPSpec().save(path, expected=state)
    assert _read(path) == _USER_EDIT


def test_touching_without_changing_is_not_a_conflict(tmp_path: Path) -> None:
    path = tmp_path / "m.distspec.json"
    _write(path, FIVE_LINES)
    state = FileState.of(path)
    _write(path, FIVE_LINES)
    os.utime(path, (time.time() + 5, time.time() + 5))
    spec = MLIPSpec.load(path)
    spec.system_reductions = False
    assert spec.save(path, expected=state) is True
    assert MLIPSpec.load(path) == spec


def test_an_edit_landing_between_read_and_rename_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even without `expected`, save re-reads the file just before the rename: an edit made while the
    new text was being written survives and the save is refused."""
    path = tmp_path / "m.distspec.json"
    _write(path, FIVE_LINES)
    spec = MLIPSpec.load(path)
    spec.system_reductions = False
    real_write_temp = spec_file._write_temp

    def write_temp_then_user_saves(target: str, data: bytes) -> str:
        tmp = real_write_temp(target, data)
        _write(path, _USER_EDIT)  # the user's editor saves now
        return tmp

    monkeypatch.setattr(spec_file, "_write_temp", write_temp_then_user_saves)
    with pytest.raises(SpecConflict, match="was changed on disk"):
        spec.save(path)
    assert _read(path) == _USER_EDIT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.distspec.json"], "the temp file is removed"


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_guarded_save_writes_beside_and_says_where(change: str, tmp_path: Path) -> None:
    path = tmp_path / "m.distspec.json"
    _write(path, FIVE_LINES)
    state = FileState.of(path)
    spec = MLIPSpec.load(path)
    spec.distribution.policy.halo_width = 8.0
    mutate, reason = CHANGES[change]
    mutate(path)
    before = _snapshot(tmp_path)
    outcome = save_guarded(spec, path, state)
    beside = tmp_path / "m.validated.distspec.json"
    assert outcome.conflict == reason and outcome.written == str(beside)
    assert MLIPSpec.load(beside) == spec
    # the validated file is the text that was read, minimally edited: easy to diff and merge
    assert _read(beside) == FIVE_LINES.replace('"local"}', '"local", "halo_width": 8.0}')
    after = _snapshot(tmp_path)
    assert after.pop("m.validated.distspec.json") and after == before
    assert str(path) in outcome.message and str(beside) in outcome.message
    assert reason in outcome.message and ("diff" in outcome.message or "move it to" in outcome.message)
    # a second conflicting save never replaces the first validated file
    again = save_guarded(spec, path, state)
    assert again.written == str(tmp_path / "m.validated-2.distspec.json")
    assert _read(beside) == FIVE_LINES.replace('"local"}', '"local", "halo_width": 8.0}')


def test_guarded_save_without_a_conflict_edits_in_place(tmp_path: Path) -> None:
    path = tmp_path / "m.distspec.json"
    _write(path, FIVE_LINES)
    state = FileState.of(path)
    spec = MLIPSpec.load(path)
    same = save_guarded(spec, path, state)
    assert same.conflict is None and not same.changed and "already holds" in same.message
    spec.system_reductions = False
    done = save_guarded(spec, path, state)
    assert done.conflict is None and done.changed and done.written == str(path)
    assert list(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a/m.distspec.json", "a/m.validated.distspec.json"),
        ("m.json", "m.validated.json"),
        ("spec", "spec.validated.json"),
        (".distspec.json", ".distspec.validated.json"),
        ("a/.json", "a/.json.validated.json"),
        ("dir/", "dir.validated.json"),
    ],
)
def test_beside_path_names(name: str, expected: str) -> None:
    assert beside_path(name) == expected
    assert beside_path(name, 3).endswith(expected.split("validated", 1)[1]) and "validated-3" in beside_path(name, 3)


# ------------------------------------------------------------------ distcheck validate --save-spec

PAIR = "examples.pair_potential:model_factory"


@pytest.mark.procs
def test_cli_save_spec_over_the_spec_it_read_edits_it_minimally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "pair.distspec.json"
    text = """{
  "format": "distcheck-spec", "version": 1,
  "distribution": {"policy": {"scatter_mode": "halo_correction"}},
  "output_kinds": {"energy": "per_graph"}
}
"""
    _write(path, text)
    monkeypatch.chdir(ROOT)
    code = cli.main(["validate", PAIR, "--world-size", "2", "--spec", str(path), "--save-spec", str(path)])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_PASSED, out + err
    assert f"saved the validated spec to {path}" in err
    assert _read(path) == text.replace('"per_graph"}', '"per_graph", "forces": "per_node"}')


@pytest.mark.procs
@pytest.mark.parametrize("change", ["content", "deleted", "directory"])
def test_cli_save_spec_keeps_a_file_changed_during_the_run(
    change: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process: the file is changed while the validation runs (after the spec was read)."""
    path = tmp_path / "pair.distspec.json"
    _write(path, FIVE_LINES.replace('"local"', '"halo_correction"'))
    real_validate = cli._validate
    left: dict[str, bytes | str] = {}

    def validate_while_the_user_edits(*args: Any, **kwargs: Any) -> Any:
        report = real_validate(*args, **kwargs)
        CHANGES[change][0](path)
        left.update(_snapshot(tmp_path))
        return report

    monkeypatch.setattr(cli, "_validate", validate_while_the_user_edits)
    monkeypatch.chdir(ROOT)
    args = ["validate", PAIR, "--world-size", "2", "--spec", str(path), "--save-spec", str(path), "--quiet"]
    code = cli.main(args)
    out, err = capsys.readouterr()
    assert code == cli.EXIT_PASSED, out + err
    beside = tmp_path / "pair.validated.distspec.json"
    assert f"{path} {CHANGES[change][1]} during the validation" in err, err
    assert f"written to {beside}" in err, "the warning says where the spec went, even with --quiet"
    assert MLIPSpec.load(beside).output_kinds == {"energy": "per_graph", "forces": "per_node"}
    after = _snapshot(tmp_path)
    after.pop(beside.name)
    assert after == left, "what the user left on disk is untouched"


_EDITING_FACTORY = '''
import os
from examples import pair_potential

def model_factory():
    """Build the pair potential; meanwhile the "user" saves their edit of the spec file."""
    path = os.environ["DISTCHECK_TEST_SPEC"]
    with open(path, "w", encoding="utf-8") as f:
        f.write(os.environ["DISTCHECK_TEST_EDIT"])
    return pair_potential.model_factory()

sample_batch = pair_potential.sample_batch
'''


@pytest.mark.procs
def test_cli_subprocess_save_spec_race_keeps_the_users_edit(tmp_path: Path) -> None:
    """`python -m distcheck validate --spec X --save-spec X` whose model writes X while the validation
    runs (as an editor saving the file would): X ends with exactly the user's bytes, the validated spec
    is beside it, and stderr says where it went and what to do."""
    factory = tmp_path / "editing_model.py"
    factory.write_text(_EDITING_FACTORY)
    path = tmp_path / "pair.distspec.json"
    original = FIVE_LINES.replace('"local"', '"halo_correction"')
    _write(path, original)
    user_edit = (  # another spec (one more output), in the user's own layout
        original.replace('"version": 1,', '"version": 1,  \t')
        .replace("{\n", "{\r\n", 1)
        .replace('"per_node"}', '"per_node", "virial": "per_graph"}')
        + "\n"
    )
    keep = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(distcheck.__file__).parents[1]), *keep]))
    env.update(NO_COLOR="1", DISTCHECK_TEST_SPEC=str(path), DISTCHECK_TEST_EDIT=user_edit)
    args = [f"{factory}:model_factory", "--world-size", "2", "--spec", str(path), "--save-spec", str(path)]
    proc = subprocess.run(
        [sys.executable, "-m", "distcheck", "validate", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == cli.EXIT_PASSED, proc.stdout + proc.stderr
    assert path.read_bytes() == user_edit.encode("utf-8"), "not one byte of the user's edit may be lost"
    beside = tmp_path / "pair.validated.distspec.json"
    assert f"{path} was changed on disk during the validation" in proc.stderr, proc.stderr
    assert f"written to {beside}" in proc.stderr and f"diff {path} {beside}" in proc.stderr
    assert "Traceback" not in proc.stderr
    validated = MLIPSpec.load(beside)
    assert validated.output_kinds == {"energy": "per_graph", "forces": "per_node"}
    assert _read(beside).count("\n") == original.count("\n"), "the validated file is the read text, minimally edited"
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")
    assert leftovers == ["editing_model.py", "pair.distspec.json", "pair.validated.distspec.json"]


@pytest.mark.parametrize("layout", ["same_bytes", "other_layout"])
def test_a_file_changed_meanwhile_into_this_very_spec_is_no_conflict(layout: str, tmp_path: Path) -> None:
    """Two saves of one result (two CLIs, or the editor and a CLI): the second finds the file changed since
    its run read it, but into the spec it would write, so nothing is written beside it."""
    path = tmp_path / "m.distspec.json"
    _write(path, FIVE_LINES)
    state = FileState.of(path)
    spec = MLIPSpec.load(path)
    spec.distribution.policy.halo_width = 8.0
    first = save_guarded(spec, path, FileState.of(path))  # the other save, which got there first
    assert first.conflict is None and first.changed
    if layout == "other_layout":
        path.write_text(spec.to_json())  # the same spec, written by another tool's layout
    before = _snapshot(tmp_path)
    second = save_guarded(spec, path, state)
    assert second.conflict is None and not second.changed and second.written == str(path)
    assert _snapshot(tmp_path) == before and "already holds the validated spec" in second.message
    # a file changed into another spec still is a conflict
    other = MLIPSpec.load(path)
    other.distribution.policy.halo_width = 9.0
    assert save_guarded(other, path, state).conflict is not None
