#!/usr/bin/env python3
"""Score dedup-on-write decisions against pairs.jsonl (stdlib only).

Predictions: JSON Lines, one object per pair, shaped like memory_append's answer:

    {"id": "p001", "duplicateOf": {"path": "MEMORY.md", "startLine": 4, "endLine": 4}, "score": 0.91}
    {"id": "p052", "duplicateOf": null, "supersedes": {"path": "MEMORY.md", "startLine": 4, "endLine": 4}}

``duplicateOf`` not null means "refused as a duplicate". ``score`` is optional;
with ``--threshold X`` a prediction whose score is below X counts as not a
duplicate, and ``--sweep`` prints the figures for a range of thresholds.
``supersedes`` is optional; when present for change pairs it is scored too.
A missing id counts as "appended, no duplicate".

Metrics:
  duplicate precision   refused pairs that are duplicates pointing at their stored fact / all refused pairs
  duplicate recall      duplicates refused with duplicateOf overlapping their target / all duplicates
  changes refused       change pairs refused as duplicates / all change pairs (should be ~0)
  unrelated refused     unrelated pairs refused as duplicates / all unrelated pairs
  supersedes found      change pairs whose supersedes overlaps the target / all change pairs (if given)

    python3 score.py predictions.jsonl [--threshold 0.8] [--json]
    python3 score.py predictions.jsonl --sweep
    python3 score.py --oracle          # the labels as predictions: precision = recall = 1, 0 refused changes
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def overlaps(a: dict | None, b: dict | None) -> bool:
    if not a or not b:
        return False
    path = a["path"][len("workspace/"):] if a["path"].startswith("workspace/") else a["path"]
    return path == b["path"] and a["startLine"] <= b["endLine"] and b["startLine"] <= a["endLine"]


def score(pairs: list[dict], preds: dict[str, dict], threshold: float | None) -> dict:
    def refused(p: dict) -> dict | None:
        pred = preds.get(p["id"], {})
        dup = pred.get("duplicateOf")
        if dup and threshold is not None and pred.get("score", 1.0) < threshold:
            return None
        return dup

    dups = [p for p in pairs if p["kind"] == "duplicate"]
    changes = [p for p in pairs if p["kind"] == "change"]
    unrel = [p for p in pairs if p["kind"] == "unrelated"]
    refused_all = [p for p in pairs if refused(p)]
    correct = [p for p in dups if overlaps(refused(p), p["target"])]
    out = {
        "pairs": len(pairs), "duplicates": len(dups), "changes": len(changes), "unrelated": len(unrel),
        "threshold": threshold, "refused": len(refused_all),
        "duplicate_precision": len(correct) / len(refused_all) if refused_all else None,
        "duplicate_recall": len(correct) / len(dups) if dups else None,
        "changes_refused": sum(1 for p in changes if refused(p)) / len(changes) if changes else None,
        "unrelated_refused": sum(1 for p in unrel if refused(p)) / len(unrel) if unrel else None,
    }
    if any("supersedes" in preds.get(p["id"], {}) for p in changes):
        out["supersedes_found"] = sum(1 for p in changes
                                      if overlaps(preds.get(p["id"], {}).get("supersedes"), p["target"])) / len(changes)
    return out


def fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("predictions", nargs="?")
    ap.add_argument("--pairs", default=str(HERE / "pairs.jsonl"))
    ap.add_argument("--threshold", type=float, default=None)
    ap.add_argument("--sweep", action="store_true", help="figures for thresholds 0.30 .. 0.95")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--oracle", action="store_true")
    args = ap.parse_args()
    pairs = load(Path(args.pairs))
    if args.oracle:
        preds = {p["id"]: {"duplicateOf": p["target"] if p["kind"] == "duplicate" else None,
                           **({"supersedes": p["target"]} if p["kind"] == "change" else {})} for p in pairs}
    elif args.predictions:
        preds = {r["id"]: r for r in load(Path(args.predictions))}
    else:
        ap.error("give a predictions file or --oracle")
    cols = ["threshold", "refused", "duplicate_precision", "duplicate_recall", "changes_refused", "unrelated_refused"]
    rows = ([score(pairs, preds, t / 100) for t in range(30, 100, 5)] if args.sweep
            else [score(pairs, preds, args.threshold)])
    if args.json:
        print(json.dumps(rows if args.sweep else rows[0], indent=2))
        return 0
    print(" ".join(f"{c:>20}" for c in cols))
    for r in rows:
        print(" ".join(f"{fmt(r[c]):>20}" for c in cols))
    if "supersedes_found" in rows[0]:
        print(f"supersedes found (changes): {fmt(rows[0]['supersedes_found'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
