"""Plugin discovery and the name -> implementation registries.

Plugins are found through the ``symi_memory`` entry-point group; the
builtins are declared there too, so they use the same door as third-party
plugins. Nothing here is a module-level global: call :func:`load_plugins`.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from . import hookspecs
from .errors import ConfigError, PluginError
from .specs import DEFAULT_BACKEND, BackendSpec, ConfigSection, PostProcessorSpec, ProviderSpec, RerankerSpec

if TYPE_CHECKING:
    from .entry_points import EntryPoint

__all__ = [
    "AUTOLOAD_ENV",
    "DEFAULT_BACKEND",
    "EXTRA_PLUGINS_ENV",
    "ENTRY_POINT_GROUP",
    "PluginInfo",
    "Plugins",
    "collect_config_defaults",
    "load_plugins",
    "resolve_backend_name",
]

log = logging.getLogger("symi_memory.plugins")

ENTRY_POINT_GROUP = "symi_memory"
AUTOLOAD_ENV = "SYMI_MEMORY_DISABLE_PLUGIN_AUTOLOAD"
#: Comma-separated import paths of extra in-process plugins (like pytest's
#: ``PYTEST_PLUGINS``): how a test suite opts in to the fakes for itself and
#: the CLI subprocesses it starts, without an entry point anyone else sees.
EXTRA_PLUGINS_ENV = "SYMI_MEMORY_PLUGINS"
#: The older switch for the test fakes; kept as a shorthand for
#: ``SYMI_MEMORY_PLUGINS=symi_memory.testing.plugin``. Nothing sets it for you.
LEGACY_TESTING_ENV = "SYMI_MEMORY_TESTING"
OWN_DISTRIBUTION = "symi-memory"

_KINDS: dict[str, tuple[str, type]] = {
    "backends": ("symi_memory_register_backends", BackendSpec),
    "embeddingProviders": ("symi_memory_register_embedding_providers", ProviderSpec),
    "rerankers": ("symi_memory_register_rerankers", RerankerSpec),
    "postprocessors": ("symi_memory_register_postprocessors", PostProcessorSpec),
}


@attrs.frozen(kw_only=True)
class PluginInfo:
    """One loaded plugin, as ``plugins --json`` lists it."""

    id: str
    distribution: str
    version: str
    registers: dict[str, list[str]]
    disabled: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "distribution": self.distribution, "version": self.version,
                "registers": self.registers, "disabled": self.disabled}


@attrs.define
class Plugins:
    """A loaded plugin manager plus the registries built from it."""

    pm: pluggy.PluginManager
    dists: dict[str, tuple[str, str]]
    failed: dict[str, str] = attrs.field(factory=dict)
    #: Installed plugins left out by ``plugins.disabled``: id -> entry point (not imported).
    disabled: dict[str, EntryPoint] = attrs.field(factory=dict)
    registries: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    owners: dict[str, dict[str, str]] = attrs.field(factory=dict)
    config_sections: list[tuple[str, ConfigSection]] = attrs.field(factory=list)
    #: What each plugin's ``symi_memory_config_defaults`` returned when the registries were built.
    contributed_defaults: list[tuple[str, list[Any]]] = attrs.field(factory=list)
    _schema: Any = None

    @property
    def backends(self) -> dict[str, BackendSpec]:
        return self.registries["backends"]

    @property
    def providers(self) -> dict[str, ProviderSpec]:
        return self.registries["embeddingProviders"]

    @property
    def rerankers(self) -> dict[str, RerankerSpec]:
        return self.registries["rerankers"]

    @property
    def postprocessors(self) -> dict[str, PostProcessorSpec]:
        return self.registries["postprocessors"]

    def infos(self) -> list[PluginInfo]:
        out = []
        for plugin_id, (dist, version) in sorted(self.dists.items()):
            regs = {kind: sorted(n for n, owner in self.owners[kind].items() if owner == plugin_id) for kind in _KINDS}
            out.append(PluginInfo(id=plugin_id, distribution=dist, version=version, registers=regs))
        return out

    def disabled_infos(self) -> list[PluginInfo]:
        """The installed plugins ``plugins.disabled`` left out (nothing registered)."""
        return [
            PluginInfo(id=pid, distribution=ep.dist.name if ep.dist else "?",
                       version=ep.dist.version if ep.dist else "?", registers={kind: [] for kind in _KINDS},
                       disabled=True)
            for pid, ep in sorted(self.disabled.items())
        ]

    def disabled_config_defaults(self) -> dict[str, Any]:
        """The config keys the disabled plugins would contribute (so config holding them stays valid).

        Imports each disabled plugin's hooks module only when asked, and calls
        its config hooks through a scratch plugin manager of its own (so it
        registers nothing here); one that fails to import contributes nothing.
        """
        from .config.fields import deep_merge, defaults_of

        out: dict[str, Any] = {}
        for pid, ep in sorted(self.disabled.items()):
            sections: list[ConfigSection] = []
            try:
                scratch = pluggy.PluginManager(hookspecs.PROJECT)
                scratch.add_hookspecs(hookspecs)
                scratch.register(ep.load(), name=pid)
                contributed = scratch.hook.symi_memory_config_defaults()
                scratch.hook.symi_memory_register_config_sections(register=sections.append)
            except Exception as exc:
                log.debug("disabled plugin %r: cannot read its config keys (%s)", pid, exc)
                continue
            for one in contributed:
                if isinstance(one, Mapping):
                    out = deep_merge(out, one)
            for spec in sections:
                if not isinstance(spec, ConfigSection) or not attrs.has(spec.model):
                    continue
                nested: dict[str, Any] = defaults_of(spec.model)
                for part in reversed(spec.key.split(".")):
                    nested = {part: nested}
                out = deep_merge(out, nested)
        return out

    def config_defaults(self) -> dict[str, Any]:
        """The defaults the loaded plugins contribute through ``symi_memory_config_defaults``."""
        return collect_config_defaults({}, self)

    def entry_settings(self, kind: str, name: str, entries: Mapping[str, Any]) -> dict[str, Any]:
        """The ``plugins.entries.<id>`` table (``entries``) of the plugin that registered ``name`` among ``kind``.

        ``{}`` when that plugin has no table there (or nobody registered ``name``).
        """
        owner = self.owners.get(kind, {}).get(name)
        found = entries.get(owner) if owner is not None else None
        return dict(found) if isinstance(found, Mapping) else {}

    def backend(self, name: str, key: str = "plugins.slots.memory") -> BackendSpec:
        return _pick(self.backends, name, key, "backend", self.failed)

    def provider(self, name: str, key: str = "agents.defaults.memorySearch.provider") -> ProviderSpec:
        return _pick(self.providers, name, key, "embedding provider", self.failed)

    def reranker(self, name: str, key: str = "agents.defaults.memorySearch.query.rerank.provider") -> RerankerSpec:
        return _pick(self.rerankers, name, key, "reranker", self.failed)

    def _build(self) -> None:
        """Build the registries; a plugin whose hook raises is dropped (like one that fails to import).

        What a plugin registers wrongly (a wrong record type, a name another plugin has) stays an error:
        that is a conflict to resolve, not one plugin's breakage.
        """
        while True:
            try:
                self._build_once()
                return
            except _HookRaised as exc:
                if self.dists.get(exc.plugin_id, ("?",))[0] == OWN_DISTRIBUTION:
                    raise exc.error from None  # a bug of ours: shown as one, not hidden as a skipped plugin
                self._drop(exc.plugin_id, f"{exc.hook_name} raised {type(exc.error).__name__}: {exc.error}")

    def _drop(self, plugin_id: str, why: str) -> None:
        dist = self.dists.pop(plugin_id, ("?", "?"))[0]
        self.pm.unregister(name=plugin_id)
        self.failed[plugin_id] = f"{dist}: {why}"
        log.warning("plugin %r from %s failed (%s); skipped", plugin_id, dist, why)

    def _build_once(self) -> None:
        for kind, (hook_name, spec_type) in _KINDS.items():
            registry: dict[str, Any] = {}
            owners: dict[str, str] = {}
            for plugin_id, caller in _per_plugin_callers(self.pm, hook_name):
                _call(self.pm, plugin_id, hook_name, caller,
                      register=self._register_fn(kind, spec_type, plugin_id, registry, owners))
            self.registries[kind] = registry
            self.owners[kind] = owners
        self.config_sections = []
        for plugin_id, caller in _per_plugin_callers(self.pm, "symi_memory_register_config_sections"):
            _call(self.pm, plugin_id, "symi_memory_register_config_sections", caller,
                  register=self._register_section(plugin_id))
        # Called here once, and what it returned is what config loading uses (every time): a plugin whose hook
        # raises is found here, and a hook that would raise on a later call cannot take a command down.
        self.contributed_defaults = [
            (plugin_id, list(_call(self.pm, plugin_id, "symi_memory_config_defaults", caller)))
            for plugin_id, caller in _per_plugin_callers(self.pm, "symi_memory_config_defaults")]
        self._schema = None

    def _register_section(self, plugin_id: str) -> Callable[[ConfigSection], None]:
        def register(spec: ConfigSection) -> None:
            if not isinstance(spec, ConfigSection) or not attrs.has(spec.model):
                raise PluginError(f"plugin {plugin_id!r} registered {spec!r} as a config section; expected a "
                                  f"ConfigSection whose model is an attrs class declared with config.fields.opt")
            if not spec.key or any(not part for part in spec.key.split(".")):
                raise PluginError(f"plugin {plugin_id!r}: config section key {spec.key!r} is not a dotted path")
            self.config_sections.append((plugin_id, spec))

        return register

    def schema(self) -> type:
        """The core's config model with every loaded plugin's sections mounted (cached)."""
        if self._schema is None:
            from .config.extend import Mount, extend_schema
            from .config.schema import RootConfig

            mounts = [Mount(path=tuple(s.key.split(".")), model=s.model, owner=pid, doc=s.doc)
                      for pid, s in self.config_sections]
            self._schema = extend_schema(RootConfig, mounts)
        return self._schema

    def _register_fn(
        self, kind: str, spec_type: type[Any], plugin_id: str, registry: dict[str, Any], owners: dict[str, str]
    ) -> Callable[[Any], None]:
        """The ``register`` callable one plugin's hook call gets.

        Its ``registered`` list names what was registered through it, so a
        wrapper (``hookwrapper``/``wrapper``) sees each plugin's registrations
        after its ``yield``.
        """
        registered: list[str] = []

        def register(spec: Any) -> None:
            if not isinstance(spec, spec_type):
                raise PluginError(
                    f"plugin {plugin_id!r} registered {spec!r} as one of its {kind}; expected a {spec_type.__name__}"
                )
            if spec.name in registry:
                first = owners[spec.name]
                raise PluginError(
                    f"{kind} name {spec.name!r} is registered twice: by plugin {first!r} "
                    f"(distribution {self.dists.get(first, ('?',))[0]}) and by plugin {plugin_id!r} "
                    f"(distribution {self.dists.get(plugin_id, ('?',))[0]}); uninstall or disable one "
                    f"(plugins.disabled)"
                )
            registry[spec.name] = spec
            owners[spec.name] = plugin_id
            registered.append(spec.name)

        register.registered = registered  # type: ignore[attr-defined]
        return register


class _HookRaised(Exception):
    """A plugin's hook raised something other than a :class:`PluginError` while the registries were built."""

    def __init__(self, plugin_id: str, hook_name: str, error: Exception) -> None:
        super().__init__(plugin_id, hook_name, error)
        self.plugin_id = plugin_id
        self.hook_name = hook_name
        self.error = error


