"""The host's front door: read the config, load the plugins it names, validate against them.

Config is a layer below the plugin host and never loads plugins; this is
where the two meet. :func:`load_config` is the public ``symi_memory.load_config``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from .config import Config, config_from_raw, read_raw_config, validate_with
from .config.fields import deep_merge, defaults_of
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
    return config_from_raw(raw, plugins, extra_defaults=extra_defaults)


def validate_raw(raw: Mapping[str, Any], origin: str = "config") -> dict[str, Any]:
    """Validate a raw config dict (what ``config set`` would write); raises ConfigError listing every problem.

    Names must resolve against what is installed too, so a typo in a backend,
    provider or reranker name is refused up front.
    """
    disabled = (raw.get("plugins") or {}).get("disabled") if isinstance(raw.get("plugins"), Mapping) else None
    plugins = load_plugins(disabled if isinstance(disabled, list) else [])
    data = validate_with(raw, plugins, origin)
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
