"""Loading, validating and resolving configuration.

``load_config`` finds the file (``--config``, ``$SYMI_CONFIG``, then
``symi.toml``/``symi.json5``/``symi.json`` in the state dir), validates it
against the typed model in :mod:`.schema`, and returns a :class:`Config`.
``Config.agent(id)`` resolves the per-agent view (defaults + ``agents.list[]``).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..errors import ConfigError
from .fields import build, deep_merge, defaults_of, fields_by_key, validate
from .schema import MemorySearch, RootConfig

__all__ = [
    "CONFIG_NAMES",
    "AgentView",
    "Config",
    "default_state_dir",
    "find_config_file",
    "load_config",
    "parse_config_text",
    "validate_raw",
]

CONFIG_NAMES = ("symi.toml", "symi.json5", "symi.json")


def default_state_dir(state_dir: str | os.PathLike[str] | None = None) -> Path:
    """``--state-dir``, else ``$SYMI_STATE_DIR``, else ``~/.symi``."""
    raw = state_dir or os.environ.get("SYMI_STATE_DIR") or "~/.symi"
    return Path(raw).expanduser().resolve()


def find_config_file(path: str | os.PathLike[str] | None, state_dir: Path) -> Path | None:
    """The config file to read, following the documented lookup order."""
    if path:
        p = Path(path).expanduser()
        if not p.is_file():
            raise ConfigError(f"--config {p}: file not found; pass an existing TOML/JSON/JSON5 file")
        return p
    env = os.environ.get("SYMI_CONFIG")
    if env:
        p = Path(env).expanduser()
        if not p.is_file():
            raise ConfigError(f"SYMI_CONFIG={env}: file not found; unset it or point it at a config file")
        return p
    for name in CONFIG_NAMES:
        p = state_dir / name
        if p.is_file():
            return p
    return None


def parse_config_text(text: str, suffix: str, origin: str) -> dict[str, Any]:
    """Parse TOML, JSON or JSON5 text into a dict."""
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            import json5

            data = json5.loads(text)
    except Exception as exc:  # every parser has its own error type
        raise ConfigError(f"{origin}: cannot parse ({exc}); fix the syntax") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: the top level must be a table/object")
    return data


@attrs.frozen(kw_only=True)
class AgentView:
    """The resolved settings of one agent."""

    id: str
    workspace: Path
    state_dir: Path
    memory_search: dict[str, Any]
    settings: MemorySearch
    compaction: dict[str, Any]
    context_window: int
    user_timezone: str | None
    store_path: Path

    @property
    def sessions_dir(self) -> Path:
        return self.state_dir / "agents" / self.id / "sessions"


@attrs.frozen(kw_only=True)
class Config:
    """A validated configuration. ``data`` is camelCase with defaults filled."""

    data: dict[str, Any]
    path: Path | None = None
    state_dir: Path = attrs.field(factory=default_state_dir)
    raw: dict[str, Any] = attrs.field(factory=dict)
    plugins: Any = attrs.field(default=None, eq=False, repr=False)
    #: The config model in force: the core's plus the loaded plugins' sections.
    schema: type = attrs.field(default=RootConfig, eq=False, repr=False)

    @property
    def root(self) -> Any:
        return build(self.schema, self.data)

    def get(self, key: str) -> Any:
        """Look up a dotted camelCase key, e.g. ``memory.citations``."""
        node: Any = self.data
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise KeyError(key)
            node = node[part]
        return node

    def agent(self, agent_id: str = "main", *, workspace: str | os.PathLike[str] | None = None) -> AgentView:
        """Resolve ``agents.defaults`` plus the ``agents.list[]`` entry with this id."""
        agents = self.data["agents"]
        defaults = agents["defaults"]
        override: dict[str, Any] = {}
        for entry in agents.get("list", []):
            if entry.get("id") == agent_id:
                override = {k: v for k, v in entry.items() if k != "id"}
        merged = deep_merge(defaults, override)
        base_extra = defaults["memorySearch"].get("extraPaths", [])
        own_extra = override.get("memorySearch", {}).get("extraPaths", [])
        seen: list[str] = []
        for p in [*base_extra, *own_extra]:
            p = p.strip()
            if p and p not in seen:
                seen.append(p)
        ms = merged["memorySearch"]
        ms["extraPaths"] = seen
        _normalise_memory_search(ms)
        ws = workspace or merged.get("workspace") or str(self.state_dir / "workspace")
        if not workspace and merged.get("workspace") and self.path is not None:
            # A relative workspace in a config file means relative to that file, not to the cwd.
            ws = os.path.join(self.path.parent, os.path.expanduser(ws))
        store = ms["store"]["path"].replace("{agentId}", agent_id).replace("{stateDir}", str(self.state_dir))
        return AgentView(
            id=agent_id,
            workspace=Path(ws).expanduser().resolve(),
            state_dir=self.state_dir,
            memory_search=ms,
            settings=build(MemorySearch, ms),
            compaction=merged["compaction"],
            context_window=merged["contextWindow"],
            user_timezone=merged.get("userTimezone"),
            store_path=Path(store).expanduser(),
        )


def _normalise_memory_search(ms: dict[str, Any]) -> None:
    """Cross-key rules of spec/behaviour.md §1 (weights sum to 1, overlap < tokens)."""
    hybrid = ms["query"]["hybrid"]
    vw, tw = hybrid["vectorWeight"], hybrid["textWeight"]
    total = vw + tw
    if total <= 0:
        vw, tw, total = 0.7, 0.3, 1.0
    hybrid["vectorWeight"], hybrid["textWeight"] = vw / total, tw / total
    chunking = ms["chunking"]
    chunking["overlap"] = max(0, min(chunking["overlap"], chunking["tokens"] - 1))


def _agent_model(schema: type) -> type:
    agents = fields_by_key(schema)["agents"].metadata["symi"]["cls"]
    return fields_by_key(agents)["defaults"].metadata["symi"]["cls"]


def _validate_root(raw: Mapping[str, Any], origin: str, extra: Mapping[str, Any] | None,
                   schema: type = RootConfig) -> dict[str, Any]:
    problems: list[str] = []
    data = validate(schema, raw, "", problems, extra)
    for i, entry in enumerate(raw.get("agents", {}).get("list", []) or []):
        where = f"agents.list[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: expected a table/object with an id")
            continue
        if not isinstance(entry.get("id"), str) or not entry.get("id"):
            problems.append(f"{where}.id: every agents.list entry needs a non-empty string id")
        rest = {k: v for k, v in entry.items() if k != "id"}
        agent_extra = ((extra or {}).get("agents") or {}).get("defaults")
        validate(_agent_model(schema), rest, where, problems, agent_extra)
    if problems:
        raise ConfigError([f"{origin}: {p}" for p in problems])
    return data


def validate_raw(raw: Mapping[str, Any], origin: str = "config") -> dict[str, Any]:
    """Validate a raw config dict (with plugin defaults); raises ConfigError listing every problem."""
    from ..plugins import collect_config_defaults, load_plugins, resolve_backend_name

    disabled = (raw.get("plugins") or {}).get("disabled") if isinstance(raw.get("plugins"), Mapping) else None
    plugins = load_plugins(disabled if isinstance(disabled, list) else [])
    schema = plugins.schema()
    data = _validate_root(raw, origin, collect_config_defaults(raw, plugins), schema)
    # Names must resolve against what is installed, so `config set` refuses a typo up front.
    full = deep_merge(defaults_of(schema), data)
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


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    state_dir: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    extra_defaults: Mapping[str, Any] | None = None,
    plugins: Any = None,
) -> Config:
    """Find, parse and validate the configuration.

    ``overrides`` is a camelCase dict merged over the file (used by tests and
    embedders). ``extra_defaults`` are plugin-contributed defaults; when None
    they are collected from the installed plugins. ``plugins`` is an already
    loaded :class:`~symi_memory.plugins.Plugins` (by default the installed
    ones minus ``plugins.disabled``); their typed config sections extend the
    schema.
    """
    sd = default_state_dir(state_dir)
    file = find_config_file(path, sd)
    raw: dict[str, Any] = {}
    origin = "config"
    if file is not None:
        origin = str(file)
        raw = parse_config_text(file.read_text(encoding="utf-8"), file.suffix.lower(), origin)
    if overrides:
        raw = deep_merge(raw, overrides)
    if plugins is None:
        from ..plugins import load_plugins

        disabled = (raw.get("plugins") or {}).get("disabled") if isinstance(raw.get("plugins"), Mapping) else None
        # Loaded once here and reused by open_memory, so plugins import (and warn) once.
        plugins = load_plugins(disabled if isinstance(disabled, list) else [])
    if extra_defaults is None:
        from ..plugins import collect_config_defaults

        extra_defaults = collect_config_defaults(raw, plugins)
    schema = plugins.schema()
    data = _validate_root(raw, origin, extra_defaults, schema)
    full = deep_merge(deep_merge(defaults_of(schema), dict(extra_defaults or {})), data)
    return Config(data=full, path=file, state_dir=sd, raw=raw, plugins=plugins, schema=schema)
