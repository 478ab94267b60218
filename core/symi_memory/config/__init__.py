"""Loading, validating and resolving configuration.

``load_config`` finds the file (``--config``, ``$SYMI_CONFIG``, then
``symi.toml``/``symi.json5``/``symi.json`` in the state dir), validates it
against the typed model in :mod:`.schema`, and returns a :class:`Config`.
``Config.agent(id)`` resolves the per-agent view (defaults + ``agents.list[]``).
"""

from __future__ import annotations

import json
import logging
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
    "read_config_file",
    "validate_raw",
]

log = logging.getLogger("symi_memory.config")

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


MAX_DEPTH = 32


def read_config_file(path: Path) -> str:
    """The text of a config file, or a one-line :class:`ConfigError` (unreadable, not UTF-8)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc}); check the path and its permissions") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save the file as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


def _too_deep(data: Any, limit: int) -> bool:
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, Mapping):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return False


def parse_config_text(text: str, suffix: str, origin: str) -> dict[str, Any]:
    """Parse TOML, JSON or JSON5 text into a dict (nested at most :data:`MAX_DEPTH` levels)."""
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            import json5

            data = json5.loads(text)
    except RecursionError:
        raise ConfigError(f"{origin}: nested too deeply to parse; config nests at most {MAX_DEPTH} levels") from None
    except Exception as exc:  # every parser has its own error type
        raise ConfigError(f"{origin}: cannot parse ({_one_line(exc)}); fix the syntax") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: the top level must be a table/object")
    if _too_deep(data, MAX_DEPTH):
        raise ConfigError(f"{origin}: nested deeper than {MAX_DEPTH} levels; no config key nests that deep")
    return data


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


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
    agents = raw.get("agents")
    entries = agents.get("list") if isinstance(agents, Mapping) else None
    # validate() has already reported an agents/agents.list of the wrong type.
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
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


def _without_disabled_keys(raw: Mapping[str, Any], plugins: Any, extra: Mapping[str, Any],
                           schema: type = RootConfig) -> dict[str, Any]:
    """``raw`` minus the keys only a disabled plugin knows, with one warning naming them.

    Disabling a plugin must not turn its settings into "unknown key" errors:
    they stay in the file for when it is enabled again, and are ignored now.
    """
    if not getattr(plugins, "disabled", None):
        return dict(raw)
    theirs = plugins.disabled_config_defaults()
    if not theirs:
        return dict(raw)
    known = deep_merge(defaults_of(schema), dict(extra))
    dropped: list[str] = []

    def walk(node: Mapping[str, Any], dis: Mapping[str, Any], kn: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if key in dis and key not in kn:
                dropped.append(path)
                continue
            if key in dis and isinstance(value, Mapping) and isinstance(dis[key], Mapping) \
                    and isinstance(kn.get(key), Mapping):
                out[key] = walk(value, dis[key], kn[key], path)
            else:
                out[key] = value
        return out

    cleaned = walk(raw, theirs, known, "")
    agents = cleaned.get("agents")
    dis_agent = ((theirs.get("agents") or {}).get("defaults")) or {}
    if isinstance(agents, Mapping) and isinstance(agents.get("list"), list) and dis_agent:
        entries = [walk(e, dis_agent, known["agents"]["defaults"], f"agents.list[{i}]") if isinstance(e, Mapping) else e
                   for i, e in enumerate(agents["list"])]
        cleaned["agents"] = {**agents, "list": entries}
    if dropped:
        names = ", ".join(sorted(plugins.disabled))
        log.warning("ignoring %s: config of a disabled plugin (plugins.disabled: %s)", ", ".join(dropped), names)
    return cleaned


def validate_raw(raw: Mapping[str, Any], origin: str = "config") -> dict[str, Any]:
    """Validate a raw config dict (with plugin defaults); raises ConfigError listing every problem."""
    from ..plugins import collect_config_defaults, load_plugins, resolve_backend_name

    disabled = (raw.get("plugins") or {}).get("disabled") if isinstance(raw.get("plugins"), Mapping) else None
    plugins = load_plugins(disabled if isinstance(disabled, list) else [])
    schema = plugins.schema()
    extra = collect_config_defaults(raw, plugins)
    data = _validate_root(_without_disabled_keys(raw, plugins, extra, schema), origin, extra, schema)
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
        raw = parse_config_text(read_config_file(file), file.suffix.lower(), origin)
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
        raw = _without_disabled_keys(raw, plugins, extra_defaults, plugins.schema())
    schema = plugins.schema()
    data = _validate_root(raw, origin, extra_defaults, schema)
    full = deep_merge(deep_merge(defaults_of(schema), dict(extra_defaults or {})), data)
    return Config(data=full, path=file, state_dir=sd, raw=raw, plugins=plugins, schema=schema)
