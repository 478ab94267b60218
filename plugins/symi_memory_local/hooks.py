"""Registers the offline ``local`` embedding provider.

Kept cheap to import: onnxruntime, tokenizers and numpy are loaded by the
factory only when the provider is actually used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from symi_memory import hookimpl
from symi_memory.specs import ConfigSection, ProviderSpec, ScoreCalibration

if TYPE_CHECKING:
    from symi_memory.specs import EmbeddingProvider, ProviderContext

__all__ = ["CALIBRATIONS", "CHUNK_CALIBRATIONS", "available", "create", "symi_memory_register_embedding_providers"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"

# Cosine -> P(relevant) per builtin model, fitted on bench/datasets (devmem + convmem) by
# bench/calibration_fit.py, which prints these numbers; rerun it after changing a model. MiniLM's is
# fitted on the vector score of the default config: chunk and best line blended (chunking.units
# "lines", store.vector.unitWeight 0.7); on chunk vectors alone the fit was slope 10.7, midpoint 0.541.
CALIBRATIONS = {
    DEFAULT_MODEL: ScoreCalibration(slope=13.6, midpoint=0.571),
    "multilingual-e5-small": ScoreCalibration(slope=45.4, midpoint=0.866),
}
# The same fit on chunk vectors alone (chunking.units "off", or a backend without line vectors).
CHUNK_CALIBRATIONS = {
    DEFAULT_MODEL: ScoreCalibration(slope=10.7, midpoint=0.541),
}


def available(ctx: ProviderContext) -> str | None:
    """None when the configured local model can run offline now, else the reason."""
    from .factory import unavailable_reason

    return unavailable_reason(ctx)


def create(ctx: ProviderContext) -> EmbeddingProvider:
    """Load the configured local model; raises ProviderUnavailable with the fix when it cannot."""
    from .factory import create_local_provider

    return create_local_provider(ctx)


@hookimpl
def symi_memory_register_embedding_providers(register: Callable[[Any], None]) -> None:
    """Register ``local`` first in ``auto`` order: it needs no key and sends nothing off the machine."""
    register(
        ProviderSpec(
            name="local",
            factory=create,
            auto_priority=10,
            available=available,
            default_model=DEFAULT_MODEL,
            calibration=CALIBRATIONS,
            chunk_calibration=CHUNK_CALIBRATIONS,
            description="Offline embeddings with ONNX Runtime (all-MiniLM-L6-v2 int8 by default, 384 dims)",
        )
    )


@hookimpl
def symi_memory_register_config_sections(register: Callable[[Any], None]) -> None:
    from .config_schema import Local

    register(ConfigSection(key="agents.defaults.memorySearch.local", model=Local, doc="The offline local embedding model (plugin local-embeddings)."))