def _call(pm: pluggy.PluginManager, plugin_id: str, hook_name: str, caller: Any, **kwargs: Any) -> Any:
    try:
        return caller(**kwargs)
    except PluginError:
        raise
    except Exception as exc:
        raise _HookRaised(_culprit(pm, hook_name, plugin_id, kwargs, exc), hook_name, exc) from exc


def _raiser(pm: pluggy.PluginManager, hook_name: str, error: BaseException) -> str | None:
    """The plugin whose implementation of ``hook_name`` raised ``error``: the innermost of the hook's
    implementations (wrappers included) that ``error``'s traceback passes through; None when it passes
    through none, or through a function two plugins registered.

    The traceback runs from the call down to the ``raise``: a wrapper that only let the wrapped plugin's
    error through (``outcome.get_result()``, or the exception thrown back at its ``yield``) sits above that
    plugin's frame, and a wrapper that raised its own error is the innermost implementation in it. An error
    raised while handling another (its ``__cause__`` or ``__context__``) that an implementation raised began
    there: a wrapper that restates the wrapped plugin's error is not the one that failed.
    """
    owners: dict[Any, set[str]] = {}
    for impl in getattr(pm.hook, hook_name).get_hookimpls():
        code = getattr(impl.function, "__code__", None)
        if code is not None and impl.plugin_name is not None:
            owners.setdefault(code, set()).add(impl.plugin_name)

    def innermost(exc: BaseException) -> set[str] | None:
        found: set[str] | None = None
        tb = exc.__traceback__
        while tb is not None:
            found = owners.get(tb.tb_frame.f_code, found)
            tb = tb.tb_next
        return found

    found = innermost(error)
    seen = {id(error)}
    earlier: BaseException | None = error
    while earlier is not None:
        earlier = earlier.__cause__ if earlier.__cause__ is not None else earlier.__context__
        if earlier is None or id(earlier) in seen:
            break
        seen.add(id(earlier))
        found = innermost(earlier) or found
    return next(iter(found)) if found is not None and len(found) == 1 else None


