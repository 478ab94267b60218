"""faiss indexes over unit vectors, keyed by the chunks table rowid.

flat sits in an ``IndexIDMap2`` and IVF stores ids itself (IDMap2 over IVF
mixes up ids after a remove); their labels are rowids and deletes really
remove vectors. HNSW cannot remove, and SQLite reuses the highest
rowid after a delete, so an HNSW label is the insertion position: a
position -> rowid array maps results back and an ``alive`` mask holds the
tombstones, which searches skip through an ``IDSelectorBitmap``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import attrs

from .settings import FaissSettings

__all__ = ["FaissIndex", "build_index", "ivf_cells", "set_query_params"]

log = logging.getLogger("symi_memory.faiss")

# Rebuild an IVF index once it holds this many times the vectors it was trained on.
IVF_REGROW = 4


def ivf_cells(requested: int, n: int) -> int:
    """nlist for ``n`` training vectors: at most sqrt(n), and >= 39 points per cell (faiss's floor)."""
    return max(1, min(requested, int(math.sqrt(n)), n // 39))


@attrs.define
class FaissIndex:
    """One faiss index plus what is needed to map hits back to live rowids."""

    kind: str
    dims: int
    index: Any
    settings: FaissSettings
    trained_on: int = 0
    positions: Any = None  # hnsw only: int64 position -> rowid
    alive: Any = None  # hnsw only: bool per position
    _bitmap: Any = None

    @property
    def live(self) -> int:
        return int(self.alive.sum()) if self.kind == "hnsw" else int(self.index.ntotal)

    @property
    def dead(self) -> int:
        return int(self.alive.size - self.alive.sum()) if self.kind == "hnsw" else 0

    def needs_rebuild(self) -> bool:
        """True when tombstones or growth since IVF training make a rebuild worthwhile."""
        if self.kind != self.settings.kind:
            return self.live > 0  # an IVF built empty (as flat) is retrained once vectors exist
        if self.kind != self.settings.kind:
            return self.live > 0  # an IVF built empty (as flat) is retrained once vectors exist
        if self.kind == "hnsw":
            total = self.alive.size
            return total > 0 and self.dead / total > self.settings.tombstone_ratio
        if self.kind == "ivf":
            return self.index.ntotal > IVF_REGROW * max(self.trained_on, 256)
        return False

    def add(self, rowids: Any, matrix: Any) -> None:
        """Add unit vectors (float32, one row each) under their rowids."""
        import numpy as np

        if len(rowids) == 0:
            return
        rowids = np.asarray(rowids, dtype=np.int64)
        if self.kind == "hnsw":
            self.index.add(matrix)
            self.positions = np.concatenate([self.positions, rowids])
            self.alive = np.concatenate([self.alive, np.ones(len(rowids), dtype=bool)])
            self._bitmap = None
        else:
            self.index.add_with_ids(matrix, rowids)

    def remove(self, rowids: Any) -> None:
        import numpy as np

        if len(rowids) == 0:
            return
        rowids = np.asarray(rowids, dtype=np.int64)
        if self.kind == "hnsw":
            gone = np.isin(self.positions, rowids) & self.alive
            if gone.any():
                self.alive[gone] = False
                self._bitmap = None
        else:
            self.index.remove_ids(rowids)

    def search(self, query: Any, k: int) -> list[tuple[int, float]]:
        """``(rowid, inner product)`` best first for a unit query row (1 x dims)."""
        import faiss

        if self.live == 0 or k <= 0:
            return []
        k = min(k, self.live)
        if self.kind != "hnsw":
            scores, labels = self.index.search(query, k)
            return [(int(i), float(s)) for s, i in zip(scores[0], labels[0], strict=True) if i >= 0]
        params = faiss.SearchParametersHNSW(efSearch=max(self.settings.ef_search, k))  # type: ignore[attr-defined]  # missing from faiss's stubs
        if self.dead:
            params.sel = self._selector()
        scores, pos = self.index.search(query, k, params=params)
        out = []
        for s, p in zip(scores[0], pos[0], strict=True):
            # The selector already skips tombstones; the mask check is the last line of defence.
            if p >= 0 and self.alive[p]:
                out.append((int(self.positions[p]), float(s)))
        return out

    def labels(self) -> Any:
        """The rowids of every live vector (int64 array)."""
        import faiss
        import numpy as np

        if self.kind == "hnsw":
            return self.positions[self.alive]
        if self.kind == "flat":
            return faiss.vector_to_array(self.index.id_map)
        lists = self.index.invlists
        parts = [faiss.rev_swig_ptr(lists.get_ids(i), lists.list_size(i)).copy()
                 for i in range(lists.nlist) if lists.list_size(i)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def _selector(self) -> Any:
        import faiss
        import numpy as np

        if self._bitmap is None:
            bits = np.packbits(self.alive, bitorder="little")
            self._bitmap = (bits, faiss.IDSelectorBitmap(self.alive.size, faiss.swig_ptr(bits)))
        return self._bitmap[1]


def _empty(kind: str, dims: int, settings: FaissSettings, matrix: Any) -> Any:
    import faiss
    import numpy as np

    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dims, settings.m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = settings.ef_construction
        index.hnsw.efSearch = settings.ef_search
        return index
    if kind == "ivf":
        n = matrix.shape[0]
        ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(dims), dims, ivf_cells(settings.nlist, n), faiss.METRIC_INNER_PRODUCT)
        cap = 256 * ivf.nlist  # k-means needs no more than this; sampling keeps big builds fast
        ivf.train(matrix if n <= cap else matrix[np.sort(np.random.default_rng(0).choice(n, cap, replace=False))])
        ivf.nprobe = settings.nprobe
        return ivf
    return faiss.IndexIDMap2(faiss.IndexFlatIP(dims))


def set_query_params(index: FaissIndex) -> None:
    """Apply query-time settings (nprobe) to a built or loaded index."""
    import faiss

    if index.kind == "ivf":
        faiss.extract_index_ivf(index.index).nprobe = index.settings.nprobe


def build_index(settings: FaissSettings, dims: int, rowids: Any, matrix: Any) -> FaissIndex:
    """A new index of ``settings.kind`` holding ``matrix`` (unit rows) under ``rowids``."""
    import numpy as np

    kind = settings.kind
    n = len(rowids)
    if kind == "ivf" and n == 0:
        kind = "flat"  # nothing to train on yet; the first sync with vectors rebuilds it as IVF
    index = _empty(kind, dims, settings, matrix)
    out = FaissIndex(kind=kind, dims=dims, index=index, settings=settings, trained_on=n,
                     positions=np.zeros(0, dtype=np.int64) if kind == "hnsw" else None,
                     alive=np.zeros(0, dtype=bool) if kind == "hnsw" else None)
    out.add(rowids, matrix)
    log.debug("built faiss %s index over %d vectors (%d dims)", kind, n, dims)
    return out
