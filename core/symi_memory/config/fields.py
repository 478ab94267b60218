"""The machinery behind the typed config model.

Each config section is an attrs class whose fields carry their camelCase key,
kind, bounds and doc in ``metadata``. From that one model we derive the
defaults, validation (one line per problem), and the generated reference.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = [
    "DURATION_RE",
    "build",
    "defaults_of",
    "deep_merge",
    "opt",
    "parse_duration_ms",
    "section",
    "to_dict",
    "validate",
]

DURATION_RE = re.compile(r"^\d+(\.\d+)?(ms|s|m|h|d)?$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_KEY = "symi"


MAX_DURATION_MS = 366 * 86_400_000
MAX_NUMBER = 2**53  # beyond this a config number is a typo, and floats lose whole numbers


def parse_duration_ms(value: str | int | float) -> int:
    """Parse ``5m``/``1500ms``/``2h``; a bare number means minutes. At most 366 days, never negative."""
    hint = "a duration like 30s, 5m, 1.5h or 2d (a bare number means minutes) from 0 to 366d"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{_show(value)} is not {hint}")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{_show(value)} is not {hint}")
        if value < 0 or value > MAX_DURATION_MS / _UNIT_MS["m"]:
            raise ValueError(f"{_show(value)} is out of range; use {hint}")
        return int(value * _UNIT_MS["m"])
    text = value.strip()
    if not DURATION_RE.match(text):
        raise ValueError(f"{_show(value)} is not {hint}")
    unit = next((u for u in ("ms", "s", "m", "h", "d") if text.endswith(u)), "")
    number = float(text[: len(text) - len(unit)] if unit else text)
    ms = number * _UNIT_MS[unit or "m"]
    if not math.isfinite(ms) or ms > MAX_DURATION_MS:
        raise ValueError(f"{_show(value)} is out of range; use {hint}")
    return int(ms)


def opt(
    key: str,
    default: Any,
    *,
    kind: str | None = None,
    doc: str = "",
    choices: tuple[Any, ...] | None = None,
    lo: float | None = None,
    hi: float | None = None,
    clamp: bool = False,
    nullable: bool = False,
    item: str | None = None,
) -> Any:
    """Declare one config key.

    ``kind`` is one of bool/int/float/str/list/dict/duration/any and is
    inferred from ``default`` when omitted. ``clamp`` clamps numbers into
    ``[lo, hi]`` instead of rejecting them (the spec clamps some keys).
    """
    if kind is None:
        kind = _infer_kind(default)
    meta = {
        _KEY: {
            "key": key,
            "kind": kind,
            "doc": doc,
            "choices": choices,
            "lo": lo,
            "hi": hi,
            "clamp": clamp,
            "nullable": nullable or default is None,
            "item": item,
        }
    }
    if isinstance(default, list | dict):
        return attrs.field(factory=functools.partial(_copy, default), metadata=meta)
    return attrs.field(default=default, metadata=meta)


def section(cls: type, key: str, doc: str = "") -> Any:
    """Declare a nested section."""
    return attrs.field(factory=cls, metadata={_KEY: {"key": key, "kind": "section", "cls": cls, "doc": doc}})


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _infer_kind(default: Any) -> str:
    for typ, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"), (dict, "dict")):
        if isinstance(default, typ):
            return name
    return "any"


def _meta(field: attrs.Attribute) -> dict[str, Any]:
    return field.metadata[_KEY]


def fields_by_key(cls: type) -> dict[str, attrs.Attribute]:
    """Map camelCase key -> attrs field for a section class."""
    return {_meta(f)["key"]: f for f in attrs.fields(cls)}


def defaults_of(cls: type) -> dict[str, Any]:
    """The camelCase defaults dict of a section class."""
    return to_dict(cls())


def to_dict(obj: Any) -> dict[str, Any]:
    """A section instance as a camelCase dict (deep copy)."""
    out: dict[str, Any] = {}
    for f in attrs.fields(type(obj)):
        meta = _meta(f)
        value = getattr(obj, f.name)
        out[meta["key"]] = to_dict(value) if meta["kind"] == "section" else _copy(value)
    return out


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """Build a section instance from an already validated camelCase dict."""
    kwargs: dict[str, Any] = {}
    for key, f in fields_by_key(cls).items():
        if key not in data:
            continue
        meta = _meta(f)
        kwargs[f.name] = build(meta["cls"], data[key]) if meta["kind"] == "section" else data[key]
    return cls(**kwargs)


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Recursively merge ``over`` onto ``base`` (dicts merge, everything else replaces)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = _copy(value)
    return out


def did_you_mean(key: str, known: list[str]) -> str:
    import difflib  # only a config with a mistake gets here

    match = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if not match:
        lowered = {k.lower(): k for k in known}
        if key.lower() in lowered:
            match = [lowered[key.lower()]]
    return f' (did you mean "{match[0]}"?)' if match else ""


def validate(cls: type, data: Any, path: str, problems: list[str], extra: Mapping[str, Any] | None = None) -> dict:
    """Validate a (possibly partial) camelCase dict against ``cls``.

    Returns the normalised dict with only the keys that were present.
    Problems are appended as one line each: key path, bad value, what is allowed.
    ``extra`` holds plugin-contributed defaults that extend this section.
    """
    if not isinstance(data, Mapping):
        problems.append(f"{path}: expected a table/object, got {_show(data)}")
        return {}
    known = fields_by_key(cls)
    out: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{path}.{key}" if path else key
        field = known.get(key)
        if field is None:
            if extra is not None and key in extra:
                out[key] = _validate_free(extra[key], value, where, problems)
                continue
            if getattr(cls, "__symi_open__", False):  # a free-form table with some typed entries
                out[key] = _copy(value)
                continue
            names = list(dict.fromkeys([*known, *(extra or {})]))
            problems.append(f"{where}: unknown key{did_you_mean(key, names)}; allowed keys here: {', '.join(names)}")
            continue
        meta = _meta(field)
        if meta["kind"] == "section":
            sub_extra = extra.get(key) if isinstance(extra, Mapping) else None
            out[key] = validate(meta["cls"], value, where, problems, sub_extra)
        else:
            ok, norm = check_value(meta, value, where, problems)
            sub_extra = extra.get(key) if isinstance(extra, Mapping) else None
            if ok and meta["kind"] == "dict" and isinstance(sub_extra, Mapping) and isinstance(norm, Mapping):
                # A free-form table (plugins.entries, models) that plugins contributed defaults to: their keys are
                # typed by those defaults (a typo gets "did you mean"); the table's other entries stay free.
                norm = {k: _validate_free(sub_extra[k], v, f"{where}.{k}", problems) if k in sub_extra else v
                        for k, v in norm.items()}
            if ok:
                out[key] = norm
    return out


def _validate_free(default: Any, value: Any, where: str, problems: list[str]) -> Any:
    """Validate a plugin-contributed key: typed by its default value."""
    if isinstance(default, Mapping):
        if not isinstance(value, Mapping):
            problems.append(f"{where}: expected a table/object, got {_show(value)}")
            return {}
        out = {}
        for k, v in value.items():
            if k in default:
                out[k] = _validate_free(default[k], v, f"{where}.{k}", problems)
            else:
                problems.append(f"{where}.{k}: unknown key{did_you_mean(k, list(default))}")
        return out
    meta = {"kind": _infer_kind(default), "nullable": default is None, "choices": None, "lo": None,
            "hi": None, "clamp": False, "item": None}
    ok, norm = check_value(meta, value, where, problems)
    return norm if ok else default


def _show(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        return f"<a {type(value).__name__} too long to show>"
    return text if len(text) <= 60 else text[:57] + "..."


def _collection_problem(entry: Any) -> str | None:
    """Why a ``memory.qmd.paths[]`` entry is unusable, or None."""
    if isinstance(entry, str):
        return None if entry.strip() else "is empty; give a directory or .md file"
    if not isinstance(entry, Mapping):
        return "is not a path or a {path, pattern?, name?} table"
    unknown = sorted(set(entry) - {"path", "pattern", "name"})
    if unknown:
        return f"has unknown key {unknown[0]!r}; allowed: path, pattern, name"
    if not isinstance(entry.get("path"), str) or not entry["path"].strip():
        return "needs a non-empty string path (a directory or .md file)"
    for key in ("pattern", "name"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            return f"has a {key} that is not a string"
    return None


_SECRET_LEAF = re.compile(r"api[_-]?key|secret|passw(or)?d|authorization|credential|token$", re.IGNORECASE)


def _show_at(where: str, value: Any) -> str:
    """``_show`` for an error message, with credentials masked (``apiKey``, header values, URL passwords)."""
    parts = [p.split("[")[0] for p in where.split(".")]
    if isinstance(value, str | list | dict) and value and (
        _SECRET_LEAF.search(parts[-1]) or any(p.lower() == "headers" for p in parts)
    ):
        return "'***'"
    if isinstance(value, str) and parts[-1].lower().endswith("baseurl"):
        from ..secrets import mask_url

        return _show(mask_url(value))
    if parts[-1].lower().endswith("dsn") and value:
        # A database's DSN (the postgres backend's) may hold its password; one of the wrong type is not shown.
        from ..secrets import mask_dsn

        return _show(mask_dsn(value)) if isinstance(value, str) else "'***'"
    return _show(value)


def _range_hint(meta: Mapping[str, Any]) -> str:
    lo, hi = meta.get("lo"), meta.get("hi")
    if lo is None and hi is None:
        return f"; use a number from -{MAX_NUMBER} to {MAX_NUMBER}"
    return f"; allowed {lo if lo is not None else '-inf'}..{hi if hi is not None else MAX_NUMBER}"


def check_value(meta: Mapping[str, Any], value: Any, where: str, problems: list[str]) -> tuple[bool, Any]:
    """Check and normalise one scalar/list/dict value. Returns (ok, value)."""
    kind = meta["kind"]

    def show(v: Any) -> str:
        return _show_at(where, v)
    if value is None:
        if meta["nullable"]:
            return True, None
        problems.append(f"{where}: must not be null; expected {kind}")
        return False, None
    if kind == "any":
        return True, value
    if kind == "bool":
        if isinstance(value, bool):
            return True, value
        problems.append(f"{where}: {show(value)} is not a boolean; use true or false")
        return False, None
    if kind in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(f"{where}: {show(value)} is not a number{_range_hint(meta)}")
            return False, None
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{where}: {show(value)} is not a finite number{_range_hint(meta)}")
            return False, None
        if kind == "int" and isinstance(value, float) and not value.is_integer():
            problems.append(f"{where}: {show(value)} is not a whole number{_range_hint(meta)}")
            return False, None
        if abs(value) > MAX_NUMBER:
            problems.append(f"{where}: {show(value)} is too large{_range_hint(meta)}")
            return False, None
        num: float = int(value) if kind == "int" else float(value)
        lo, hi = meta["lo"], meta["hi"]
        if (lo is not None and num < lo) or (hi is not None and num > hi):
            if meta["clamp"]:
                num = min(hi if hi is not None else num, max(lo if lo is not None else num, num))
                num = int(num) if kind == "int" else float(num)
            else:
                bounds = f"{lo if lo is not None else '-inf'}..{hi if hi is not None else 'inf'}"
                problems.append(f"{where}: {show(value)} is out of range; allowed {bounds}")
                return False, None
        return True, num
    if kind == "str":
        if not isinstance(value, str):
            problems.append(f"{where}: {show(value)} is not a string")
            return False, None
        choices = meta["choices"]
        if choices and value not in choices and value.lower() not in choices:
            problems.append(f"{where}: {show(value)} is not allowed; use one of {', '.join(map(str, choices))}")
            return False, None
        return True, value.lower() if choices and value not in choices else value
    if kind == "duration":
        try:
            parse_duration_ms(value)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
            return False, None
        return True, value
    if kind == "list":
        if not isinstance(value, list):
            hint = ""
            if isinstance(value, str):
                # `config set plugins.disabled recency-boost`: the value has to be a list literal.
                hint = f"; write a list, e.g. {json.dumps([value])} (config set {where} '{json.dumps([value])}')"
            problems.append(f"{where}: {show(value)} is not a list{hint}")
            return False, None
        if meta.get("item") == "str" and not all(isinstance(v, str) for v in value):
            problems.append(f"{where}: every entry must be a string, got {show(value)}")
            return False, None
        allowed = meta.get("choices")
        if allowed and meta.get("item") == "str":
            unknown = [v for v in value if v not in allowed and v.lower() not in allowed]
            if unknown:
                problems.append(f"{where}: {show(unknown[0])} is not allowed"
                                f"{did_you_mean(unknown[0].lower(), list(allowed))}; "
                                f"each entry is one of {', '.join(map(str, allowed))}")
                return False, None
            return True, [v if v in allowed else v.lower() for v in value]
        if meta.get("item") == "collection":
            for i, entry in enumerate(value):
                bad = _collection_problem(entry)
                if bad:
                    problems.append(f"{where}[{i}]: {_show(entry)} {bad}")
                    return False, None
        return True, _copy(value)
    if kind == "dict":
        if not isinstance(value, Mapping):
            problems.append(f"{where}: {show(value)} is not a table/object")
            return False, None
        if meta.get("item") == "str":
            for k, v in value.items():
                if not isinstance(v, str):
                    problems.append(f"{where}.{k}: {_show_at(f'{where}.{k}', v)} is not a string; header values "
                                    "are strings")
                    return False, None
        return True, _copy(dict(value))
    return True, value
