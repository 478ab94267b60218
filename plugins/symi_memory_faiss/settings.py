"""The ``memorySearch.store.faiss`` settings, read once per backend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["FaissSettings"]


@attrs.frozen(kw_only=True)
class FaissSettings:
    """Index type and tuning knobs of the faiss backend (spec names in comments)."""

    kind: str = "flat"  # index: flat | hnsw | ivf
    m: int = 32  # M
    ef_construction: int = 200  # efConstruction
    ef_search: int = 128  # efSearch
    nlist: int = 1024
    nprobe: int = 16
    threads: int = 1
    tombstone_ratio: float = 0.2  # tombstoneRatio

    @classmethod
    def from_memory_search(cls, memory_search: Mapping[str, Any]) -> FaissSettings:
        f = (memory_search.get("store") or {}).get("faiss") or {}
        d = cls()
        return cls(kind=f.get("index", d.kind), m=int(f.get("M", d.m)),
                   ef_construction=int(f.get("efConstruction", d.ef_construction)),
                   ef_search=int(f.get("efSearch", d.ef_search)), nlist=int(f.get("nlist", d.nlist)),
                   nprobe=int(f.get("nprobe", d.nprobe)), threads=int(f.get("threads", d.threads)),
                   tombstone_ratio=float(f.get("tombstoneRatio", d.tombstone_ratio)))

    def build_identity(self) -> dict[str, Any]:
        """The settings a saved index was built with; a change means rebuild.

        efSearch and nprobe are query-time only, so they are not part of it.
        """
        if self.kind == "hnsw":
            return {"index": "hnsw", "M": self.m, "efConstruction": self.ef_construction}
        if self.kind == "ivf":
            return {"index": "ivf", "nlist": self.nlist}
        return {"index": "flat"}
