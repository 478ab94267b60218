"""Choosing the embedding provider (auto, explicit, fallback) for an agent."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from .closing import close_plugin_object
from .errors import ConfigError, EmbeddingError, SymiMemoryError
from .plugins import OWN_DISTRIBUTION
from .specs import EmbeddingProvider, ProviderContext, ProviderUnavailable
from .types import Fallback

if TYPE_CHECKING:
    from .config import AgentView
    from .plugins import Plugins

__all__ = ["EmbeddingChoice", "choose_provider", "provider_context"]

log = logging.getLogger("symi_memory.embedding")


@attrs.define
class EmbeddingChoice:
    """The provider in use (None: keyword-only) and how it was chosen."""

    provider: EmbeddingProvider | None
    requested: str
    reason: str | None = None
    fallback: Fallback | None = None
    fallback_name: str = "none"
    used_fallback: bool = False
    #: The provider is a third-party plugin's: what its calls raise other than an ``EmbeddingError``, and a vector
    #: of the wrong shape, are taken as its failed calls (keyword search saying why, the files' vectors retried next
    #: sync). A builtin's are bugs of ours, raised as they are; its vectors are checked where they always were.
    guarded: bool = False

    @property
    def name(self) -> str:
        return self.provider.id if self.provider else "none"

    def switch_to_fallback(self, plugins: Plugins, agent: AgentView, models: Mapping[str, Any], error: Exception) -> bool:
        """After an embedding error: switch to the configured fallback once. True if switched."""
        target = self.fallback_name
        if self.used_fallback or target in ("none", "", self.name):
            return False
        try:
            provider = _create(plugins, target, agent, models, key="memorySearch.fallback")
        except (ProviderUnavailable, ConfigError) as exc:
            log.warning("fallback provider %s unavailable: %s", target, exc)
            return False
        # With no provider yet (the configured one never came up), the fallback is from the requested name.
        old = self.name if self.provider is not None else self.requested
        if self.provider is not None:
            close_plugin_object(self.provider, f"embedding provider {getattr(self.provider, 'id', '?')!r}")
        self.provider = provider
        self.guarded = not _ours(plugins, target)
        self.used_fallback = True
        self.fallback = Fallback(from_=old, reason=str(error))
        log.warning("embedding provider %s failed (%s); switched to fallback %s", old, error, target)
        return True


def provider_context(agent: AgentView, models: Mapping[str, Any], model: str | None, *,
                     plugin_settings: Mapping[str, Any] | None = None) -> ProviderContext:
    """The context a provider factory gets; ``plugin_settings`` is its plugin's ``plugins.entries.<id>``."""
    return ProviderContext(
        settings=agent.memory_search,
        models=models,
        env=dict(os.environ),
        state_dir=agent.state_dir,
        model=model,
        plugin_settings=dict(plugin_settings or {}),
    )


def _create(plugins: Plugins, name: str, agent: AgentView, models: Mapping[str, Any], *, key: str) -> EmbeddingProvider:
    spec = plugins.provider(name, key=f"agents.defaults.{key}")
    model = agent.memory_search.get("model") if name == agent.memory_search.get("provider") else None
    own = plugins.entry_settings("embeddingProviders", spec.name, agent.plugin_entries)
    return _started(plugins, spec, provider_context(agent, models, model or spec.default_model, plugin_settings=own))


_PROVIDER_MEMBERS = ("id", "model", "fingerprint", "max_input_bytes", "embed_query", "embed_documents")


def _ours(plugins: Plugins, name: str) -> bool:
    """Whether embedding provider ``name`` is a builtin (registered by the symi-memory distribution)."""
    owner = plugins.owners.get("embeddingProviders", {}).get(name, "?")
    return plugins.dists.get(owner, ("",))[0] == OWN_DISTRIBUTION


