"""The parts of a spec document: `Policy`, `CustomOp`, `HelperAdapter` and `Distribution`.

Plain mutable dataclasses whose field metadata (`fields.meta`) drives the reader, the writer and the
JSON Schema alike. Reading lives in `reader` (imported when `from_dict` is called, so the model has no
import cycle); each `from_dict` raises the first `SpecError`, with paths relative to the part.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from .fields import (
    ARG_TRANSFORMS,
    DOTTED_PATTERN,
    GATHER_MODES,
    HELPER_KINDS,
    OP_NAME_PATTERN,
    OUTPUT_TRANSFORMS,
    POLICY_KINDS,
    POSITION_PATTERN,
    REPLACEMENT_PATTERN,
    SCATTER_MODES,
    TORCHSCRIPT_MODES,
    fields_to_dict,
    meta,
)

__all__ = ["METHOD_ATTR_PATTERN", "CustomOp", "Distribution", "HelperAdapter", "Policy"]

_P = TypeVar("_P", bound="_Part")

METHOD_ATTR_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$"
"""The `attr_name` of a `method` helper: a class and its method, `"Class.method"` (a nested class, or a
class of a submodule, adds parts before them)."""


class _Part:
    """What every part has: its JSON object and a reader for one."""

    def to_dict(self) -> dict[str, Any]:
        """The part as a JSON object, every field written, in field order."""
        return fields_to_dict(self)

    @classmethod
    def from_dict(cls: type[_P], d: Mapping[str, Any]) -> _P:
        """Read the part from a JSON object; raises the first `SpecError` (paths relative to the part)."""
        from .reader import read_part

        return read_part(cls, d)


@dataclass
class Policy(_Part):
    """How atoms are laid out on ranks and how per-atom aggregations are corrected.

    `halo_width`, when given, is a width in Å greater than 0; an int is stored as a float. `None`
    means the runtime derives it from the wrapper (cutoff, interaction depth, scatter mode).
    """

    _schema_title: ClassVar[str] = "Policy"
    _schema_description: ClassVar[str] = "How atoms are laid out on ranks."

    kind: str = field(
        default="halo",
        metadata=meta(
            "Policy kind",
            "halo: each rank holds its owned atoms, then halo atoms; replicated: every rank holds every "
            "atom (a control).",
            enum=POLICY_KINDS,
        ),
    )
    scatter_mode: str = field(
        default="halo_correction",
        metadata=meta(
            "Scatter mode",
            "halo_correction: halo partials summed onto owners each layer; local: no per-layer exchange, "
            "the halo covers the receptive field; owned_complete: self-built graphs, one-cutoff halo refreshed.",
            enum=SCATTER_MODES,
        ),
    )
    gather_mode: str = field(
        default="halo_read",
        metadata=meta("Gather mode", "How per-atom inputs are read: halo_read.", enum=GATHER_MODES),
    )
    halo_width: float | None = field(
        default=None,
        metadata=meta(
            "Halo width (Å)",
            "Depth of the halo in Å; null = derived from the wrapper (cutoff, depth, mode).",
            exclusive_minimum=0,
            range_hint="write a width in Å above 0, or null to derive it from the wrapper",
        ),
    )

    def __post_init__(self) -> None:
        if isinstance(self.halo_width, int) and not isinstance(self.halo_width, bool):
            self.halo_width = float(self.halo_width)


def _transforms(noun: str, example: str, enum: tuple[str, ...], explained: str) -> dict[str, str]:
    """The field of a custom op's transforms per `noun` ("argument", "output") position, empty by default:
    the keys are decimal positions (`example` is the second one a hint shows), the values one of `enum`."""
    word = noun.capitalize()
    metadata = meta(
        f"{word} transforms",
        f'Transform per {noun} position ("0", "1", ...): {", ".join(enum[:-1])} or {enum[-1]}.',
        keys={
            "pattern": POSITION_PATTERN,
            "pattern_hint": f'an {noun} position written as a decimal integer such as "0" or "{example}"',
            "title": f"{word} position",
            "description": f"Zero-based position of the {noun}.",
        },
        values={"enum": enum, "title": f"{word} transform", "description": explained},
    )
    return field(default_factory=dict, metadata=metadata)


@dataclass
class CustomOp(_Part):
    """An opaque kernel (`torch.ops.namespace.name`) with transforms per argument and per output.

    `arg_transforms` and `output_transforms` map decimal positions (`"0"`, `"1"`, ...) to a transform
    from `ARG_TRANSFORMS` / `OUTPUT_TRANSFORMS`; positions not listed are passed through unchanged.
    """

    _schema_title: ClassVar[str] = "Custom op"
    _schema_description: ClassVar[str] = "An opaque torch.ops kernel and how to transform its arguments and outputs."

    op: str = field(
        metadata=meta(
            "Op name",
            'The op as "namespace::name" (torch.ops.namespace.name).',
            pattern=OP_NAME_PATTERN,
            pattern_hint='a custom op name "namespace::name" (as in torch.ops.namespace.name)',
            example='"mylib::fused_message"',
        )
    )
    # `_transforms` returns a `field(default_factory=dict)`: no default is shared between instances.
    arg_transforms: dict[str, str] = _transforms(  # noqa: RUF009
        "argument", "2", ARG_TRANSFORMS, "gather_inputs: refresh halo rows first; slice_owned: pass owned rows only."
    )
    output_transforms: dict[str, str] = _transforms(  # noqa: RUF009
        "output", "1", OUTPUT_TRANSFORMS, "scatter_outputs: send halo rows to owners; all_reduce_sum: sum over ranks."
    )


@dataclass
class HelperAdapter(_Part):
    """A helper in another package that is swapped while a rank runs.

    `kind="python"` swaps `module_path.attr_name` for `replacement`, given as
    `"package.module:function"`. `kind="reduction"` uses the generic per-system reduction adapter:
    zero the halo rows of argument `atom_arg` along dimension `atom_dim`, call the original, all-reduce
    the result; it takes no replacement. `kind="method"` patches a method of a class (`attr_name` is
    `"Class.method"`, `METHOD_ATTR_PATTERN`) so that every instance's call goes through the reduction
    adapter (`atom_arg` counted after `self`/`cls`), or through `replacement` when one is given.
    A `reduction` entry (and a `method` one without replacement) is written with kind, module_path,
    attr_name, atom_arg, atom_dim; a `python` entry (and a `method` one with a replacement) with kind,
    module_path, attr_name, replacement (and atom_arg / atom_dim only if they were changed from 0,
    which validation then rejects).
    """

    _schema_title: ClassVar[str] = "Third-party helper"
    _schema_description: ClassVar[str] = "A helper function in another package, swapped while a rank runs."

    kind: str = field(
        metadata=meta(
            "Adapter kind",
            'python: swap in "replacement"; reduction: the generic per-system reduction adapter; method: '
            '"Class.method" patched on its class, through the reduction adapter or "replacement" when given.',
            enum=HELPER_KINDS,
            example='"reduction"',
        )
    )
    module_path: str = field(
        metadata=meta(
            "Module",
            'Dotted module that defines the helper, e.g. "aimnet.nbops".',
            pattern=DOTTED_PATTERN,
            pattern_hint='a dotted module path such as "aimnet.nbops"',
            example='"aimnet.nbops"',
        )
    )
    attr_name: str = field(
        metadata=meta(
            "Attribute",
            'Name of the helper in its module, e.g. "mol_sum".',
            pattern=DOTTED_PATTERN,
            pattern_hint='an attribute name such as "mol_sum" (dots allowed for class attributes)',
            example='"mol_sum"',
        )
    )
    replacement: str | None = field(
        default=None,
        metadata=meta(
            "Replacement",
            'python helpers only: "package.module:function" to call instead.',
            pattern=REPLACEMENT_PATTERN,
            pattern_hint='a replacement "package.module:function" (dotted module, a colon, the function)',
            example='"mypkg.dd:owned_segment_sum"',
        ),
    )
    atom_arg: int = field(
        default=0,
        metadata=meta(
            "Atom argument",
            "reduction helpers only: position of the per-atom argument.",
            minimum=0,
        ),
    )
    atom_dim: int = field(
        default=0,
        metadata=meta(
            "Atom dimension",
            "reduction helpers only: dimension of that argument that runs over atoms.",
        ),
    )

    @property
    def qualname(self) -> str:
        """`"module_path.attr_name"`, the name the dispatch trace and the diagnostics use."""
        return f"{self.module_path}.{self.attr_name}"

    @property
    def swaps(self) -> bool:
        """True when the helper is swapped for `replacement` (kind `python`, or `method` with one);
        False when it goes through the generic reduction adapter."""
        return self.kind == "python" or (self.kind == "method" and self.replacement is not None)

    def to_dict(self) -> dict[str, Any]:
        """The entry as a JSON object with the keys its kind uses (see the class docstring)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "module_path": self.module_path,
            "attr_name": self.attr_name,
        }
        if self.swaps:
            out["replacement"] = self.replacement
            if self.atom_arg != 0:
                out["atom_arg"] = self.atom_arg
            if self.atom_dim != 0:
                out["atom_dim"] = self.atom_dim
        else:
            if self.replacement is not None:
                out["replacement"] = self.replacement
            out["atom_arg"] = self.atom_arg
            out["atom_dim"] = self.atom_dim
        return out


