"""Registers the remote embedding providers ``openai``, ``gemini`` and ``voyage``.

Kept cheap to import: the settings code, httpx and the provider modules load inside the factories.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from symi_memory import hookimpl
from symi_memory.specs import ConfigSection, ProviderContext, ProviderSpec, ProviderUnavailable

from .defaults import ProviderDefaults, missing_key_reason

if TYPE_CHECKING:
    from .base import RemoteEmbeddingProvider

__all__ = ["DEFAULTS", "create_provider", "symi_memory_register_embedding_providers"]

DEFAULTS: dict[str, ProviderDefaults] = {
    d.name: d
    for d in (
        ProviderDefaults(
            name="openai",
            label="OpenAI",
            default_model="text-embedding-3-small",
            base_url="https://api.openai.com/v1",
            env_var="OPENAI_API_KEY",
            provider_names=("openai",),
            auto_priority=20,
        ),
        ProviderDefaults(
            name="gemini",
            label="Gemini",
            default_model="gemini-embedding-001",
            base_url="https://generativelanguage.googleapis.com/v1beta",
            env_var="GEMINI_API_KEY",
            provider_names=("google", "gemini"),
            auto_priority=30,
        ),
        ProviderDefaults(
            name="voyage",
            label="Voyage",
            default_model="voyage-4-large",
            base_url="https://api.voyageai.com/v1",
            env_var="VOYAGE_API_KEY",
            provider_names=("voyage",),
            auto_priority=40,
        ),
    )
}


def create_provider(name: str, ctx: ProviderContext, **options: Any) -> RemoteEmbeddingProvider:
    """Build provider ``name`` from ``ctx``; ``options`` (sleep, clock, transport, rng) go to the class."""
    from .settings import RemoteSettings

    defaults = DEFAULTS[name]
    settings = RemoteSettings.from_context(ctx, defaults)
    if not settings.api_key:
        raise ProviderUnavailable(missing_key_reason(defaults))
    cls: type[RemoteEmbeddingProvider]
    if name == "gemini":
        from .gemini import GeminiEmbeddings

        cls = GeminiEmbeddings
    elif name == "voyage":
        from .openai_compat import VoyageEmbeddings

        cls = VoyageEmbeddings
    else:
        from .openai_compat import OpenAIEmbeddings

        cls = OpenAIEmbeddings
    return cls(settings, **options)


def _available(defaults: ProviderDefaults) -> Callable[[ProviderContext], str | None]:
    def available(ctx: ProviderContext) -> str | None:
        from .settings import RemoteSettings

        settings = RemoteSettings.from_context(ctx, defaults)
        return None if settings.api_key else missing_key_reason(defaults)

    return available


def _factory(name: str) -> Callable[[ProviderContext], Any]:
    def factory(ctx: ProviderContext) -> Any:
        return create_provider(name, ctx)

    return factory


@hookimpl
def symi_memory_register_embedding_providers(register: Callable[[Any], None]) -> None:
    """Register ``openai`` (auto 20), ``gemini`` (auto 30) and ``voyage`` (auto 40)."""
    for name, defaults in DEFAULTS.items():
        register(
            ProviderSpec(
                name=name,
                factory=_factory(name),
                auto_priority=defaults.auto_priority,
                available=_available(defaults),
                default_model=defaults.default_model,
                description=f"{defaults.label} embeddings over HTTP ({defaults.base_url})",
            )
        )


@hookimpl
def symi_memory_register_config_sections(register: Callable[[Any], None]) -> None:
    from .config_schema import Remote

    register(ConfigSection(key="agents.defaults.memorySearch.remote", model=Remote, doc="Remote embedding APIs: openai, gemini, voyage (plugin remote-embeddings)."))
