"""Plugin-owned config sections: mounting a plugin's typed model into the core schema.

A plugin declares its keys with the same field DSL the core uses
(:func:`~symi_memory.config.fields.opt`, :func:`~symi_memory.config.fields.section`)
and registers the model at a dotted camelCase path. :func:`extend_schema`
returns a new root model in which that path holds the plugin's section (or,
when the path is already a core section, the core section plus the plugin's
keys). Validation, defaults, ``config show`` and the generated reference then
work on the extended model exactly as on the core's, so a disabled or
uninstalled plugin's keys simply are not there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import attrs

from ..errors import PluginError
from .fields import _meta, section

__all__ = ["Mount", "extend_schema"]


@attrs.frozen(kw_only=True)
class Mount:
    """One plugin section to mount: where, what, and whose (for error messages and the reference)."""

    path: tuple[str, ...]
    model: type
    owner: str
    doc: str = ""


def _snake(key: str) -> str:
    """An attribute name for a config key; plugin ids such as ``json-index`` are keys too."""
    return re.sub(r"\W", "_", re.sub(r"(?<!^)(?=[A-Z])", "_", key)).lower() + "_"


def _copy_field(field: attrs.Attribute, owner: str | None = None) -> Any:
    meta = {k: dict(v) if isinstance(v, dict) else v for k, v in field.metadata.items()}
    if owner is not None:
        meta["symi"]["owner"] = owner
    return attrs.field(default=field.default, metadata=meta)


def _merge(core: type, mount: Mount, where: str) -> dict[str, Any]:
    """The fields of ``core`` plus the plugin model's, refusing a key both define."""
    fields = {f.name: _copy_field(f) for f in attrs.fields(core)}
    taken = {_meta(f)["key"] for f in attrs.fields(core)}
    for f in attrs.fields(mount.model):
        key = _meta(f)["key"]
        if key in taken:
            raise PluginError(f"plugin {mount.owner!r} declares config key {where}.{key}, which is already defined; "
                              f"plugins may only add keys (rename it or mount the section elsewhere)")
        taken.add(key)
        fields[f"{f.name}__{mount.owner.replace('-', '_')}"] = _copy_field(f, mount.owner)
    return fields


def _model(name: str, fields: dict[str, Any]) -> type:
    # Like the core's models (schema.py): instances are read field by field, never compared or printed.
    return attrs.make_class(name, fields, kw_only=True, eq=False, repr=False)


def _remake(cls: type, fields: dict[str, Any]) -> type:
    new = _model(cls.__name__, fields)
    if getattr(cls, "__symi_open__", False):
        new.__symi_open__ = True  # type: ignore[attr-defined]
    return new


def extend_schema(root: type, mounts: Iterable[Mount], prefix: str = "") -> type:
    """A copy of ``root`` with every mount applied (``root`` itself when there is none)."""
    mounts = list(mounts)
    if not mounts:
        return root
    fields: dict[str, Any] = {}
    known: dict[str, attrs.Attribute] = {}
    for f in attrs.fields(root):
        known[_meta(f)["key"]] = f
    for f in attrs.fields(root):
        meta = _meta(f)
        key = meta["key"]
        below = [m for m in mounts if m.path[0] == key]
        if not below:
            fields[f.name] = _copy_field(f)
            continue
        where = f"{prefix}.{key}" if prefix else key
        if meta["kind"] == "dict" and not f.default.factory():
            # A free-form table (plugins.entries): typed where plugins declared keys, open elsewhere.
            cls = _model(f"{key}Table", {})
            cls.__symi_open__ = True  # type: ignore[attr-defined]
        elif meta["kind"] != "section":
            raise PluginError(f"plugin {below[0].owner!r} mounts a config section at {where}, which is a value, "
                              f"not a section")
        else:
            cls = meta["cls"]
        for m in (m for m in below if len(m.path) == 1):
            cls = _remake(cls, _merge(cls, m, where))
        deeper = [attrs.evolve(m, path=m.path[1:]) for m in below if len(m.path) > 1]
        fields[f.name] = section(extend_schema(cls, deeper, where), key, meta["doc"])
    new_keys = dict.fromkeys(m.path[0] for m in mounts if m.path[0] not in known)
    for key in new_keys:
        where = f"{prefix}.{key}" if prefix else key
        here = [m for m in mounts if m.path == (key,)]
        if len(here) > 1:
            raise PluginError(f"config section {where} is declared by two plugins ({here[0].owner!r} and "
                              f"{here[1].owner!r}); uninstall or disable one")
        deeper = [attrs.evolve(m, path=m.path[1:]) for m in mounts if m.path[0] == key and len(m.path) > 1]
        if here:
            cls, doc, owner = here[0].model, here[0].doc, here[0].owner
        else:
            cls, doc, owner = _model(f"{key}Section", {}), "", deeper[0].owner
        field = section(extend_schema(cls, deeper, where), key, doc)
        field.metadata["symi"]["owner"] = owner  # shown in the generated reference
        fields[_snake(key)] = field
    return _remake(root, fields)