@dataclass
class Distribution(_Part):
    """The distribution section: the policy, the custom ops and the third-party helper adapters.

    Custom ops are unique by `op`, helpers by `qualname`.
    """

    _schema_title: ClassVar[str] = "Distribution"
    _schema_description: ClassVar[str] = "How the runtime distributes the wrapper."

    policy: Policy = field(
        default_factory=Policy,
        metadata=meta("Policy", "How atoms are laid out on ranks and aggregations corrected."),
    )
    custom_ops: list[CustomOp] = field(
        default_factory=list,
        metadata=meta(
            "Custom ops",
            "One entry per opaque kernel (torch.ops) the runtime cannot see into.",
            unique="op",
            unique_noun="custom op",
        ),
    )
    third_party_helpers: list[HelperAdapter] = field(
        default_factory=list,
        metadata=meta(
            "Third-party helpers",
            "Helpers in other packages swapped while a rank runs.",
            unique="qualname",
            unique_noun="helper",
        ),
    )
    torchscript: str = field(
        default="scripted",
        metadata=meta(
            "TorchScript",
            "scripted: ranks run TorchScript compiled (aggregations inside it are unseen); eager: ranks run "
            "it as Python, so the handlers route every aggregation.",
            enum=TORCHSCRIPT_MODES,
        ),
    )
