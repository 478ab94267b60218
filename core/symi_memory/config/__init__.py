"""Loading, validating and resolving configuration.

:func:`read_raw_config` finds the file (``--config``, ``$SYMI_CONFIG``, then
``symi.toml``/``symi.json5``/``symi.json`` in the state dir) and parses it;
:func:`config_from_raw` validates it against the typed model in :mod:`.schema`
extended by the loaded plugins (a :class:`PluginConfig` the caller passes in)
and returns a :class:`Config`. Config never loads plugins: the host does
(:mod:`symi_memory.host`, whose ``load_config`` is the public one).
``Config.agent(id)`` resolves the per-agent view (defaults + ``agents.list[]``).
"""

from __future__ import annotations

import json
import logging
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs

from ..errors import ConfigError
from .fields import _show, build, deep_merge, defaults_of, fields_by_key, validate
from .schema import MemorySearch, RootConfig

__all__ = [
    "CONFIG_NAMES",
    "AgentView",
    "Config",
    "PluginConfig",
    "RawConfig",
    "config_from_raw",
    "default_state_dir",
    "find_config_file",
    "load_config",
    "parse_config_text",
    "read_config_file",
    "read_raw_config",
    "validate_with",
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
        if p.is_dir():
            raise ConfigError(f"--config {p} is a folder, not a config file; pass a TOML/JSON/JSON5 file "
                              "(the workspace is --workspace)")
        if not p.is_file():
            raise ConfigError(f"--config {p}: file not found; pass an existing TOML/JSON/JSON5 file")
        return p
    env = os.environ.get("SYMI_CONFIG")
    if env:
        p = Path(env).expanduser()
        if p.is_dir():
            raise ConfigError(f"SYMI_CONFIG={env} is a folder, not a config file; unset it or point it at one")
        if not p.is_file():
            raise ConfigError(f"SYMI_CONFIG={env}: file not found; unset it or point it at a config file")
        return p
    found = [state_dir / name for name in CONFIG_NAMES if (state_dir / name).is_file()]
    if len(found) > 1 and tuple(found) not in _WARNED_SHADOWED:
        # Edits to the others (a backend switched in symi.json) would change nothing, without a word.
        _WARNED_SHADOWED.add(tuple(found))
        for other in found[1:]:
            log.warning("%s is ignored: %s is read first (lookup order %s); move its settings there and remove it",
                        other, found[0].name, ", ".join(CONFIG_NAMES))
    return found[0] if found else None


_WARNED_SHADOWED: set[tuple[Path, ...]] = set()


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
    #: ``plugins.entries`` (per-plugin settings keyed by plugin id), for the contexts plugins get.
    plugin_entries: dict[str, Any] = attrs.field(factory=dict)

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
        """Resolve ``agents.defaults`` plus the ``agents.list[]`` entry with this id.

        The id names the agent's index file and state folder, so one that is not a plain file name
        (``../x``, ``a/b``, empty) is a :class:`ConfigError`.
        """
        problem = agent_id_problem(agent_id)
        if problem is not None:
            raise ConfigError(f"agent id {_show(agent_id)} {problem}")
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
            plugin_entries=dict((self.data.get("plugins") or {}).get("entries") or {}),
        )


def _normalise_memory_search(ms: dict[str, Any]) -> None:
    """Cross-key rules of spec/behaviour.md §1 (weights sum to 1, overlap < tokens)."""
    hybrid = ms["query"]["hybrid"]
    vw, tw = hybrid["vectorWeight"], hybrid["textWeight"]
    total = vw + tw
    if total <= 0:
        vw, tw, total = 0.45, 0.55, 1.0
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
    defaults = (data.get("agents") or {}).get("defaults") or {}
    _check_timezone(defaults.get("userTimezone"), "agents.defaults.userTimezone", problems)
    agents = raw.get("agents")
    entries = agents.get("list") if isinstance(agents, Mapping) else None
    # validate() has already reported an agents/agents.list of the wrong type.
    first_of: dict[str, int] = {}
    normalised: list[dict[str, Any]] = []
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        where = f"agents.list[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: expected a table/object with an id")
            continue
        if not isinstance(entry.get("id"), str) or not entry.get("id"):
            problems.append(f"{where}.id: every agents.list entry needs a non-empty string id")
        elif (problem := agent_id_problem(entry["id"])) is not None:
            problems.append(f"{where}.id: {_show(entry['id'])} {problem}")
        elif entry["id"] in first_of:
            # One entry would silently win over the other (its workspace, its settings).
            problems.append(f"{where}.id: {entry['id']!r} is listed twice (agents.list[{first_of[entry['id']]}] "
                            f"too); merge the two entries into one")
        else:
            first_of[entry["id"]] = i
        rest = {k: v for k, v in entry.items() if k != "id"}
        agent_extra = ((extra or {}).get("agents") or {}).get("defaults")
        own = validate(_agent_model(schema), rest, where, problems, agent_extra)
        _check_timezone(own.get("userTimezone"), f"{where}.userTimezone", problems)
        normalised.append({"id": entry.get("id"), **own})
    if problems:
        raise ConfigError([f"{origin}: {p}" for p in problems])
    if isinstance(entries, list):
        # An entry as validation normalised it (sources ["Memory"] -> ["memory"]), like agents.defaults is:
        # Config.agent() merges these, and the index names its sources in lower case.
        data["agents"]["list"] = normalised
    return data


#: The longest agent id (UTF-8 bytes): ``<id>-ws-<hash>.sqlite`` and its build and journal files stay under 255.
AGENT_ID_MAX_BYTES = 128


