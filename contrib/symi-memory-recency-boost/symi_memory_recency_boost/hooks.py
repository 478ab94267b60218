"""The plugin's entry point: registrations and config defaults only.

symi-memory imports this module for every process that loads plugins, so
it imports nothing heavy; the implementation is imported by the factory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from symi_memory import hookimpl
from symi_memory.specs import PostProcessorSpec

__all__ = ["CONFIG_KEY", "DEFAULTS", "symi_memory_config_defaults", "symi_memory_register_postprocessors"]

CONFIG_KEY = "recencyBoost"
"""The key this plugin owns inside ``memorySearch.query.hybrid``."""

DEFAULTS: dict[str, Any] = {
    "enabled": False,
    "windowDays": 14.0,
    "boost": 0.2,
    "exclude": ["MEMORY.md", "memory.md"],
}

# After temporal decay (100), before the score sort (500) and MMR (600):
# MMR then diversifies the boosted order.
ORDER = 200


def _factory(hybrid: Mapping[str, Any]) -> Any:
    from .boost import RecencyBoost

    return RecencyBoost.from_config(hybrid.get(CONFIG_KEY) or {})


def _running(hybrid: Mapping[str, Any]) -> bool:
    """Whether ``_factory`` returns a processor, without importing it (``status`` names it then)."""
    settings = hybrid.get(CONFIG_KEY) or {}
    return (bool(settings.get("enabled")) and float(settings.get("windowDays", 14.0)) > 0
            and min(1.0, max(0.0, float(settings.get("boost", 0.2)))) > 0)


@hookimpl
def symi_memory_register_postprocessors(register: Callable[[Any], None]) -> None:
    """Register the ``recency-boost`` post-processor."""
    register(PostProcessorSpec(name="recency-boost", factory=_factory, order=ORDER, running=_running,
                               description="Lift notes written in the last windowDays days."))


@hookimpl
def symi_memory_config_defaults() -> dict[str, Any]:
    """Make ``...query.hybrid.recencyBoost.*`` known keys, typed by these defaults."""
    hybrid = {CONFIG_KEY: {k: (list(v) if isinstance(v, list) else v) for k, v in DEFAULTS.items()}}
    return {"agents": {"defaults": {"memorySearch": {"query": {"hybrid": hybrid}}}}}
