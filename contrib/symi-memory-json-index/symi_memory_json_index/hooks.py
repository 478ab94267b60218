"""The entry-point module: registrations only, cheap to import."""

from __future__ import annotations

from collections.abc import Callable

from symi_memory import hookimpl
from symi_memory.specs import BackendContext, BackendSpec, ConfigSection, MemoryBackend

PLUGIN_ID = "json-index"


def _create(ctx: BackendContext) -> MemoryBackend:
    from .backend import JsonIndexBackend

    return JsonIndexBackend.from_context(ctx)


@hookimpl
def symi_memory_register_backends(register: Callable[[BackendSpec], None]) -> None:
    """Register the ``json-index`` backend; status reports it as ``json``."""
    register(BackendSpec(name="json-index", short_name="json", factory=_create,
                         description="Keyword index in one JSON file per agent (tutorial example)."))


@hookimpl
def symi_memory_register_config_sections(register: Callable[[ConfigSection], None]) -> None:
    """Declare ``plugins.entries.json-index``: typed keys with docs and bounds."""
    from .settings import JsonIndexSettings

    register(ConfigSection(key=f"plugins.entries.{PLUGIN_ID}", model=JsonIndexSettings,
                           doc="The json-index backend (contrib/symi-memory-json-index)."))