def _started(plugins: Plugins, spec: Any, ctx: ProviderContext) -> EmbeddingProvider:
    """``spec.factory(ctx)``. A third-party factory that raises something else than the errors it may raise on
    purpose (``ProviderUnavailable``, symi-memory's own), or returns what is not a provider, makes the provider
    unavailable, naming its plugin: memory then runs as for any unusable provider (the fallback, else keyword
    only, the reason in ``status``), never fails. The builtins' errors are bugs of ours and raised as they are."""
    owner = plugins.owners.get("embeddingProviders", {}).get(spec.name, "?")
    ours = plugins.dists.get(owner, ("",))[0] == OWN_DISTRIBUTION
    try:
        provider = spec.factory(ctx)
    except SymiMemoryError:
        raise
    except Exception as exc:
        if ours:
            raise
        raise ProviderUnavailable(
            f"embedding provider {spec.name!r} of plugin {owner!r} failed to start ({type(exc).__name__}: {exc}); "
            f"fix or uninstall the plugin, or choose another memorySearch.provider") from exc
    missing = [m for m in _PROVIDER_MEMBERS if not hasattr(provider, m)]
    if missing and not ours:
        raise ProviderUnavailable(
            f"embedding provider {spec.name!r}: the factory of plugin {owner!r} returned "
            f"{'None' if provider is None else type(provider).__name__}, not an EmbeddingProvider (it has no "
            f"{', '.join(missing)}); fix or uninstall the plugin, or choose another memorySearch.provider")
    return provider  # type: ignore[no-any-return]


def choose_provider(plugins: Plugins, agent: AgentView, models: Mapping[str, Any]) -> EmbeddingChoice:
    """Resolve ``memorySearch.provider`` (spec/behaviour.md §6).

    Never raises for an unusable provider: memory then runs keyword-only and
    the reason is kept for ``status``. An unknown provider *name* is a config
    error.
    """
    ms = agent.memory_search
    requested = ms.get("provider") or "auto"
    fallback_name = ms.get("fallback") or "none"
    if fallback_name not in ("none", "") and fallback_name not in plugins.providers:
        plugins.provider(fallback_name, key="agents.defaults.memorySearch.fallback")
    if requested == "none":
        return EmbeddingChoice(None, requested, "provider is none: keyword-only search", fallback_name=fallback_name)
    if requested != "auto":
        try:
            return EmbeddingChoice(_create(plugins, requested, agent, models, key="memorySearch.provider"), requested,
                                   fallback_name=fallback_name, guarded=not _ours(plugins, requested))
        except (ProviderUnavailable, EmbeddingError) as exc:
            choice = EmbeddingChoice(None, requested, str(exc), fallback_name=fallback_name)
            if choice.switch_to_fallback(plugins, agent, models, exc):
                return choice
            log.warning("embedding provider %s unavailable: %s; searching by keyword only", requested, exc)
            return choice
    reasons: list[str] = []
    ranked = sorted((s for s in plugins.providers.values() if s.auto_priority is not None), key=lambda s: s.auto_priority or 0)
    for spec in ranked:
        ctx = provider_context(agent, models, ms.get("model") or spec.default_model,
                               plugin_settings=plugins.entry_settings("embeddingProviders", spec.name,
                                                                      agent.plugin_entries))
        try:
            why = spec.available(ctx) if spec.available else None
        except Exception as exc:
            owner = plugins.owners.get("embeddingProviders", {}).get(spec.name, "?")
            if plugins.dists.get(owner, ("",))[0] == OWN_DISTRIBUTION:
                raise  # a bug of ours, shown as one
            # Another plugin's check, for a provider nobody named: `auto` goes on to the next one.
            why = f"its available() check (plugin {owner!r}) raised {type(exc).__name__}: {exc}"
            log.warning("embedding provider %s: %s; skipped by auto", spec.name, why)
        if why:
            reasons.append(f"{spec.name}: {why}")
            continue
        try:
            return EmbeddingChoice(_started(plugins, spec, ctx), requested, fallback_name=fallback_name,
                                   guarded=not _ours(plugins, spec.name))
        except (ProviderUnavailable, EmbeddingError) as exc:
            reasons.append(f"{spec.name}: {exc}")
    reason = "no embedding provider available (" + "; ".join(reasons) + "); keyword-only search"
    return EmbeddingChoice(None, requested, reason, fallback_name=fallback_name)