def _culprit(pm: pluggy.PluginManager, hook_name: str, plugin_id: str, kwargs: Mapping[str, Any],
             error: BaseException | None = None) -> str:
    """Which plugin made ``plugin_id``'s call of ``hook_name`` raise ``error``: it, or a wrapper around it.

    Every plugin's wrappers run around every call (see :func:`_per_plugin_callers`), so a raising wrapper
    shows up in the call of whichever plugin comes first, often a builtin. The traceback names the
    implementation that raised (:func:`_raiser`), also for a wrapper that raises around some calls only
    (because of what the wrapped plugin registered, or on its second call). Without an answer there, the
    call is tried again with ``plugin_id``'s implementation alone, then with each wrapper in turn;
    registrations during these tries go nowhere. When nothing raises again, ``plugin_id`` is blamed.
    """
    if error is not None and (raiser := _raiser(pm, hook_name, error)) is not None:
        return raiser
    impls = getattr(pm.hook, hook_name).get_hookimpls()
    wrappers = [i.plugin_name for i in impls if (i.hookwrapper or i.wrapper) and i.plugin_name != plugin_id]
    if not wrappers:
        return plugin_id
    probe = {k: (lambda *_a, **_k: None) if k == "register" else v for k, v in kwargs.items()}

    def raises(keep: set[str]) -> bool:
        others = [i.plugin for i in impls if i.plugin_name not in keep]
        try:
            pm.subset_hook_caller(hook_name, remove_plugins=others)(**probe)
        except Exception:
            return True
        return False

    if raises({plugin_id}):
        return plugin_id
    return next((w for w in wrappers if raises({plugin_id, w})), plugin_id)


