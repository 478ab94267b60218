"""Deterministic fakes: a hashing embedder and an in-memory backend."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..chunking import chunk_text
from ..specs import BackendContext, ProviderContext
from ..types import BackendResult, Candidate, ReadResult, SearchQuery, SyncProgress, SyncReport
from ..workspace import PathRules, decode_text, list_memory_files

__all__ = ["HashEmbedder", "InMemoryBackend"]

WORD_RE = re.compile(r"\w+", re.UNICODE)


@attrs.define
class HashEmbedder:
    """Feature-hashing bag of words (plus character trigrams), L2-normalised.

    Texts that share words get similar vectors, so ranking tests behave like
    a (weak) real model, with no model file and identical output everywhere.
    """

    dims: int = 384
    id: str = "hash"
    model: str = "hash-384"
    max_input_bytes: int = 8192
    calls: int = 0

    @property
    def fingerprint(self) -> str:
        return f"hash:{self.dims}"

    @classmethod
    def from_context(cls, ctx: ProviderContext) -> HashEmbedder:
        dims = 384
        if ctx.model and ctx.model.startswith("hash-"):
            dims = int(ctx.model.split("-", 1)[1])
        return cls(dims=dims, model=f"hash-{dims}")

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dims
        words = [w.lower() for w in WORD_RE.findall(text)]
        feats = words + [w[i : i + 3] for w in words if len(w) > 3 for i in range(len(w) - 2)]
        for feat in feats:
            h = int.from_bytes(hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest(), "little")
            vec[h % self.dims] += 1.0 if (h >> 63) & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec] if norm else vec

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self._vector(text)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return [self._vector(t) for t in texts]

    def close(self) -> None:
        pass


@attrs.define
class InMemoryBackend:
    """A reference backend holding chunks in a list; keyword overlap scoring only.

    Small and obviously correct: it is what the conformance suite is first
    proven against, and a template for third-party backends.
    """

    ctx: BackendContext
    chunks: list[tuple[str, int, int, str]] = attrs.field(factory=list)
    files: int = 0

    def sync(self, *, reason: str = "manual", force: bool = False,
             progress: Callable[[SyncProgress], None] | None = None) -> SyncReport:
        agent = self.ctx.agent
        ch = agent.memory_search["chunking"]
        files = list_memory_files(agent.workspace, agent.memory_search.get("extraPaths") or [])
        chunks: list[tuple[str, int, int, str]] = []
        for i, f in enumerate(files):
            with open(f.abs_path, "rb") as fh:
                text, _ = decode_text(fh.read())
            chunks.extend((f.path, c.start_line, c.end_line, c.text) for c in chunk_text(text, ch["tokens"], ch["overlap"]))
            if progress:
                progress(SyncProgress(phase="index", done=i + 1, total=len(files), path=f.path))
        self.chunks, self.files = chunks, len(files)
        return SyncReport(reason=reason, full=True, files_scanned=len(files), files_indexed=len(files),
                          chunks_written=len(chunks))

    def search(self, query: SearchQuery) -> BackendResult:
        words = {w.lower() for w in WORD_RE.findall(query.text)}
        scored = []
        for path, start, end, text in self.chunks:
            have = {w.lower() for w in WORD_RE.findall(text)}
            hits = len(words & have)
            if hits:
                score = hits / (1 + hits)
                scored.append(Candidate(id=f"{path}:{start}:{end}", path=path, start_line=start, end_line=end,
                                        score=score, text=text, text_score=score))
        scored.sort(key=lambda c: -c.score)
        return BackendResult(candidates=tuple(scored[: query.candidate_limit]), mode="fts-only", provider="none")

    def read_file(self, path: str, *, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        agent = self.ctx.agent
        rules = PathRules.from_workspace(agent.workspace, agent.memory_search.get("extraPaths") or [])
        return rules.read(path, from_line=from_line, lines=lines)

    def status(self) -> dict[str, Any]:
        return {"backend": "in-memory", "plugin": "in-memory", "files": self.files, "chunks": len(self.chunks),
                "dirty": False, "workspaceDir": str(self.ctx.agent.workspace), "provider": "none"}

    def close(self) -> None:
        self.chunks = []
