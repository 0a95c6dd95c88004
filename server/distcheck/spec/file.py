"""Saving a spec over a file someone may be editing: minimal edits, atomic writes, no lost edits.

`spec_text_over(spec, old)` is the text `MLIPSpec.save` writes: a new file gets `spec.to_json()`;
an existing spec file is edited minimally with `distcheck.spec.edit` (the editor's quick fixes use
the same code), so its indentation, key order, compact arrays, line endings and trailing newline
survive and members it leaves out that hold their default stay out.

`FileState.of(path)` records what a path held (missing, a file and the hash of its bytes, a
directory, a symbolic link and where it points); `write_spec` refuses with `SpecConflict` when the
file no longer matches the state it was read in, and always re-reads the file just before the
atomic rename so that what it replaces is what it edited. `save_guarded` is the CLI's
`--save-spec`: when the file changed during the run, the validated spec goes to a new file beside
it and the outcome says where and what to do.

Data-model layer: no torch, no `distcheck.lsp`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import stat
import tempfile
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .edit import apply_changes, spec_changes
from .errors import SpecError
from .fields import field_default, field_types
from .jsontext import JsonEditError
from .model import MLIPSpec

__all__ = ["FileState", "SaveOutcome", "SpecConflict", "beside_path", "save_guarded", "spec_text_over", "write_spec"]


# --------------------------------------------------------------------------------------------------
# what a path holds


@dataclass(frozen=True)
class FileState:
    """What `path` held when it was looked at.

    `kind` is `missing`, `file`, `directory`, `other` (a socket, a device, a dangling link, ...) or
    `unreadable`; `link` is where `path` points when it is a symbolic link (else None); `digest` the
    SHA-256 of a file's bytes and `data` the bytes. Two states are equal when all of these are.
    """

    path: str
    kind: str
    link: str | None = None
    digest: str | None = None
    data: bytes | None = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> FileState:
        """The state of `path` now (follows a symbolic link for the content, records the link)."""
        name = os.fspath(path)
        try:
            link = os.readlink(name) if os.path.islink(name) else None
            mode = os.stat(name).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return cls(name, "other" if os.path.islink(name) else "missing", link=_link_or_none(name))
        except OSError:
            return cls(name, "unreadable", link=_link_or_none(name))
        if stat.S_ISDIR(mode):
            return cls(name, "directory", link=link)
        if not stat.S_ISREG(mode):
            return cls(name, "other", link=link)
        try:
            with open(name, "rb") as f:
                data = f.read()
        except OSError:
            return cls(name, "unreadable", link=link)
        return cls(name, "file", link=link, digest=hashlib.sha256(data).hexdigest(), data=data)

    def change_to(self, now: FileState) -> str | None:
        """How `now` differs from this state, as words that follow the file's name ("was deleted"), or
        None when it is the same (same kind, same link, same bytes; times are not compared)."""
        if now == self:
            return None
        if now.link != self.link:
            if now.link is None:
                return "was replaced (it was a symbolic link)"
            return "was replaced by a symbolic link" if self.link is None else "now links to another file"
        if now.kind == self.kind:
            return "was changed on disk"
        if now.kind == "missing":
            return "was deleted"
        if self.kind == "missing":
            return "was created"
        if now.kind == "directory":
            return "was replaced by a directory"
        return "was replaced by something that is not a regular file"


def _link_or_none(name: str) -> str | None:
    try:
        return os.readlink(name)
    except OSError:
        return None


class SpecConflict(RuntimeError):
    """The spec file is no longer what it was when it was read, so it was not written.

    `path` is the file, `reason` says what happened to it (`"was changed on disk"`, ...).
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"{path} {reason} since it was read, so the spec was not saved there (the file was left as it is); "
            "read it again and save the spec over what it holds now"
        )
        self.path = path
        self.reason = reason


# --------------------------------------------------------------------------------------------------
# the text to write


