"""A query vector holding NaN or infinity (a provider bug: a local model fed odd input, a proxy's garbled
answer) carries no meaning: the search answers by keyword, saying why, as when the embedding failed; the next
search with a sound vector is hybrid again."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from symi_memory import hookimpl, load_config
from symi_memory.manager import open_memory
from symi_memory.specs import ProviderSpec
from symi_memory.testing.fakes import HashEmbedder


class _Poisoned(HashEmbedder):
    """The hash provider, except that queries starting with "poisoned" get a vector with one bad value."""

    bad = math.nan

    def embed_query(self, text: str):  # type: ignore[no-untyped-def]
        vec = list(super().embed_query(text))
        if text.startswith("poisoned"):
            vec[3] = self.bad
        return vec


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(6):
        (ws / "memory" / f"n{i}.md").write_text(
            f"# Day {i}\nThe otters crossed the river at dawn on day {i}.\nBudget item {i} was approved.\n",
            encoding="utf-8")
    return ws


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("scan", ["auto", "float32"])
def test_a_non_finite_query_vector_answers_by_keyword_saying_why(tmp_path: Path, bad: float, scan: str) -> None:
    class Plugin:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register):  # type: ignore[no-untyped-def]
            provider = _Poisoned()
            provider.bad = bad
            register(ProviderSpec(name="poisoned", factory=lambda ctx: provider))

    cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "poisoned", "store": {"vector": {"scan": scan}}}}}})
    with open_memory(cfg, workspace=_workspace(tmp_path), start=False, plugins=[("poisoned", Plugin())]) as mem:
        mem.sync()
        got = mem.search("poisoned otters river", min_score=0)
        assert got.mode == "fts-only"
        assert got.results and all(math.isfinite(h.score) for h in got.results)
        assert "otters" in got.results[0].snippet
        assert got.fallback is not None and "non-finite" in got.fallback.reason
        again = mem.search("otters river", min_score=0)
        assert again.mode == "hybrid" and again.fallback is None


@pytest.mark.parametrize("as_list", [False, True])
def test_a_finite_query_vector_whose_running_sum_overflows_still_searches_by_vector(tmp_path: Path,
                                                                                   as_list: bool) -> None:
    # A provider answering in half precision (a float16 model, unnormalized): every value is finite, but the
    # values summed in their own type overflow (a sum of float16 values is a float16). Such a vector is sound, and must not be taken for a NaN one.
    import numpy as np

    class Large(HashEmbedder):
        def embed_query(self, text: str):  # type: ignore[no-untyped-def]
            vec = np.asarray(super().embed_query(text), dtype=np.float64)
            out = (vec / float(np.abs(vec).max()) * 60000.0).astype(np.float16)  # float16's largest: 65504
            with np.errstate(over="ignore"):
                assert np.isfinite(out).all() and not math.isfinite(sum(out))  # the case at hand
            return list(out) if as_list else out  # an array, or a list of numpy floats

    class Plugin:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register):  # type: ignore[no-untyped-def]
            register(ProviderSpec(name="large", factory=lambda ctx: Large()))

    cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "large"}}}})
    with open_memory(cfg, workspace=_workspace(tmp_path), start=False, plugins=[("large", Plugin())]) as mem:
        mem.sync()
        got = mem.search("otters river", min_score=0)
        assert got.fallback is None and got.mode == "hybrid"
        assert got.results and "otters" in got.results[0].snippet
