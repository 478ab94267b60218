"""The fixed facts of each remote provider, apart from the settings code so registering the providers stays cheap."""

from __future__ import annotations

import attrs

__all__ = ["ProviderDefaults", "missing_key_reason"]


@attrs.frozen(kw_only=True)
class ProviderDefaults:
    """The fixed facts of one remote provider."""

    name: str
    label: str
    default_model: str
    base_url: str
    env_var: str
    provider_names: tuple[str, ...]
    auto_priority: int


def missing_key_reason(defaults: ProviderDefaults) -> str:
    """The actionable message shown when no key resolves."""
    return f"no {defaults.label} API key: set {defaults.env_var} or memorySearch.remote.apiKey"
