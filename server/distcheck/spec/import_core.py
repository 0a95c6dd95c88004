"""The `core` section of an nvalchemi-toolkit version-2 `MLIPSpec` file as distcheck's `distribution`.

The toolkit writes its spec (`MLIPSpec.save`) as `{"version": 2, "core": {...}, ...}`; `core` holds
the storage policy (`{"kind": "halo" | "refresh_halo" | "local" | "shard" | "graph_parallel",
"scatter_mode", "gather_mode"}`), the custom ops (`{"op", "arg_transforms", "output_transforms"}`, a
transform written `{"type": ...}`), the third-party helpers (kinds `python`, `jit`, `method`,
`module_forward`) and, when not the default, `shard_fields`. `Conversion` collects what one import
finds: `ImportNote`s for fields with no exact distcheck equivalent, errors for what the toolkit's own
reader would refuse (both at the toolkit file's JSON paths), and where each distcheck path came from,
so that distcheck's reader's errors can be shown at the toolkit file's paths too.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import Sink, format_path, json_type, quote_all, show
from .fields import SCATTER_MODES
from .jsontext import PathPart

__all__ = ["BAD", "TOOLKIT", "Conversion", "ImportNote", "Parts", "convert_core", "did_you_mean"]

TOOLKIT = "nvalchemi-toolkit"
"""How messages name the package whose spec files are imported."""

Parts = tuple[PathPart, ...]


class _Bad:
    """A value that was the wrong type (its error is recorded)."""


BAD: Any = _Bad()

_POLICY_KINDS = ("halo", "refresh_halo", "local", "shard", "graph_parallel")
_SCATTER = ("halo_correction", "local")
_GATHER = ("halo_read", "local")
_ARG_TRANSFORMS: dict[str, str | None] = {
    "gather_inputs": "gather_inputs",
    "slice_owned": "slice_owned",
    "gather_inputs_full": None,
}
_OUTPUT_TRANSFORMS: dict[str, str | None] = {
    "scatter_outputs": "scatter_outputs",
    "all_reduce_sum": "all_reduce_sum",
    "slice_outputs_owned": None,
}
_NO_TRANSFORM = {
    "gather_inputs_full": "gathers every atom's rows before the kernel; distcheck gives a kernel its rank's owned "
    "and halo rows only. The converted spec passes that argument through unchanged; declare "
    '"gather_inputs" there if the kernel reads only rows of atoms within the cutoff',
    "slice_outputs_owned": "cuts an output over every atom back to owned rows (the partner of "
    '"gather_inputs_full"); the converted spec passes that output through unchanged; declare "scatter_outputs" '
    "there if the output holds per-atom partial sums",
}


@dataclass(frozen=True)
class ImportNote:
    """A field of the toolkit's file that the converted spec does not carry over as it was.

    `parts` is its JSON path in the toolkit's file, `message` what it meant, what the converted spec
    does instead and what to do. `lossy` is False when nothing is lost (distcheck does not need the
    field); `line` and `column` (1-based) are set when the file's text was at hand.
    """

    parts: Parts
    message: str
    lossy: bool = True
    line: int | None = None
    column: int | None = None

    @property
    def path(self) -> str:
        """The JSON path as shown to users (`core.policy.kind`)."""
        return format_path(self.parts)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def did_you_mean(word: str, known: Sequence[str]) -> str:
    """`did you mean "x"? ` for the entry of `known` closest to `word`, or "" when none is close."""
    close = difflib.get_close_matches(word, known, n=1)
    return f"did you mean {show(close[0])}? " if close else ""


class Conversion:
    """What one import has found: notes, errors (at the toolkit file's paths) and the origin of paths."""

    def __init__(self) -> None:
        self.notes: list[ImportNote] = []
        self.sink = Sink()
        self.origin: dict[Parts, Parts] = {}

    def note(self, parts: Parts, message: str, *, lossy: bool = True) -> None:
        """Record a field without an exact equivalent (`lossy=False`: one distcheck does not need)."""
        self.notes.append(ImportNote(parts, message, lossy))

    def error(self, parts: Parts, message: str) -> None:
        """Record something the toolkit's own reader refuses, or distcheck cannot take."""
        self.sink.add(parts, message)

    def came_from(self, ours: Parts, theirs: Parts) -> None:
        """Path `ours` of the converted spec holds what path `theirs` of the toolkit's file held."""
        self.origin[ours] = theirs

    def theirs(self, ours: Parts) -> Parts:
        """The toolkit file's path of the converted spec's path `ours` (longest recorded prefix, then
        the same keys: most top-level fields have the same names in both)."""
        for n in range(len(ours), 0, -1):
            if ours[:n] in self.origin:
                return (*self.origin[ours[:n]], *ours[n:])
        return ours

    def unknown_keys(self, obj: Mapping[str, Any], parts: Parts, known: Sequence[str], what: str) -> None:
        """A note for each key of `obj` that the toolkit does not write in `what`."""
        for key in obj:
            if key not in known:
                self.note(
                    (*parts, key),
                    f"{show(key)} is not a field of {what} in {TOOLKIT}'s version-2 format (its reader ignores "
                    f"it), so nothing was converted; {did_you_mean(key, known)}the fields there are "
                    f"{quote_all(known)}: correct its name, or remove it",
                )

    def value(
        self,
        obj: Mapping[str, Any],
        key: str,
        parts: Parts,
        types: tuple[type, ...],
        noun: str,
        *,
        required: str | None = None,
        default: Any = None,
    ) -> Any:
        """`obj[key]` when it is of `types` (`noun` names them), `default` when absent, else `BAD` with an
        error; `required` (an example value) makes an absent key an error too."""
        if key not in obj:
            if required is not None:
                self.error(
                    (*parts, key),
                    f'required field "{key}" is missing ({TOOLKIT} always writes it); add it, e.g. "{key}": {required}',
                )
                return BAD
            return default
        return self.typed(obj[key], (*parts, key), types, noun)

    def typed(self, value: Any, parts: Parts, types: tuple[type, ...], noun: str) -> Any:
        """`value` when it is of `types` (a bool is never an int here), else `BAD` with an error."""
        if isinstance(value, types) and not (isinstance(value, bool) and bool not in types):
            return value
        self.error(parts, f"expected {noun}, got {json_type(value)} {show(value)}; write {noun} there")
        return BAD


def convert_core(c: Conversion, core: Mapping[str, Any], parts: Parts) -> dict[str, Any]:
    """The `distribution` section for the toolkit's `core` object at `parts`."""
    from .import_helpers import convert_helper

    c.came_from(("distribution",), parts)
    c.unknown_keys(core, parts, ("policy", "custom_ops", "third_party_helpers", "shard_fields"), '"core"')
    out: dict[str, Any] = {}
    raw = c.value(
        core, "policy", parts, (Mapping,), 'a policy object such as {"kind": "halo"}', required='{"kind": "halo"}'
    )
    if raw is not BAD:
        policy = _policy(c, raw, (*parts, "policy"))
        if policy is not None:
            out["policy"] = policy
    ops = c.value(core, "custom_ops", parts, (list,), "a list of custom-op objects", default=[])
    if ops is not BAD:
        found: list[dict[str, Any]] = []
        for i, item in enumerate(ops):
            op = _custom_op(c, item, (*parts, "custom_ops", i), ("distribution", "custom_ops", len(found)))
            if op is not None:
                found.append(op)
        out["custom_ops"] = found
    helpers = c.value(core, "third_party_helpers", parts, (list,), "a list of helper objects", default=[])
    if helpers is not BAD:
        kept: list[dict[str, Any]] = []
        for i, item in enumerate(helpers):
            entry = convert_helper(c, item, (*parts, "third_party_helpers", i))
            if entry is not None:
                c.came_from(("distribution", "third_party_helpers", len(kept)), (*parts, "third_party_helpers", i))
                kept.append(entry)
        out["third_party_helpers"] = kept
    if "shard_fields" in core:
        c.note(
            (*parts, "shard_fields"),
            "shard_fields picks the batch fields the toolkit promotes to sharded tensors; distcheck gives every "
            "rank its rows of every per-atom field, so it needs no such list; nothing to do",
            lossy=False,
        )
    return out


def _policy(c: Conversion, obj: Mapping[str, Any], parts: Parts) -> dict[str, Any] | None:
    """distcheck's policy for the toolkit's; None (distcheck's default policy) when there is none."""
    c.came_from(("distribution", "policy"), parts)
    c.unknown_keys(obj, parts, ("kind", "scatter_mode", "gather_mode"), "a policy")
    kind = c.value(obj, "kind", parts, (str,), "a policy kind string", required='"halo"')
    scatter = c.value(obj, "scatter_mode", parts, (str,), "a scatter mode string")
    gather = c.value(obj, "gather_mode", parts, (str,), "a gather mode string")
    for key, value, known in (("scatter_mode", scatter, _SCATTER), ("gather_mode", gather, _GATHER)):
        if isinstance(value, str) and value not in known:
            c.error(
                (*parts, key),
                f"{show(value)} is not a {key} of {TOOLKIT}; {did_you_mean(value, known)}"
                f"write one of {quote_all(known)}",
            )
            return None
    if kind is BAD or scatter is BAD or gather is BAD:
        return None
    if kind == "halo":
        policy = {"kind": "halo", "scatter_mode": scatter or "halo_correction"}
    elif kind == "refresh_halo" and "owned_complete" in SCATTER_MODES:
        policy = {"kind": "halo", "scatter_mode": "owned_complete"}
        if scatter not in (None, "local"):
            c.note(
                (*parts, "scatter_mode"),
                f'refresh_halo with scatter_mode {show(scatter)}: distcheck\'s "owned_complete", which the '
                "converted spec uses, never sums halo rows' partial aggregates into their owners; if the model's "
                'owned atoms do not see complete neighbourhoods, set "scatter_mode": "halo_correction"',
            )
    else:
        _policy_note(c, kind, parts)
        return None
    if gather == "local":
        c.note(
            (*parts, "gather_mode"),
            'gather_mode "local" has no distcheck equivalent: distcheck reads halo rows as its exchanges leave '
            'them ("halo_read", its one gather mode), which the converted spec uses; validate the model with it',
        )
    return policy


def _policy_note(c: Conversion, kind: str, parts: Parts) -> None:
    why = {
        "local": "is the toolkit's single-process path (no distributed strategy)",
        "shard": "is storage only, not a strategy the toolkit runs a model with",
        "graph_parallel": "splits atoms by index and all-gathers node features every layer; distcheck cuts the "
        "system into slabs with a halo",
        "refresh_halo": "needs distcheck's owned_complete scatter mode, which this distcheck lacks",
    }.get(kind)
    if why is None:
        why = (
            f"is not one of {TOOLKIT}'s policies ({did_you_mean(kind, _POLICY_KINDS)}they are "
            f"{quote_all(_POLICY_KINDS)})"
        )
    c.note(
        (*parts, "kind"),
        f"policy {show(kind)} has no distcheck equivalent: it {why}. The converted spec keeps distcheck's "
        'default policy ("halo", "halo_correction"); distcheck validate with it tries the other scatter modes '
        "when the outputs differ",
    )


def _position(c: Conversion, key: str, parts: Parts) -> str | None:
    """The decimal position `key` as distcheck writes it ("0", "1", ...), or None after an error."""
    try:
        n = int(key)
    except ValueError:
        n = -1
    if n < 0:
        c.error(parts, f'position {show(key)} is not a non-negative integer; write it as "0", "1", ...')
        return None
    return str(n)


def _transforms(
    c: Conversion, obj: Mapping[str, Any], key: str, parts: Parts, known: dict[str, str | None], ours: Parts
) -> dict[str, str]:
    """A custom op's `arg_transforms` / `output_transforms` (`key`): position → distcheck's transform name."""
    raw = c.value(obj, key, parts, (Mapping,), 'an object of position → {"type": ...}', default={})
    out: dict[str, str] = {}
    if raw is BAD:
        return out
    for pos, record in raw.items():
        here = (*parts, key, pos)
        position = _position(c, str(pos), here)
        rec = c.typed(record, here, (Mapping,), f'a transform object such as {{"type": "{next(iter(known))}"}}')
        if position is None or rec is BAD:
            continue
        kind = c.value(rec, "type", here, (str,), "a transform type string", required=f'"{next(iter(known))}"')
        if kind is BAD:
            continue
        if kind not in known:
            c.error(
                (*here, "type"),
                f"{show(kind)} is not a {key[:-1].replace('_', ' ')} of {TOOLKIT}; "
                f"{did_you_mean(kind, list(known))}write one of {quote_all(list(known))}",
            )
            continue
        c.unknown_keys(rec, here, ("type",), "a transform")
        ours_name = known[kind]
        if ours_name is None:
            c.note((*here, "type"), f"{show(kind)} has no distcheck equivalent: it {_NO_TRANSFORM[kind]}")
            continue
        c.came_from((*ours, key, position), here)
        out[position] = ours_name
    return out


def _custom_op(c: Conversion, item: Any, parts: Parts, ours: Parts) -> dict[str, Any] | None:
    """distcheck's custom op for the toolkit's at `parts` (to be held at `ours`), or None after an error."""
    obj = c.typed(item, parts, (Mapping,), 'a custom-op object such as {"op": "mylib::kernel"}')
    if obj is BAD:
        return None
    c.unknown_keys(obj, parts, ("op", "arg_transforms", "output_transforms"), "a custom op")
    op = c.value(obj, "op", parts, (str,), 'an op name "namespace::name"', required='"mylib::kernel"')
    args = _transforms(c, obj, "arg_transforms", parts, _ARG_TRANSFORMS, ours)
    outs = _transforms(c, obj, "output_transforms", parts, _OUTPUT_TRANSFORMS, ours)
    if op is BAD:
        return None
    c.came_from(ours, parts)
    return {"op": op, "arg_transforms": args, "output_transforms": outs}