def spec_text_over(spec: MLIPSpec, old: bytes | None) -> str:
    """The text `spec` is saved as over a file holding `old` (None: no file).

    No file, or one that is not a JSON object: `spec.to_json()`. Otherwise `old` edited minimally:
    only the members whose meaning changed are rewritten (list items compared item by item), members
    it leaves out that hold their default stay out, list items that mean the same keep their form.
    Whatever the edit gives must read back as `spec`, or `spec.to_json()` is written instead.
    """
    pretty = spec.to_json()
    if old is None:
        return pretty
    try:
        text = old.decode("utf-8")
        doc = json.loads(text.removeprefix("\ufeff"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError alike
        return pretty
    if not isinstance(doc, dict):
        return pretty
    shaped = _shaped_like(spec.to_dict(), doc, MLIPSpec)
    try:
        new = apply_changes(text, spec_changes(doc, shaped, by_index=True))
        same = MLIPSpec.from_json(new) == spec
    except (JsonEditError, SpecError):
        return pretty
    return new if same else pretty


def _defaults(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        has_default, value = field_default(f)
        if has_default:
            out[f.name] = value
    return out


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _shaped_like(new: Any, old: Any, tp: Any) -> Any:
    """`new` (a `to_dict()` value of type `tp`) shaped after `old` (what the file holds there): members
    `old` leaves out that hold their default are dropped, list items that mean the same as an item of
    `old` take that item's form."""
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(new, dict) and isinstance(old, Mapping):
        hints = field_types(tp)
        defaults = _defaults(tp)
        out: dict[str, Any] = {}
        for key, value in new.items():
            if key in old:
                out[key] = _shaped_like(value, old[key], hints.get(key))
            elif not (key in defaults and _same(value, defaults[key])):
                sub = hints.get(key)
                out[key] = _shaped_like(value, {}, sub) if dataclasses.is_dataclass(sub) else value
        return out
    if typing.get_origin(tp) is list and isinstance(new, list) and isinstance(old, list):
        item_tp = typing.get_args(tp)[0]
        if len(new) == len(old):
            return [_shaped_like(n, o, item_tp) for n, o in zip(new, old)]
        return [next((o for o in old if _means_same(o, n, item_tp)), n) for n in new]
    return new


def _means_same(old_item: Any, new_item: Any, tp: Any) -> bool:
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(old_item, Mapping):
            return False
        try:
            part: Any = tp  # a spec part: Policy, CustomOp, HelperAdapter, Distribution
            return bool(part.from_dict(old_item).to_dict() == new_item)
        except (SpecError, TypeError, ValueError):
            return False
    return _same(old_item, new_item)


# --------------------------------------------------------------------------------------------------
# writing


def write_spec(spec: MLIPSpec, path: str | os.PathLike[str], expected: FileState | None = None) -> bool:
    """Write `spec` (already validated) to `path` as `spec_text_over` says; True when the file changed.

    Atomic (a temp file beside the target, then `os.replace`); an existing file keeps its permission
    bits; a symbolic link is written through to its target; parent directories are created. When the
    file already holds exactly that text nothing is written (False). Raises `SpecConflict` when
    `expected` is given and the file is no longer in that state, or when the file changes between
    being read here and the rename; `IsADirectoryError` when `path` is a directory, `PermissionError`
    when it cannot be read (so it cannot be edited in place), `NotADirectoryError` naming a file that
    stands where a parent directory should be.
    """
    name = os.fspath(path)
    current = FileState.of(name)
    if expected is not None:
        reason = expected.change_to(current)
        if reason is not None:
            raise SpecConflict(name, reason)
    if current.kind == "directory":
        raise IsADirectoryError(errno.EISDIR, "it is a directory; give a file path", name)
    if current.kind == "unreadable":
        raise PermissionError(errno.EACCES, "it cannot be read, so it cannot be edited in place", name)
    data = spec_text_over(spec, current.data).encode("utf-8")
    if current.data == data:
        return False
    target = os.path.realpath(name)
    _make_parent(target, name)
    tmp = _write_temp(target, data)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode) if current.kind == "file" else 0o644
        os.chmod(tmp, mode)
        reason = current.change_to(FileState.of(name))  # the last look before the rename
        if reason is not None:
            raise SpecConflict(name, reason)
        os.replace(tmp, target)
    except BaseException:
        _unlink(tmp)
        raise
    return True


def _make_parent(target: str, name: str) -> None:
    """Create the directories above `target`; a file in the way is named (not a bare "File exists")."""
    parent = os.path.dirname(target)
    try:
        os.makedirs(parent, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        blocker = parent
        while blocker and not os.path.lexists(blocker):  # the first existing path on the way is the file
            blocker = os.path.dirname(blocker)
        raise NotADirectoryError(
            errno.ENOTDIR, f"{blocker or parent} is a file, not a directory; give a path in a directory", name
        ) from exc


def _write_temp(target: str, data: bytes) -> str:
    directory, base = os.path.split(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def beside_path(path: str | os.PathLike[str], n: int = 1) -> str:
    """The `n`-th name for a file beside `path` holding the validated spec:
    `x.distspec.json` → `x.validated.distspec.json` (then `x.validated-2.distspec.json`, ...),
    `x.json` → `x.validated.json`, anything else gets `.validated.json` appended."""
    name = os.fspath(path).rstrip(os.sep) or os.fspath(path)
    tag = "validated" if n == 1 else f"validated-{n}"
    for ext in (".distspec.json", ".json"):
        if name.endswith(ext) and len(os.path.basename(name)) > len(ext):
            return f"{name[: -len(ext)]}.{tag}{ext}"
    return f"{name}.{tag}.json"


def _write_new(path: str, data: bytes, mode: int) -> str:
    """Write `data` to a new file at the first free `beside_path(path, n)`; never replaces a file."""
    _make_parent(os.path.abspath(path), path)
    for n in range(1, 1000):
        candidate = beside_path(path, n)
        if os.path.lexists(candidate):
            continue
        tmp = _write_temp(os.path.abspath(candidate), data)
        try:
            os.chmod(tmp, mode)
            try:
                os.link(tmp, candidate)  # whole or not at all, and never over a file that appeared meanwhile
            except FileExistsError:
                continue
            except OSError:  # no hard links on this file system: create it exclusively instead
                try:
                    with open(candidate, "xb") as f:
                        f.write(data)
                except FileExistsError:
                    continue
        finally:
            _unlink(tmp)
        return candidate
    raise FileExistsError(errno.EEXIST, "every name for the validated spec beside it is taken", path)


@dataclass(frozen=True)
class SaveOutcome:
    """Where a guarded save went: `written` is the file that holds the spec now, `conflict` what happened
    to the requested file during the run (None when the spec went there), `changed` whether a file was
    written at all (False when the requested file already held the spec)."""

    requested: str
    written: str
    conflict: str | None = None
    changed: bool = True

    @property
    def message(self) -> str:
        """One line for the user: where the spec is and, after a conflict, what to do."""
        if self.conflict is None:
            if not self.changed:
                return f"{self.requested} already holds the validated spec; left it unchanged"
            return f"saved the validated spec to {self.requested}"
        todo = (
            f"move it to {self.requested} if you still want it there"
            if self.conflict == "was deleted"
            else f"compare the two (diff {self.requested} {self.written}), merge what you want into "
            f"{self.requested}, or re-run the validation"
        )
        return (
            f"{self.requested} {self.conflict} during the validation, so it was left as it is and the validated "
            f"spec was written to {self.written} instead: {todo}"
        )


def _holds(path: str, spec: MLIPSpec) -> bool:
    """Whether the file at `path` holds `spec` now (the same spec, whatever its layout)."""
    try:
        return MLIPSpec.coerce(path).signature() == spec.signature()
    except Exception:  # unreadable, gone, not a spec: it does not hold it
        return False


def save_guarded(spec: MLIPSpec, path: str | os.PathLike[str], expected: FileState) -> SaveOutcome:
    """Save `spec` (already validated) to `path` unless it is no longer in the state `expected` (taken
    when the run read it); then write it to a new file beside it (`beside_path`), edited over what
    `path` held in `expected`, and say so. No byte of `path` is changed after a conflict. A file changed
    meanwhile into this very spec (two saves of one result) is no conflict: it is left unchanged."""
    name = os.fspath(path)
    try:
        changed = write_spec(spec, name, expected)
    except SpecConflict as conflict:
        if _holds(name, spec):  # another save (a second CLI, the editor) wrote this very spec meanwhile
            return SaveOutcome(name, name, None, changed=False)
        data = spec_text_over(spec, expected.data).encode("utf-8")
        mode = 0o644
        if expected.kind == "file":
            with contextlib.suppress(OSError):
                mode = stat.S_IMODE(os.stat(name).st_mode) if os.path.isfile(name) else mode
        return SaveOutcome(name, _write_new(name, data, mode), conflict.reason)
    return SaveOutcome(name, name, None, changed)
