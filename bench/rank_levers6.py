"""Seventh ranking round of issue 10: heading context in the line vectors, end to end on devmem and convmem.

A line of a Markdown section is embedded alone ("- Knee (2026): left patellofemoral pain; physio with
Martijn ...") and loses what its heading says (``## Nadia`` in health.md: whose knee). The lever: each
line under a heading also gets the vector of ``"<heading>: <line>"``, and a chunk's best unit is the
larger of its best line's cosine and its best heading line's cosine minus ``delta``:

    vector cosine = (1 - w) * chunk + w * max(chunk, best line, best heading line - delta)   (w = unitWeight 0.7)

Headings holding a date (``# 2026-05-05 (Tue)``, ``# 2026-01-19 · chat with Ingrid``) say when, not what,
and give no heading line (``--all-headings`` gives every heading one); a heading is not itself given its
parent heading's context. The vector calibration is kept.

Unlike ``bench/rank_levers5.py`` (an offline simulation, about four devmem questions off the pipeline)
this runs the real pipeline: it indexes each set once (``--state``, kept between runs), embeds the heading
lines with the index's provider, and searches every query through ``MemoryManager.search`` (supersession,
month cue, tie order, minScore and maxResults as configured) with ``symi_memory.fusion.score_hits``
wrapped so that each candidate's cosine is lifted as above before it is calibrated and fused (the
wrapper recomputes the pipeline's own cosine from the stored vectors first and prints the largest
difference: about 1e-7). Candidates are the pipeline's own; a heading line does not bring in a chunk the
vector scan did not find. Prints, per set and ``delta``, the as-configured and ranking-view figures and
the questions whose gold rank moved against the pipeline as it is.

    python bench/rank_levers6.py [--datasets devmem,convmem] [--deltas 0.03,0.05,0.07,0.1] [--all-headings]
                                 [--state DIR] [--supersession]

``--supersession`` instead runs ``bench/supersession.py --provider local --repeat 1`` with the lever at
the first delta (pair it with a plain run of that script).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "datasets"
sys.path.insert(0, str(Path(__file__).resolve().parent))

DATED = re.compile(r"\d{4}-\d{2}-\d{2}")
UNIT_W = 0.7


def heading_of(lines: list[str], n: int) -> str:
    """The text of the nearest heading above line ``n`` (1-based) of a file, or ''."""
    for k in range(n - 2, -1, -1):
        m = re.match(r"^#+\s+(.*)", lines[k])
        if m:
            return m.group(1).strip()
    return ""


class HeadingLift:
    """Per chunk of one index: its vector, its line vectors and its heading lines' vectors."""

    def __init__(self, mem: Any, workspace: Path, *, all_headings: bool = False) -> None:
        from symi_memory.index.indexer import chunk_units

        be = mem._require()
        store, self.provider = be.store, be.choice.provider
        rows = store._read("SELECT c.rowid, c.path, c.start_line, c.end_line, v.embedding FROM chunks c "
                           "JOIN embedding_cache v ON v.id = c.vector").fetchall()
        lines_of: dict[int, list[np.ndarray]] = {}
        for chunk, blob in store._read("SELECT u.chunk, v.embedding FROM chunk_units u "
                                       "JOIN embedding_cache v ON v.id = u.vector").fetchall():
            lines_of.setdefault(chunk, []).append(np.frombuffer(blob, dtype=np.float32))
        files: dict[str, list[str]] = {}
        texts: list[str] = []
        owner: list[int] = []
        self.info: dict[int, tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = {}
        for rid, path, start, end, blob in rows:
            if path not in files:
                f = workspace / path
                files[path] = f.read_text(encoding="utf-8").split("\n") if f.exists() else []
            lines = files[path]
            self.info[rid] = (_unit(np.frombuffer(blob, dtype=np.float32)),
                              _unit(np.stack(lines_of[rid])) if rid in lines_of else np.zeros((0, 1), np.float32), [])
            if not lines:
                continue
            for a, _, text in chunk_units("\n".join(lines[start - 1:end]), tuple(range(start, end + 1)), "lines"):
                head = heading_of(lines, a)
                if head and not text.startswith("#") and (all_headings or not DATED.search(head)):
                    texts.append(f"{head}: {text}")
                    owner.append(rid)
        vecs = _unit(np.array(self.provider.embed_documents(texts), dtype=np.float32)) if texts else []
        for rid, v in zip(owner, vecs, strict=True):
            self.info[rid][2].append(v)
        self.heading_lines = len(texts)
        self.delta: float | None = None
        self.worst = 0.0
        self._q: dict[str, np.ndarray] = {}

    def lifted(self, query: str, hits: dict[int, float]) -> dict[int, float]:
        """The candidates' cosines with the heading lines taken in (``delta`` None: unchanged)."""
        if self.delta is None or not hits:
            return hits
        q = self._q.get(query)
        if q is None:
            q = self._q[query] = _unit(np.array(self.provider.embed_query(query), dtype=np.float32))
        out = {}
        for k, c in hits.items():
            chunk, lines, heads = self.info[k]
            cc = float(chunk @ q)
            best = max(cc, float((lines @ q).max())) if len(lines) else cc
            if len(lines):
                self.worst = max(self.worst, abs((1 - UNIT_W) * cc + UNIT_W * best - c))
            if heads:
                c += UNIT_W * max(0.0, float((np.stack(heads) @ q).max()) - self.delta - best)
            out[k] = c
        return out


def _unit(m: np.ndarray) -> np.ndarray:
    return m / np.maximum(np.linalg.norm(m, axis=-1, keepdims=True), 1e-9)


@contextlib.contextmanager
def patched(get_lift: Any) -> Iterator[None]:
    """``symi_memory.fusion.score_hits`` with each candidate's cosine lifted by ``get_lift()``."""
    import symi_memory.fusion as fusion

    orig = fusion.score_hits

    def score_hits(query: str, hybrid: Any, *, vector_hits: Any, **kw: Any) -> Any:
        lift = get_lift()
        return orig(query, hybrid, vector_hits=lift.lifted(query, vector_hits) if lift else vector_hits, **kw)

    fusion.score_hits = score_hits  # type: ignore[assignment]
    try:
        yield
    finally:
        fusion.score_hits = orig


def run(mem: Any, queries: list[dict[str, Any]]) -> dict[str, Any]:
    """Both views' figures and each answerable question's gold rank."""
    from symi_memory.evaluation import _overlaps, parse_now, score_run

    out: dict[str, Any] = {}
    for view, kw in (("as configured", {}), ("ranking", {"max_results": 10, "min_score": 0.0})):
        hits_of, ranks = {}, {}
        for q in queries:
            resp = mem.search(q["query"], now=parse_now(q.get("now")), **kw)
            hits = [{"path": h.path, "start": h.start_line, "end": h.end_line, "score": h.score} for h in resp.results]
            hits_of[q["id"]] = hits
            if q.get("gold"):
                ranks[q["id"]] = next((i for i, h in enumerate(hits, 1)
                                       if any(_overlaps(h, g) for g in q["gold"])), None)
        out[view] = (score_run(queries, hits_of), ranks)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem,convmem")
    ap.add_argument("--deltas", default="0.03,0.05,0.07,0.1")
    ap.add_argument("--all-headings", action="store_true", help="dated headings give heading lines too")
    ap.add_argument("--state", type=Path, default=Path("/tmp/symi-levers6"), help="indexes kept here between runs")
    ap.add_argument("--supersession", action="store_true", help="run bench/supersession.py with the lever")
    args = ap.parse_args()
    deltas = [float(x) for x in args.deltas.split(",")]
    if args.supersession:
        return _supersession(deltas[0], args.all_headings)

    from symi_memory import load_config
    from symi_memory.evaluation import _throwaway_config, load_queries
    from symi_memory.manager import open_memory

    print("| set / lever | as configured hit@1 / hit@5 / paraphrase hit@5 / MRR@10 | positives empty / negatives empty "
          "| ranking hit@1 / hit@5 / MRR@10 |")
    print("|---|---|---|---|")
    moves: list[str] = []
    for name in args.datasets.split(","):
        root = DATASETS / name
        queries = load_queries(root / "queries.jsonl")
        state = args.state / name
        state.mkdir(parents=True, exist_ok=True)
        cfg = load_config(None, state_dir=str(state),
                          overrides={"agents": {"defaults": {"memorySearch": {"provider": "local"}}}})
        with open_memory(_throwaway_config(cfg, state), workspace=root / "workspace", start=False) as mem:
            mem.sync(reason="eval")
            lift = HeadingLift(mem, root / "workspace", all_headings=args.all_headings)
            base: dict[str, Any] = {}
            with patched(lambda lift=lift: lift):
                for delta in [None, *deltas]:
                    lift.delta = delta
                    res = run(mem, queries)
                    conf, rank = res["as configured"][0], res["ranking"][0]
                    para = conf["per_type"].get("paraphrase", {}).get("hit@5") or float("nan")
                    label = "pipeline as it is" if delta is None else f"heading lines, delta {delta}"
                    print(f"| {name}: {label} | {conf['overall']['hit@1']:.3f} / {conf['overall']['hit@5']:.3f} / "
                          f"{para:.3f} / {conf['overall']['mrr@10']:.3f} | {conf['overall']['positive_empty']:.3f} / "
                          f"{conf['overall']['negative_empty_count']} | {rank['overall']['hit@1']:.3f} / "
                          f"{rank['overall']['hit@5']:.3f} / {rank['overall']['mrr@10']:.3f} |", flush=True)
                    if delta is None:
                        base = res
                        continue
                    for view in ("as configured", "ranking"):
                        b, r = base[view][1], res[view][1]
                        moved = [f"{q} {b[q] or '-'}->{r[q] or '-'}" for q in b if r[q] != b[q]]
                        moves.append(f"{name}, delta {delta}, {view}: " + (", ".join(moved) or "none"))
            print(f"<!-- {name}: {lift.heading_lines} heading lines; largest |recomputed - pipeline cosine| "
                  f"{lift.worst:.1e} -->", flush=True)
    print("\nGold ranks that moved (rank in the results, - = not in them):")
    for m in moves:
        print("  " + m)
    return 0


def _supersession(delta: float, all_headings: bool) -> int:
    """bench/supersession.py --provider local --repeat 1, every index it opens searched with the lever."""
    import supersession

    import symi_memory.manager as manager

    current: dict[str, Any] = {}
    orig = manager.open_memory

    def open_memory(*a: Any, **kw: Any) -> Any:
        mem = orig(*a, **kw)
        current.clear()
        current["mem"], current["ws"] = mem, Path(kw["workspace"])
        return mem

    def get_lift() -> HeadingLift | None:
        if "lift" not in current and "mem" in current:
            current["lift"] = HeadingLift(current["mem"], current["ws"], all_headings=all_headings)
            current["lift"].delta = delta
        return current.get("lift")

    manager.open_memory = open_memory  # type: ignore[assignment]
    sys.argv = ["supersession.py", "--provider", "local", "--repeat", "1"]
    try:
        with patched(get_lift):
            return int(supersession.main())
    finally:
        manager.open_memory = orig


if __name__ == "__main__":
    raise SystemExit(main())
