"""The third-party helpers of an nvalchemi-toolkit spec file (`core.third_party_helpers`) as distcheck's.

The toolkit writes four kinds: `python` and `jit` (`module_path`, `attr_name`, `replacement` as
`"module:qualname"` or null; `jit` also `mode`: `eager` swaps in the replacement, `marshal` unwraps its
sharded tensors around the scripted original), `method` (`module_path`, `class_name`, `method_name`,
`replacement` called with the original method first, `mode`: `wrap` or `marshal`) and `module_forward`
(one module instance's forward, not serialisable). A swap distcheck can do the same way becomes a
`python` entry; everything else is left out with a note saying what to declare instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import quote_all, show
from .fields import REPLACEMENT_PATTERN
from .import_core import BAD, TOOLKIT, Conversion, Parts, did_you_mean

__all__ = ["convert_helper"]

_HELPER_KEYS: dict[str, tuple[str, ...]] = {
    "python": ("kind", "module_path", "attr_name", "replacement"),
    "jit": ("kind", "module_path", "attr_name", "replacement", "mode"),
    "method": ("kind", "module_path", "class_name", "method_name", "replacement", "mode"),
    "module_forward": ("kind", "target", "label"),
}


def _replacement(c: Conversion, value: Any, parts: Parts, kind: str, module: str) -> str | None:
    """A replacement distcheck can import by name, or None after a note saying why the entry is left out."""
    package = module.split(".")[0] or module
    if value is None:
        c.note(
            (*parts, "replacement"),
            f"a {kind} helper without a replacement (null) only declares the helper (the toolkit wrapper's "
            "distributed_setup installs the swap itself), and distcheck swaps only what the spec names, so the "
            f'entry is left out; write "replacement": "package.module:function" with the function to call instead, '
            f"or run distcheck validate --watch {package} to have the helper traced and an entry proposed",
        )
        return None
    if not re.fullmatch(REPLACEMENT_PATTERN, value):
        inner = " (a function defined inside another one)" if "<" in value else ""
        c.note(
            (*parts, "replacement"),
            f"replacement {show(value, 60)}{inner} cannot be imported by name, so the entry is left out; move the "
            'function to module level and write "replacement": "package.module:function"',
        )
        return None
    return str(value)


def convert_helper(c: Conversion, item: Any, parts: Parts) -> dict[str, Any] | None:
    """distcheck's helper entry for one of the toolkit's, or None (with a note or an error) when none."""
    obj = c.typed(item, parts, (Mapping,), 'a helper object such as {"kind": "python", ...}')
    if obj is BAD:
        return None
    kind = c.value(obj, "kind", parts, (str,), "a helper kind string", required='"python"')
    if kind is BAD:
        return None
    if kind not in _HELPER_KEYS:
        c.note(
            (*parts, "kind"),
            f"helper kind {show(kind)} is not one of {TOOLKIT}'s ({did_you_mean(kind, list(_HELPER_KEYS))}they are "
            f"{quote_all(list(_HELPER_KEYS))}), so the entry is left out; declare its distcheck equivalent "
            'by hand (docs/spec.md, "The spec") if the model needs one',
        )
        return None
    c.unknown_keys(obj, parts, _HELPER_KEYS[kind], f'a "{kind}" helper')
    if kind == "module_forward":
        target = obj.get("target")
        c.note(
            (*parts, "kind"),
            f"a module_forward helper swaps the forward of one module instance ({show(target, 60)}); distcheck "
            "patches module functions and class methods, not instances, so the entry is left out; if patching "
            'every instance is right, declare the class\'s method ("attr_name": "Class.forward")',
        )
        return None
    text = "a dotted name string"
    module = c.value(obj, "module_path", parts, (str,), text, required='"package.module"')
    names = ("class_name", "method_name") if kind == "method" else ("attr_name",)
    attrs = [c.value(obj, n, parts, (str,), text, required='"name"') for n in names]
    modes = ("wrap", "marshal") if kind == "method" else ("eager", "marshal")
    mode = c.value(obj, "mode", parts, (str,), "a mode string", default=modes[0]) if kind != "python" else modes[0]
    if isinstance(mode, str) and mode not in modes:
        c.error((*parts, "mode"), f"{show(mode)} is not a {kind} helper mode; write one of {quote_all(modes)}")
        return None
    if module is BAD or BAD in attrs or mode is BAD:
        return None
    where = f"{module}.{'.'.join(attrs)}"
    if mode == "marshal":
        c.note(
            (*parts, "mode"),
            f'"marshal" unwraps the toolkit\'s sharded tensors around {where}; distcheck passes plain tensors, so '
            "the helper needs no entry and none was written; nothing to do",
            lossy=False,
        )
        return None
    if kind == "method":
        _method_note(c, parts, module, ".".join(attrs), obj.get("replacement"))
        return None
    replacement = c.value(obj, "replacement", parts, (str, type(None)), 'a "package.module:function" string or null')
    if replacement is BAD or _replacement(c, replacement, parts, kind, module) is None:
        return None
    return {"kind": "python", "module_path": module, "attr_name": attrs[0], "replacement": replacement}


def _method_note(c: Conversion, parts: Parts, module: str, attr: str, replacement: Any) -> None:
    """The note of a toolkit method helper (`wrap` mode) of `module`'s `attr` ("Class.method"), left out:
    why, and the distcheck entry to write for each thing the toolkit's wrap can do."""
    where = f"{module}.{attr}"
    if replacement is None:
        c.note(
            (*parts, "replacement"),
            f"a method helper without a replacement (null) only declares {where} (the toolkit wrapper installs the "
            "wrap itself), and distcheck patches only what the spec names, so the entry is left out; run "
            f"distcheck validate --watch {module.split('.')[0]} to have it traced and an entry proposed, or "
            + _method_choices(module, attr, None),
        )
        return
    c.note(
        (*parts, "replacement"),
        f"the toolkit calls {show(replacement, 60)} as (original, self, ...) around {where}, inside its own "
        "distributed context; distcheck calls a replacement in the method's place with the method's own "
        "arguments and has no such context, so the entry is left out; " + _method_choices(module, attr, replacement),
    )


def _method_choices(module: str, attr: str, replacement: Any) -> str:
    """What to write instead of a toolkit method wrap, by what the wrap does."""
    base = f'"kind": "method", "module_path": "{module}", "attr_name": "{attr}"'
    home = replacement.split(":")[0] if isinstance(replacement, str) and ":" in replacement else "package.module"
    return (
        "write, by what the wrap does: if it sums per-atom rows per system (system_sum), "
        f'{{{base}, "atom_arg": 0, "atom_dim": 0}} with atom_arg the position of the per-atom tensor after self; '
        "if it refreshes halo rows or sends partials to their owners (refresh_neighbors, scatter_to_owners), "
        'no entry (distcheck does both for every aggregation it sees; set "distribution": {"torchscript": '
        '"eager"} when the method is TorchScript); otherwise '
        f'{{{base}, "replacement": "{home}:NAME"}} with NAME a module-level function of {home} taking '
        "(self, ...) that returns what the method returns on one rank's rows"
    )
