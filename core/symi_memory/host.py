"""The host's front door: read the config, load the plugins it names, validate against them.

Config is a layer below the plugin host and never loads plugins; this is
where the two meet. :func:`load_config` is the public ``symi_memory.load_config``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from .config import Config, RawConfig, config_from_raw, read_raw_config, validate_with
from .config.fields import deep_merge, defaults_of
from .errors import ConfigError
from .plugins import Plugins, load_plugins, resolve_backend_name

__all__ = ["load_config", "validate_raw"]


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    state_dir: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    extra_defaults: Mapping[str, Any] | None = None,
    plugins: Plugins | None = None,
    extra_plugins: Iterable[tuple[str, object]] = (),
) -> Config:
    """Find, parse and validate the configuration, with the plugins it enables.

    ``overrides`` is a camelCase dict merged over the file (tests, embedders).
    ``plugins`` is an already loaded :class:`~symi_memory.plugins.Plugins`; by
    default the installed ones minus ``plugins.disabled`` (plus
    ``extra_plugins``) are loaded here, once, and kept on the config so
    ``open_memory`` reuses them. Their typed sections extend the schema.
    """
    raw = read_raw_config(path, state_dir=state_dir, overrides=overrides)
    if plugins is None:
        plugins = load_plugins(raw.disabled_plugins, extra=extra_plugins)
    return validated_config(raw, plugins, extra_defaults=extra_defaults)


def validated_config(raw: RawConfig, plugins: Plugins, *, extra_defaults: Mapping[str, Any] | None = None) -> Config:
    """:func:`~symi_memory.config.config_from_raw`, whose error names first a backend no installed plugin provides."""
    try:
        return config_from_raw(raw, plugins, extra_defaults=extra_defaults)
    except ConfigError as exc:
        raise _missing_backend_first(exc, raw.data, plugins) from None


def _missing_backend_first(exc: ConfigError, raw: Mapping[str, Any], plugins: Plugins) -> ConfigError:
    """``exc``, led by the backend the config selects when no installed plugin provides it.

    That plugin's settings (``store.postgres.*``) are unknown keys without it: saying only that would send the
    operator hunting for a typo when the plugin is not installed (or is disabled).
    """
    try:
        name = resolve_backend_name(raw)
        if isinstance(name, str) and name:
            plugins.backend(name)
    except ConfigError as missing:
        return ConfigError([*missing.problems, *exc.problems])
    except Exception:  # a malformed slot or memory table: its own problem is in exc already
        pass
    return exc


def validate_raw(raw: Mapping[str, Any], origin: str = "config") -> dict[str, Any]:
    """Validate a raw config dict (what ``config set`` would write); raises ConfigError listing every problem.

    Names must resolve against what is installed too, so a typo in a backend,
    provider or reranker name is refused up front.
    """
    disabled = (raw.get("plugins") or {}).get("disabled") if isinstance(raw.get("plugins"), Mapping) else None
    plugins = load_plugins(disabled if isinstance(disabled, list) else [])
    try:
        data = validate_with(raw, plugins, origin)
    except ConfigError as exc:
        raise _missing_backend_first(exc, raw, plugins) from None
    full = deep_merge(defaults_of(plugins.schema()), data)
    name = resolve_backend_name(full)
    if name is not None:
        plugins.backend(name)
    ms = full["agents"]["defaults"]["memorySearch"]
    for key in ("provider", "fallback"):
        if ms[key] not in ("auto", "none"):
            plugins.provider(ms[key], key=f"agents.defaults.memorySearch.{key}")
    if ms["query"]["rerank"]["provider"] != "none":
        plugins.reranker(ms["query"]["rerank"]["provider"])
    return data
