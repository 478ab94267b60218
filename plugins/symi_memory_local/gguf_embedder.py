"""Optional GGUF models through llama-cpp-python (never required; ONNX is the default runtime)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from symi_memory.specs import ProviderUnavailable

from .integrity import verify_sha256

__all__ = ["GgufEmbedder", "load_gguf_embedder"]

_NEEDS = "a .gguf memorySearch.local.modelPath needs llama-cpp-python: pip install llama-cpp-python"


@attrs.define
class GgufEmbedder:
    """An :class:`~symi_memory.specs.EmbeddingProvider` over ``llama_cpp.Llama`` in embedding mode."""

    model: str
    fingerprint: str
    llm: Any
    id: str = "local"
    # llama.cpp truncates to its context itself; the core's byte split keeps inputs near that.
    max_input_bytes: int = 8192

    def embed_query(self, text: str) -> list[float]:
        """One unit vector for a search query."""
        return self.embed_documents([text])[0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit vectors; token-level output (models without pooling) is mean-pooled here."""
        import numpy as np

        from .pooling import l2_normalise

        if not texts:
            return []
        rows = []
        for out in self.llm.embed(list(texts), truncate=True):
            arr = np.asarray(out, dtype=np.float32)
            rows.append(arr.mean(axis=0) if arr.ndim == 2 else arr)
        return l2_normalise(np.stack(rows)).tolist()

    def close(self) -> None:
        """Release the llama.cpp context."""
        close = getattr(self.llm, "close", None)
        if close is not None:
            close()
        self.llm = None


def load_gguf_embedder(path: Path, *, model: str, sha256: str | None, threads: int) -> GgufEmbedder:
    """Open ``path`` with llama-cpp-python, or say how to install it."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise ProviderUnavailable(_NEEDS) from exc
    digest = verify_sha256(
        path,
        sha256,
        what=f"the GGUF model {model!r}",
        fix="Fix memorySearch.local.sha256 or replace the file.",
    )
    try:
        llm = Llama(model_path=str(path), embedding=True, n_threads=threads, verbose=False)
    except (RuntimeError, ValueError, OSError) as exc:
        raise ProviderUnavailable(f"llama-cpp-python could not load {path}: {exc}") from exc
    return GgufEmbedder(model=model, fingerprint=f"gguf:{digest[:16]}:llama-cpp:l2", llm=llm)