def plugin_that_raised(exc: BaseException) -> tuple[str, str, str] | None:
    """``(plugin id, "distribution version", "file:line")`` of the installed third-party plugin whose code raised
    ``exc`` (the innermost frame of the traceback in one of its packages), or None when no such plugin's code is
    in it (a bug of ours). Read only after a crash: the entry points again, none of them imported."""
    from .entry_points import find

    owners: dict[str, tuple[str, str]] = {}
    try:
        for ep in find(ENTRY_POINT_GROUP):
            dist = ep.dist.name if ep.dist else "?"
            if dist != OWN_DISTRIBUTION:
                package = ep.value.split(":", 1)[0].strip().split(".", 1)[0]
                owners.setdefault(package, (ep.name, f"{dist} {ep.dist.version if ep.dist else '?'}"))
    except Exception:  # the crash report must not crash
        return None
    found = None
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__") or ""
        owner = owners.get(module.split(".", 1)[0])
        if owner is not None:
            code = tb.tb_frame.f_code
            found = (*owner, f"{os.path.basename(code.co_filename)}:{tb.tb_lineno}")
        tb = tb.tb_next
    return found


def plugin_failure(what: str, exc: BaseException) -> str:
    """One line for a call that raised ``exc`` where no error was expected: ``"<what> failed: ..."``, naming the
    third-party plugin whose code raised it, with the file and line (a bug of that plugin), when there is one."""
    culprit = plugin_that_raised(exc)
    if culprit is None:
        return f"{what} failed: {exc}"
    plugin_id, dist, where = culprit
    return (f"{what} failed: plugin {plugin_id!r} ({dist}) raised {type(exc).__name__} at {where}: {exc} (a bug "
            f"of that plugin; plugins.disabled = [\"{plugin_id}\"] turns it off)")


