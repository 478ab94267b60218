"""Dedup on write on bench/datasets/dedup: is each labelled text refused, appended as a change, or appended?

Indexes the dataset's workspace once (a throwaway state folder), then runs
the dedup lookup of ``memory_append`` (:func:`symi_memory.dedup.check_append`,
which decides without writing) for every pair and scores the answers with
the dataset's ``score.py``. Prints precision/recall on duplicates, changes
wrongly refused, unrelated texts refused, changes whose superseded line was
named, and the lookup time (p50), and writes the per-pair answers with
``--out``.

    python bench/dedup.py [--provider local] [--out results.jsonl]
"""

from __future__ import annotations

import os

os.environ.setdefault("SYMI_MEMORY_TESTING", "1")  # registers the deterministic `hash` test provider

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "bench" / "datasets" / "dedup"


def _scorer() -> Any:
    spec = importlib.util.spec_from_file_location("dedup_score", DATASET / "score.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(provider: str) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    from symi_memory.config import load_config
    from symi_memory.dedup import check_append
    from symi_memory.manager import open_memory

    pairs = [json.loads(x) for x in (DATASET / "pairs.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    preds: list[dict[str, Any]] = []
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="symi-dedup-") as tmp:
        cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": {
            "provider": provider, "store": {"path": str(Path(tmp) / "dedup.sqlite")}}}}})
        with open_memory(cfg, workspace=DATASET / "workspace", start=False) as mem:
            mem.sync(reason="bench")
            for p in pairs:
                started = time.perf_counter()
                check = check_append(mem, p["text"])
                times.append(time.perf_counter() - started)
                preds.append({"id": p["id"], "kind": p["kind"], "answer": check.kind,
                              "duplicateOf": check.target if check.kind == "duplicate" else None,
                              "supersedes": check.target if check.kind == "change" else None,
                              "similarity": check.similarity, "overlap": check.overlap,
                              "sameValues": check.same_values, "statesChange": check.states_change,
                              "candidate": check.candidate, "target": p["target"]})
    scored = _scorer().score(pairs, {x["id"]: x for x in preds}, None)
    return preds, scored, statistics.median(times) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    have_local = importlib.util.find_spec("symi_memory_local") is not None
    ap.add_argument("--provider", default="local" if have_local else "hash")
    ap.add_argument("--out", default=None, help="write the per-pair answers (JSON lines) here")
    args = ap.parse_args()
    preds, scored, p50 = run(args.provider)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            for x in preds:
                fh.write(json.dumps(x, ensure_ascii=False) + "\n")
    print(f"provider {args.provider}, {len(preds)} pairs, lookup p50 {p50:.1f} ms")
    print(json.dumps(scored, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
