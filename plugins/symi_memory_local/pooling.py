"""Vector arithmetic for the local provider (numpy, imported by callers lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["combine_windows", "l2_normalise", "mean_pool"]


def mean_pool(hidden: NDArray[np.float32], mask: NDArray[np.int64]) -> NDArray[np.float32]:
    """Average token vectors ``(batch, seq, dim)`` over the positions where ``mask`` is 1."""
    m = mask[:, :, None].astype(np.float32)
    summed = (np.nan_to_num(hidden, nan=0.0, posinf=0.0, neginf=0.0) * m).sum(axis=1)
    return summed / np.maximum(m.sum(axis=1), 1.0)


def l2_normalise(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    """Row-wise unit length; non-finite entries become 0 and an all-zero row stays zero."""
    v = np.nan_to_num(vectors.astype(np.float32, copy=False), nan=0.0, posinf=0.0, neginf=0.0)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return (v / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)


def combine_windows(
    window_vectors: NDArray[np.float32], owners: list[int], weights: list[int], n_texts: int
) -> NDArray[np.float32]:
    """One unit vector per text from its windows' unit vectors, weighted by window token count.

    A text shorter than one window has a single window, so its vector is that
    window's vector unchanged.
    """
    dim = window_vectors.shape[1]
    out = np.zeros((n_texts, dim), dtype=np.float32)
    np.add.at(
        out, np.asarray(owners), l2_normalise(window_vectors) * np.asarray(weights, np.float32)[:, None]
    )
    return l2_normalise(out)
