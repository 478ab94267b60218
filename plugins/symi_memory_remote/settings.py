"""What a remote embedding provider reads from config, resolved once into frozen records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from symi_memory.specs import ProviderContext

from .defaults import ProviderDefaults, missing_key_reason
from .keys import merge_headers, positive_number, provider_entry, resolve_api_key, resolve_base_url, section

__all__ = ["BatchSettings", "ProviderDefaults", "RemoteSettings", "missing_key_reason"]


@attrs.frozen(kw_only=True)
class BatchSettings:
    """``memorySearch.remote.batch``, with durations in seconds."""

    enabled: bool = False
    wait: bool = True
    concurrency: int = 2
    poll_interval_s: float = 2.0
    timeout_s: float = 3600.0

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> BatchSettings:
        """Read the camelCase dict, falling back to the defaults for missing or bad values."""

        def number(key: str, default: float) -> float:
            value = raw.get(key)
            return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default

        return cls(
            enabled=bool(raw.get("enabled", False)),
            wait=bool(raw.get("wait", True)),
            concurrency=max(1, int(number("concurrency", 2))),
            poll_interval_s=max(0.0, number("pollIntervalMs", 2000) / 1000.0),
            timeout_s=max(0.0, number("timeoutMinutes", 60) * 60.0),
        )


@attrs.frozen(kw_only=True)
class RemoteSettings:
    """Everything a provider instance needs, with the key kept out of ``repr``."""

    provider: str
    model: str
    base_url: str
    api_key: str | None = attrs.field(repr=False)
    headers: dict[str, str]
    timeout_s: float
    batch: BatchSettings

    @classmethod
    def from_context(cls, ctx: ProviderContext, defaults: ProviderDefaults) -> RemoteSettings:
        """Resolve ``memorySearch.remote.*`` over ``models.providers.<p>.*`` over the defaults."""
        settings = ctx.settings or {}
        remote = section(settings, "remote")
        entry = provider_entry(ctx.models, defaults.provider_names)
        model = ctx.model or settings.get("model") or defaults.default_model
        return cls(
            provider=defaults.name,
            model=str(model),
            base_url=resolve_base_url(remote, entry, defaults.base_url),
            api_key=resolve_api_key(
                remote,
                ctx.models,
                ctx.env or {},
                provider_names=defaults.provider_names,
                env_var=defaults.env_var,
            ),
            headers=merge_headers(section(entry, "headers"), section(remote, "headers")),
            timeout_s=positive_number(remote.get("timeoutMs"), 60000.0) / 1000.0,
            batch=BatchSettings.from_mapping(section(remote, "batch")),
        )
