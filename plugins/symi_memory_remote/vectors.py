"""Checking vectors that came back from a server, and planning request sizes."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from symi_memory.errors import EmbeddingError

__all__ = ["check_vector", "check_vectors", "plan_slices", "read_embedding_data"]


def check_vector(raw: Any, *, where: str, make_error: Callable[[str], EmbeddingError]) -> list[float]:
    """``raw`` as a list of finite floats, or an error naming ``where`` it came from."""
    if not isinstance(raw, list) or not raw:
        raise make_error(f"{where}: expected a non-empty list of numbers, got {type(raw).__name__}")
    out: list[float] = []
    for value in raw:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise make_error(f"{where}: non-numeric value {value!r} in embedding")
        out.append(float(value))
    return out


def check_vectors(
    raws: Sequence[Any], expected: int, *, where: str, make_error: Callable[[str], EmbeddingError]
) -> list[list[float]]:
    """Validate a whole answer: the right count, numeric values, one dimension throughout."""
    if len(raws) != expected:
        raise make_error(f"{where}: expected {expected} embeddings, got {len(raws)}")
    vectors = [
        check_vector(raw, where=f"{where} item {i}", make_error=make_error) for i, raw in enumerate(raws)
    ]
    dims = {len(v) for v in vectors}
    if len(dims) > 1:
        raise make_error(f"{where}: embeddings have mixed dimensions {sorted(dims)}")
    return vectors


def plan_slices(texts: Sequence[str], *, max_items: int, max_bytes: int) -> list[slice]:
    """Split ``texts`` into consecutive slices of at most ``max_items`` items and ``max_bytes`` UTF-8 bytes.

    A single text larger than ``max_bytes`` still gets its own slice: the core
    already split chunks to the provider's input limit, so refusing here
    would only lose data.
    """
    slices: list[slice] = []
    start = 0
    size = 0
    for i, text in enumerate(texts):
        n = len(text.encode("utf-8"))
        if i > start and (i - start >= max_items or size + n > max_bytes):
            slices.append(slice(start, i))
            start, size = i, 0
        size += n
    if start < len(texts):
        slices.append(slice(start, len(texts)))
    return slices


def read_embedding_data(payload: Any) -> list[Any] | None:
    """The raw vectors of an ``{data: [{embedding, index?}]}`` answer, ordered by ``index``; None if malformed."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("data"), list):
        return None
    items = payload["data"]
    if not all(isinstance(item, Mapping) for item in items):
        return None
    if all(isinstance(item.get("index"), int) for item in items):
        items = sorted(items, key=lambda item: item["index"])
    return [item.get("embedding") for item in items]