def _pick(registry: Mapping[str, Any], name: str, key: str, what: str, failed: Mapping[str, str]) -> Any:
    if name in registry:
        return registry[name]
    available = ", ".join(sorted(registry)) or "(none)"
    broken = "".join(f" Plugin {pid!r} failed to load ({why})." for pid, why in sorted(failed.items()))
    raise ConfigError(
        f"{key} = {name!r}: no {what} of that name; available: {available}. Is the plugin installed "
        f"(and not listed in plugins.disabled)?{broken}"
    )


def _per_plugin_callers(pm: pluggy.PluginManager, hook_name: str) -> list[tuple[str, Any]]:
    """One pluggy hook caller per implementing plugin, in load order (builtins first).

    The registries need to know which plugin registered each name (for the
    duplicate-name error and ``plugins --json``), so each plugin's
    implementation is called through its own subset caller. The call still goes
    through pluggy, so wrappers (``hookwrapper``/``wrapper``) from any plugin
    wrap every call and see every registration, and pluggy's tracing and call
    monitoring see them too. Load order only decides which plugin a
    duplicate-name error names first: a slot is never chosen by order.
    """
    hook = getattr(pm.hook, hook_name)
    impls = hook.get_hookimpls()  # introspection only: which plugins implement it
    plain = [i for i in impls if not (i.hookwrapper or i.wrapper)]
    order = [i.plugin_name for i in plain]
    callers = []
    for plugin_id in order:
        others = [i.plugin for i in plain if i.plugin_name != plugin_id]
        callers.append((plugin_id, pm.subset_hook_caller(hook_name, remove_plugins=others)))
    return callers


def _env_plugins(own_version: str | None = None) -> list[tuple[str, object, tuple[str, str]]]:
    """The in-process plugins named by ``SYMI_MEMORY_PLUGINS`` (and the legacy testing switch).

    ``own_version`` is this distribution's version when discovery found it (then a module of our own
    package is attributed without asking importlib.metadata).
    """
    import importlib

    paths = [p.strip() for p in os.environ.get(EXTRA_PLUGINS_ENV, "").split(",") if p.strip()]
    if os.environ.get(LEGACY_TESTING_ENV, "").strip().lower() in ("1", "true", "yes"):
        paths.append("symi_memory.testing.plugin")
    out: list[tuple[str, object, tuple[str, str]]] = []
    if not paths:
        return out
    owners: dict[str, list[str]] = {__package__: [OWN_DISTRIBUTION]}
    if own_version is None or any(p.split(".")[0] != __package__ for p in paths):
        from importlib import metadata

        # Editable installs are missing from packages_distributions(); our own package is known by name.
        owners = {**metadata.packages_distributions(), **owners}
    for path in dict.fromkeys(paths):
        try:
            module = importlib.import_module(path)
        except ImportError as exc:
            raise PluginError(f"{EXTRA_PLUGINS_ENV}: cannot import plugin module {path!r} ({exc})") from exc
        dist = (owners.get(path.split(".")[0]) or ["(in-process)"])[0]
        out.append((str(getattr(module, "PLUGIN_ID", path)), module, (dist, _version(dist, own_version))))
    return out


