"""Time and peak memory of ``memory_get`` on one big memory file: a window (``from``/``lines``) and the whole file,
this checkout against a baseline interpreter, in one run.

Each read runs in a child process of its own (peak RSS is the child's ``ru_maxrss``), alternating the two sides, on
one workspace: ``memory/huge.md`` of ``--mb`` MB of 9-byte lines.

    python bench/get_window.py [--mb N] [--rounds R] [--baseline PYTHON] [--json]

``--baseline`` is an interpreter that imports the baseline's ``symi_memory`` (a wrapper script setting PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
from symi_memory.workspace import PathRules
rules = PathRules.from_workspace(sys.argv[1])
window = json.loads(sys.argv[2])
t = time.perf_counter()
text = rules.read("memory/huge.md", from_line=window[0], lines=window[1]).text
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "peakMB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "chars": len(text)}))
"""

WINDOWS = {"from 5, lines 1": [5, 1], "from middle, lines 20": ["middle", 20], "whole file": [None, None]}


def run(python: list[str], env: dict[str, str], ws: Path, window: list) -> dict:
    out = subprocess.run([*python, "-c", CHILD, str(ws), json.dumps(window)], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=108)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default="/tmp/py-base7cad")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    lines = args.mb * 1_000_000 // 9
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "memory").mkdir()
        (ws / "memory" / "huge.md").write_text("line abc\n" * lines, encoding="utf-8")
        mine_env = {**os.environ, "PYTHONPATH": f"{REPO / 'core'}:{REPO / 'plugins'}"}
        base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        sides = {"baseline": ([args.baseline], base_env), "this": ([sys.executable], mine_env)}
        results: dict[str, dict[str, list[dict]]] = {name: {w: [] for w in WINDOWS} for name in sides}
        for _ in range(args.rounds):
            for label, window in WINDOWS.items():
                window = [lines // 2 if window[0] == "middle" else window[0], window[1]]
                for name, (python, env) in sides.items():
                    results[name][label].append(run(python, env, ws, window))
    summary = {name: {label: {"seconds": statistics.median(r["seconds"] for r in runs),
                              "peakMB": statistics.median(r["peakMB"] for r in runs), "chars": runs[0]["chars"]}
                      for label, runs in by.items()} for name, by in results.items()}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"memory/huge.md: {args.mb} MB, {lines} lines; median of {args.rounds}")
    for label in WINDOWS:
        b, t = summary["baseline"][label], summary["this"][label]
        assert b["chars"] == t["chars"], (label, b, t)
        print(f"{label:<22} baseline {b['seconds']:7.3f} s {b['peakMB']:7.0f} MB   "
              f"this {t['seconds']:7.3f} s {t['peakMB']:7.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
