"""Deterministic fakes: a hashing embedder and an in-memory backend."""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..chunking import chunk_text
from ..specs import BackendContext, ProviderContext
from ..types import BackendResult, Candidate, ReadResult, SearchQuery, SyncProgress, SyncReport
from ..workspace import PathRules, absent_roots, decode_text, list_memory_files, read_regular

__all__ = ["HashEmbedder", "InMemoryBackend"]

log = logging.getLogger("symi_memory.testing")

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
    _slots: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = attrs.field(factory=dict, repr=False)

    @property
    def fingerprint(self) -> str:
        return f"hash:{self.dims}"

    @classmethod
    def from_context(cls, ctx: ProviderContext) -> HashEmbedder:
        dims = 384
        if ctx.model and ctx.model.startswith("hash-"):
            dims = int(ctx.model.split("-", 1)[1])
        return cls(dims=dims, model=f"hash-{dims}")

    def _word_slots(self, word: str) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """Hashed slots and signs of a word and its character trigrams (memoised: vocabularies repeat)."""
        slot = self._slots.get(word)
        if slot is not None:
            return slot
        feats = [word] + ([word[i : i + 3] for i in range(len(word) - 2)] if len(word) > 3 else [])
        idx, signs = [], []
        for feat in feats:
            h = int.from_bytes(hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest(), "little")
            idx.append(h % self.dims)
            signs.append(1.0 if (h >> 63) & 1 else -1.0)
        slot = (tuple(idx), tuple(signs))
        if len(self._slots) < 200_000:
            self._slots[word] = slot
        return slot

    def _vector(self, text: str) -> list[float]:
        import numpy as np

        idx: list[int] = []
        weights: list[float] = []
        for word, count in Counter(w.lower() for w in WORD_RE.findall(text)).items():
            slots, signs = self._word_slots(word)
            idx += slots
            weights += signs if count == 1 else [sign * count for sign in signs]
        vec = np.bincount(np.asarray(idx, dtype=np.int64), weights=np.asarray(weights), minlength=self.dims)
        norm = float(np.linalg.norm(vec))
        return (vec / norm if norm else vec).tolist()

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self._vector(text)

    def query_at_once(self, text: str) -> list[float] | None:
        """``embed_query``'s vector (:class:`~symi_memory.specs.EmbedsQueriesAtOnce`): a hash of the text, no I/O.

        None in a subclass that changes ``embed_query`` (it may wait, or answer otherwise): asked on the worker."""
        if type(self).embed_query is not HashEmbedder.embed_query:
            return None
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
        extra = agent.memory_search.get("extraPaths") or []
        absent = absent_roots(agent.workspace, extra)  # a folder away for a while: its files are not deleted
        files = list_memory_files(agent.workspace, extra)
        chunks = [c for c in self.chunks if any(root.holds(c[0]) for root in absent)]
        kept = len({c[0] for c in chunks})
        for i, f in enumerate(files):
            try:
                data, _ = read_regular(f.abs_path)
            except OSError as exc:  # swapped for a symlink or a FIFO since it was listed, or gone: left out
                log.warning("%s: not indexed (%s)", f.path, exc.strerror or exc)
                continue
            text, _ = decode_text(data)
            chunks.extend((f.path, c.start_line, c.end_line, c.text) for c in chunk_text(text, ch["tokens"], ch["overlap"]))
            if progress:
                progress(SyncProgress(phase="index", done=i + 1, total=len(files), path=f.path))
        self.chunks, self.files = chunks, len(files) + kept
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
