"""The typed config this plugin owns, declared with the core's field DSL (see symi_memory_register_config_sections)."""

from __future__ import annotations

import attrs

from symi_memory.config.fields import opt

__all__ = ["FaissSettings"]


@attrs.define(kw_only=True, eq=False, repr=False)
class FaissSettings:
    index: str = opt("index", "flat", choices=("flat", "hnsw", "ivf"), doc="faiss backend index type.")
    m: int = opt("M", 32, lo=4, hi=256, doc="HNSW neighbours per node.")
    ef_construction: int = opt("efConstruction", 200, lo=8, hi=4096, doc="HNSW build-time beam width.")
    ef_search: int = opt("efSearch", 128, lo=8, hi=4096, doc="HNSW query-time beam width.")
    nlist: int = opt("nlist", 1024, lo=1, hi=1_000_000, doc="IVF cell count (capped by the vector count).")
    nprobe: int = opt("nprobe", 16, lo=1, hi=100_000, doc="IVF cells probed per query.")
    threads: int = opt("threads", 1, lo=0, hi=256, doc="OpenMP threads for faiss; 1 gives the best single-query latency on small machines, 0 leaves faiss's default.")
    tombstone_ratio: float = opt("tombstoneRatio", 0.2, lo=0.0, hi=1.0, doc="Rebuild an HNSW index once this share of its vectors are deleted.")
