#!/usr/bin/env python3
"""Reference run: call a pair a duplicate of symi-memory's top search hit (needs symi-memory installed).

Indexes workspace/ in a throwaway state folder with the given provider,
searches each pair's text (min_score 0) and writes one prediction per pair:
``{"id", "duplicateOf": top hit or null, "score": top score}``. This is the
naive "search, then refuse above a threshold" approach, not symi-memory's
dedup; score it with ``score.py --sweep`` to see why a threshold alone is not
enough (changes of a stored fact score as high as its rewordings).

    python3 baseline_search.py --provider none  --out run-none.jsonl
    python3 baseline_search.py --provider local --out run-local.jsonl
    python3 score.py run-local.jsonl --sweep
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--provider", default="none", help="embedding provider (none = keyword only)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from symi_memory.config import load_config
    from symi_memory.manager import open_memory

    pairs = [json.loads(line) for line in (HERE / "pairs.jsonl").read_text(encoding="utf-8").splitlines() if line]
    with tempfile.TemporaryDirectory(prefix="symi-dedup-") as tmp:
        cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": {
            "provider": args.provider, "extraPaths": [], "sources": ["memory"]}}}})
        with open_memory(cfg, workspace=HERE / "workspace", start=False) as mem:
            mem.sync(reason="dedup-baseline")
            with open(args.out, "w", encoding="utf-8") as fh:
                for p in pairs:
                    hits = mem.search(p["text"], max_results=1, min_score=0).results
                    top = hits[0] if hits else None
                    fh.write(json.dumps({
                        "id": p["id"],
                        "duplicateOf": {"path": top.path, "startLine": top.start_line, "endLine": top.end_line}
                        if top else None,
                        "score": top.score if top else 0.0}) + "\n")


if __name__ == "__main__":
    main()