def _version(dist: str, own_version: str | None) -> str:
    if dist == "(in-process)":
        return ""
    if dist == OWN_DISTRIBUTION and own_version is not None:
        return own_version
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _entry_points() -> Iterable[EntryPoint]:
    # Not importlib.metadata: it costs a one-shot CLI call more than the rest of the discovery.
    from .entry_points import find

    return find(ENTRY_POINT_GROUP)


def load_plugins(
    disabled: Iterable[str] = (),
    *,
    extra: Iterable[tuple[str, object]] = (),
    builtins_only: bool = False,
) -> Plugins:
    """Load the entry-point plugins (minus ``disabled``) and build the registries.

    ``extra`` registers in-process plugins ``(id, module_or_object)``, used by
    tests and embedders; so do the modules listed in ``SYMI_MEMORY_PLUGINS``
    (comma-separated import paths, for subprocesses). With ``SYMI_MEMORY_DISABLE_PLUGIN_AUTOLOAD=1`` only
    the builtins (entry points of the symi-memory distribution) are loaded; so with ``builtins_only``.
    """
    disabled = set(disabled)
    builtins_only = builtins_only or os.environ.get(AUTOLOAD_ENV, "").strip().lower() in ("1", "true", "yes")
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    dists: dict[str, tuple[str, str]] = {}
    failed: dict[str, str] = {}
    seen_eps: set[str] = set()
    skipped: dict[str, EntryPoint] = {}
    for ep in sorted(_entry_points(), key=lambda e: (e.dist.name != OWN_DISTRIBUTION if e.dist else True, e.name)):
        dist = ep.dist.name if ep.dist else "?"
        if builtins_only and dist != OWN_DISTRIBUTION:
            continue
        if ep.name in disabled:
            skipped[ep.name] = ep
            continue
        if ep.name in seen_eps:
            raise PluginError(
                f"plugin id {ep.name!r} is declared by two distributions ({dists[ep.name][0]} and {dist}); "
                f"uninstall one"
            )
        seen_eps.add(ep.name)
        try:
            module = ep.load()
        except Exception as exc:
            # One broken plugin must not take memory down; selecting it names the import error.
            failed[ep.name] = f"{dist}: {type(exc).__name__}: {exc}"
            log.warning("plugin %r from %s failed to import (%s); skipped", ep.name, dist, exc)
            continue
        try:
            pm.register(module, name=ep.name)
        except pluggy.PluginValidationError as exc:
            # A hook implementation whose arguments the hook does not have (a misspelt ``register``).
            why = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            failed[ep.name] = f"{dist}: {why}"
            log.warning("plugin %r from %s failed to register (%s); skipped", ep.name, dist, why)
            continue
        dists[ep.name] = (dist, ep.dist.version if ep.dist else "?")
    own_version = next((v for d, v in dists.values() if d == OWN_DISTRIBUTION), None)
    for plugin_id, hooks in _unknown_hooks(pm).items():
        dist = dists.get(plugin_id, ("?",))[0]
        if dist == OWN_DISTRIBUTION:
            continue  # a bug of ours: check_pending below says so
        # An installed plugin made for a newer symi-memory (a hook this one does not have), or with a misspelt hook
        # name: it is skipped like one that fails to import, never every command's failure; selecting it says why.
        why = (f"implements {', '.join(_with_close_hook(pm, h) for h in hooks)}, which this symi-memory "
               f"({own_version or '?'}) does not have: a misspelt hook name, or the plugin needs a newer symi-memory")
        pm.unregister(name=plugin_id)
        dists.pop(plugin_id, None)
        failed[plugin_id] = f"{dist}: {why}"
        log.warning("plugin %r from %s %s; skipped", plugin_id, dist, why)
    for plugin_id, obj, dist_info in [*_env_plugins(own_version),
                                      *((i, o, ("(in-process)", "")) for i, o in extra)]:
        if plugin_id in disabled or pm.is_registered(obj) or pm.get_plugin(plugin_id) is not None:
            continue
        pm.register(obj, name=plugin_id)
        dists[plugin_id] = dist_info
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        close = [hint for hooks in _unknown_hooks(pm).values() for h in hooks
                 if (hint := _with_close_hook(pm, h)) != h]
        raise PluginError(f"a plugin implements an unknown hook: {exc}; check the hook name's spelling"
                          + (f": {', '.join(close)}" if close else "")) from exc
    plugins = Plugins(pm=pm, dists=dists, failed=failed, disabled=skipped)
    plugins._build()
    return plugins