def agent_id_problem(agent_id: object) -> str | None:
    """Why ``agent_id`` cannot name an agent, or None.

    The id is a file name: ``{stateDir}/memory/{agentId}.sqlite`` and ``{stateDir}/agents/{agentId}/``. So no
    path separators, control characters, ``.`` or ``..``, and at most :data:`AGENT_ID_MAX_BYTES` UTF-8 bytes (the file
    names add up to 60 bytes to it, and a file system takes 255).
    """
    if not isinstance(agent_id, str):
        return "must be a string; use a name such as 'main' or 'work'"
    if not agent_id.strip():
        return "is empty; use a name such as 'main' or 'work'"
    size = len(agent_id.encode("utf-8", "surrogatepass"))
    if size > AGENT_ID_MAX_BYTES:
        return (f"is too long ({size} UTF-8 bytes): it names the agent's index file, so it may have at most "
                f"{AGENT_ID_MAX_BYTES}")
    if agent_id in (".", "..") or "/" in agent_id or "\\" in agent_id or any(
            ord(c) < 32 or ord(c) == 127 for c in agent_id):
        return ("cannot be used: it names the agent's index file and state folder, so it may not contain '/', '\\' "
                "or control characters, nor be '.' or '..'; use letters, digits, '_', '.', '-'")
    return None


def _check_timezone(name: Any, where: str, problems: list[str]) -> None:
    """An unknown ``userTimezone`` is a config error now, not a failed memory_append (or flush) later."""
    if not isinstance(name, str) or not name.strip():
        return  # unset or blank: the system's zone
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(f"{where}: {name!r} is not a known IANA time zone; use a name such as 'Europe/Berlin' "
                        f"(or remove it for the system's zone)")


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


class PluginConfig(Protocol):
    """What config needs from the loaded plugins (the host's :class:`~symi_memory.plugins.Plugins`).

    Config never loads plugins itself: the host reads the raw file
    (:func:`read_raw_config`), loads the plugins it names, and passes them in.
    """

    @property
    def disabled(self) -> Mapping[str, Any]:
        """The installed plugins ``plugins.disabled`` left out, by id."""
        ...

    def schema(self) -> type:
        """The core's model with every loaded plugin's typed sections mounted."""
        ...

    def config_defaults(self) -> dict[str, Any]:
        """The defaults plugins contribute through ``symi_memory_config_defaults``."""
        ...

    def disabled_config_defaults(self) -> dict[str, Any]:
        """The keys the disabled plugins would contribute (ignored, with a warning)."""
        ...


@attrs.frozen(kw_only=True)
class RawConfig:
    """The config file as read, before validation: what the host needs to load the plugins."""

    data: dict[str, Any]
    path: Path | None
    state_dir: Path
    origin: str = "config"

    @property
    def disabled_plugins(self) -> list[str]:
        """``plugins.disabled`` as written (an invalid value is reported by validation, not here)."""
        plugins = self.data.get("plugins")
        disabled = plugins.get("disabled") if isinstance(plugins, Mapping) else None
        return [p for p in disabled if isinstance(p, str)] if isinstance(disabled, list) else []


def read_raw_config(path: str | os.PathLike[str] | None = None, *, state_dir: str | os.PathLike[str] | None = None,
                    overrides: Mapping[str, Any] | None = None) -> RawConfig:
    """Find and parse the config file (the documented lookup), with ``overrides`` merged over it."""
    sd = default_state_dir(state_dir)
    file = find_config_file(path, sd)
    raw: dict[str, Any] = {}
    origin = "config"
    if file is not None:
        origin = str(file)
        raw = parse_config_text(read_config_file(file), file.suffix.lower(), origin)
    if overrides:
        raw = deep_merge(raw, overrides)
    return RawConfig(data=raw, path=file, state_dir=sd, origin=origin)


def validate_with(raw: Mapping[str, Any], plugins: PluginConfig, origin: str = "config") -> dict[str, Any]:
    """Validate ``raw`` against the core model plus ``plugins``' sections and contributed defaults.

    Returns the validated camelCase data (without defaults); raises
    :class:`ConfigError` listing every problem. Keys only a disabled plugin
    knows are dropped with one warning.
    """
    schema = plugins.schema()
    extra = plugins.config_defaults()
    return _validate_root(_without_disabled_keys(raw, plugins, extra, schema), origin, extra, schema)


_REQUIRED = object()


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    state_dir: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    extra_defaults: Mapping[str, Any] | None = None,
    plugins: PluginConfig = _REQUIRED,  # type: ignore[assignment]
) -> Config:
    """Find, parse and validate the configuration against ``plugins`` (already loaded).

    Most callers want :func:`symi_memory.load_config`, which loads the plugins
    the file names (minus ``plugins.disabled``) and calls this. ``overrides``
    is a camelCase dict merged over the file; ``extra_defaults`` replaces the
    defaults the plugins contribute.
    """
    if plugins is _REQUIRED:
        raise TypeError("symi_memory.config.load_config needs the loaded plugins (plugins=...); "
                        "symi_memory.load_config loads them for you")
    raw = read_raw_config(path, state_dir=state_dir, overrides=overrides)
    return config_from_raw(raw, plugins, extra_defaults=extra_defaults)


def config_from_raw(raw: RawConfig, plugins: PluginConfig, *,
                    extra_defaults: Mapping[str, Any] | None = None) -> Config:
    """The validated :class:`Config` of a file already read, against the loaded ``plugins``."""
    schema = plugins.schema()
    data_in = raw.data
    if extra_defaults is None:
        extra_defaults = plugins.config_defaults()
        data_in = _without_disabled_keys(data_in, plugins, extra_defaults, schema)
    data = _validate_root(data_in, raw.origin, extra_defaults, schema)
    full = deep_merge(deep_merge(defaults_of(schema), dict(extra_defaults)), data)
    return Config(data=full, path=raw.path, state_dir=raw.state_dir, raw=data_in, plugins=plugins, schema=schema)
