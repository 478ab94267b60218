"""The manager hands supersession what the backend offers at each search: a third-party backend whose optional
capabilities (``StoredVectors``, ``StoredLineVectors``, ``StoredLineAnalysis``) come and go with what it serves
from is searched as it stands at each search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from symi_memory import load_config, open_memory
from symi_memory.hookspecs import hookimpl
from symi_memory.plugins import load_plugins
from symi_memory.specs import BackendSpec, StoredVectors
from symi_memory.testing.fakes import InMemoryBackend


class _Failover:
    """A backend serving from builtin-sqlite, or from a keyword-only spare while the primary is down: it hands out
    what its current inner backend hands out (the inner's readers set on the instance, or none)."""

    READERS = ("candidate_vectors", "candidate_line_vectors", "candidate_line_analysis")

    def __init__(self, ctx: Any) -> None:
        self.primary = ctx.services.create_backend("builtin-sqlite")
        self.spare = InMemoryBackend(ctx)
        self.serve_from(self.primary)

    def serve_from(self, inner: Any) -> None:
        self.inner = inner
        for name in self.READERS:
            if hasattr(inner, name):
                setattr(self, name, getattr(inner, name))
            else:
                self.__dict__.pop(name, None)

    def sync(self, **kw: Any) -> Any:
        self.spare.sync(**kw)
        return self.primary.sync(**kw)

    def search(self, query: Any) -> Any:
        return self.inner.search(query)

    def read_file(self, path: str, **kw: Any) -> Any:
        return self.inner.read_file(path, **kw)

    def status(self) -> dict[str, Any]:
        return self.inner.status()  # type: ignore[no-any-return]

    def close(self) -> None:
        self.spare.close()
        self.primary.close()


def _open(tmp_path: Path) -> Any:
    class Plugin:
        @hookimpl
        def symi_memory_register_backends(self, register: Any) -> None:
            register(BackendSpec(name="failover-store", factory=_Failover))

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-01-10.md").write_text("The car is a blue hatchback.\n", encoding="utf-8")
    (ws / "memory" / "2026-03-02.md").write_text("Sold the blue hatchback; the car is now a red SUV.\n",
                                                  encoding="utf-8")
    plugins = load_plugins(extra=[("failover", Plugin())])
    cfg = load_config(None, state_dir=tmp_path / "state", plugins=plugins,
                      overrides={"plugins": {"slots": {"memory": "failover-store"}},
                                 "agents": {"defaults": {"memorySearch": {"provider": "hash"}}}})
    return open_memory(cfg, workspace=ws, start=False)


def test_a_backend_losing_its_stored_vectors_is_still_searched(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mem.sync()
        assert isinstance(mem.backend, StoredVectors)
        assert mem.search("what car do I drive", min_score=0).results
        mem.backend.serve_from(mem.backend.spare)  # the primary is down: the spare stores no vectors
        assert not isinstance(mem.backend, StoredVectors)
        # Searched as any backend without stored vectors is (supersession without them), not an AttributeError.
        assert mem.search("what car do I drive", min_score=0).results


def test_a_backend_gaining_stored_vectors_has_its_hits_superseded(tmp_path: Path) -> None:
    with _open(tmp_path) as mem:
        mem.sync()
        mem.backend.serve_from(mem.backend.spare)  # searched first while the primary is down: no stored vectors
        assert all(h.superseded_by is None for h in mem.search("what car do I drive", min_score=0).results)
        mem.backend.serve_from(mem.backend.primary)  # back on the primary: its stored vectors make the pair again
        hits = {h.path: h for h in mem.search("what car do I drive", min_score=0).results}
        old = hits["memory/2026-01-10.md"].superseded_by
        assert old is not None and old["path"] == "memory/2026-03-02.md"