def _with_close_hook(pm: pluggy.PluginManager, name: str) -> str:
    """``name``, followed by the hook of this symi-memory it is a misspelling of, when one is close."""
    import difflib

    known = [n for n, caller in vars(pm.hook).items() if not n.startswith("_") and caller.has_spec()]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
    return f"{name} (did you mean {close[0]}?)" if close else name


def _unknown_hooks(pm: pluggy.PluginManager) -> dict[str, list[str]]:
    """Plugin name -> the hooks it implements that have no specification here (what ``check_pending`` refuses)."""
    out: dict[str, list[str]] = {}
    for name, caller in vars(pm.hook).items():
        if name.startswith("_") or caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if not impl.optionalhook and impl.plugin_name is not None:
                out.setdefault(impl.plugin_name, []).append(name)
    return out


def collect_config_defaults(raw: Mapping[str, Any], plugins: Plugins | None = None) -> dict[str, Any]:
    """Merge the config defaults that plugins contribute."""
    if plugins is None:
        disabled = raw.get("plugins", {}).get("disabled", []) if isinstance(raw.get("plugins"), Mapping) else []
        plugins = load_plugins(disabled if isinstance(disabled, list) else [])
    from .config.fields import defaults_of
    from .config.schema import RootConfig

    core = defaults_of(RootConfig)
    out: dict[str, Any] = {}
    for plugin_id, results in plugins.contributed_defaults:
        for contributed in results:
            out = _merge_contributed(out, copy.deepcopy(contributed), plugin_id, core)
    return out


def _merge_contributed(out: dict[str, Any], contributed: Any, plugin_id: str, core: Mapping[str, Any]) -> dict[str, Any]:
    from .config.fields import deep_merge

    if contributed is not None and not isinstance(contributed, Mapping):
        raise PluginError(
            f"plugin {plugin_id!r}: symi_memory_config_defaults must return a dict or None, "
            f"got {type(contributed).__name__}"
        )
    if not contributed:
        return out
    clash = _core_clash(contributed, core, "")
    if clash:
        raise PluginError(
            f"plugin {plugin_id!r} contributes a default for {clash}, a key the core defines; "
            f"plugins may only add new keys (e.g. under plugins.entries.{plugin_id})"
        )
    return deep_merge(out, contributed)


def _core_clash(contributed: Mapping[str, Any], core: Mapping[str, Any], prefix: str) -> str | None:
    """The first contributed key path that the core schema already defines, if any."""
    for key, value in contributed.items():
        path = f"{prefix}.{key}" if prefix else key
        if key not in core:
            continue
        if isinstance(core[key], Mapping) and isinstance(value, Mapping):
            # Free-form core tables (plugins.entries, models) accept any new key below them.
            if core[key] == {} and path in ("plugins.entries", "models"):
                continue
            found = _core_clash(value, core[key], path)
            if found:
                return found
            continue
        return path
    return None


def resolve_backend_name(data: Mapping[str, Any]) -> str | None:
    """The backend plugin name config selects, or None when memory is off.

    An explicit ``plugins.slots.memory`` wins over the legacy
    ``memory.backend``; ``memory-core`` is an alias of the default.
    """
    slot = (data.get("plugins", {}).get("slots", {}) or {}).get("memory")
    if slot is not None:
        if slot.strip().lower() == "none":
            return None
        return DEFAULT_BACKEND if slot == "memory-core" else slot
    legacy = (data.get("memory", {}) or {}).get("backend")
    return {"qmd": "qmd-sidecar", "builtin": DEFAULT_BACKEND, "faiss": "faiss"}.get(legacy or "builtin", DEFAULT_BACKEND)
