"""One-shot CLI times: ``status``, ``get``, ``search`` (local provider) and a keyword-only search.

    python bench/cli_startup.py [--baseline-python /work/main/.venv/bin/python] [--runs 7] [--json]

Each command is a fresh process (what an agent's shell tool pays). The
devmem workspace (bench/datasets/devmem) is indexed once per interpreter
with the ``local`` provider, and into a second state dir with provider ``none``
for the keyword-only search (an index records the provider that built it: a
shared one was re-synced by every search that alternated between the two);
then the commands run interleaved, this checkout and the baseline one after
the other, so host load hits both alike; at the end, a status check confirms
no timed command synced. Medians are reported with the ratio to the baseline, for wall time and for
CPU time (user + system of the child process, which host load inflates less). Floors in the
same run: ``python -c pass``, ``import numpy``, ``import onnxruntime`` and the three
libraries a ``local`` query embedding imports (numpy, onnxruntime, tokenizers).
Targets: status/get <= 0.3 s, search with ``local`` <= 0.6 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKSPACE = HERE / "datasets" / "devmem" / "workspace"

COMMANDS = {
    "status": ["status"],
    "get": ["get", "MEMORY.md"],
    "search (local)": ["search", "how do we deploy the staging server"],
    "search (keyword-only)": ["--config", "{kw}", "search", "how do we deploy the staging server"],
}


def cli(python: str, root: Path, args: list[str]) -> list[str]:
    # The keyword-only commands get an index of their own: an index records the provider that built it, so
    # sharing one would make every search re-sync it for the other provider before answering.
    cfg, state = str(root / "local.toml"), str(root / "state")
    if args and args[0] == "--config":
        cfg, state, args = str(root / "keyword.toml"), str(root / "state-keyword"), args[2:]
    return [python, "-m", "symi_memory.cli", "--config", cfg, "--state-dir", state, "--workspace", str(root / "ws"), *args]


def prepare(python: str, root: Path) -> float:
    shutil.copytree(WORKSPACE, root / "ws")
    (root / "local.toml").write_text('[agents.defaults.memorySearch]\nprovider = "local"\n', encoding="utf-8")
    (root / "keyword.toml").write_text('[agents.defaults.memorySearch]\nprovider = "none"\n', encoding="utf-8")
    t = time.perf_counter()
    subprocess.run(cli(python, root, ["index"]), check=True, capture_output=True, env=ENV)
    took = time.perf_counter() - t
    subprocess.run(cli(python, root, ["--config", "{kw}", "index"]), check=True, capture_output=True, env=ENV)
    return took


# What an installed package gets: compiled modules cached on disk (some shells set this variable).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"NO_COLOR": "1"}


#: CPU seconds (user + system) of each timed child, by its argv: less sensitive to host load than wall time.
CPU: dict[tuple[str, ...], list[float]] = {}


def timed(argv: list[str]) -> float:
    env = ENV
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env)
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    CPU.setdefault(tuple(argv), []).append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="interpreter of the checkout under test")
    ap.add_argument("--baseline-python", default=None, help="interpreter of the baseline checkout")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    pythons = {"now": args.python}
    if args.baseline_python:
        pythons["baseline"] = args.baseline_python
    tmp = Path(tempfile.mkdtemp(prefix="symi-cli-bench-"))
    try:
        roots = {name: tmp / name for name in pythons}
        index_s = {name: prepare(py, roots[name]) for name, py in pythons.items()}
        floors = {"python -c pass": [args.python, "-c", "pass"],
                  "python -c 'import numpy'": [args.python, "-c", "import numpy"],
                  "python -c 'import onnxruntime'": [args.python, "-c", "import onnxruntime"],
                  "python -c 'import numpy, onnxruntime, tokenizers'":
                      [args.python, "-c", "import numpy, onnxruntime, tokenizers"]}
        times: dict[str, dict[str, list[float]]] = {c: {n: [] for n in pythons} for c in COMMANDS}
        floor_times: dict[str, list[float]] = {f: [] for f in floors}
        for name, py in pythons.items():  # warm the OS file cache once per interpreter
            timed(cli(py, roots[name], COMMANDS["search (local)"]))
        for _ in range(args.runs):
            for f, argv in floors.items():
                floor_times[f].append(timed(argv))
            for c, cargs in COMMANDS.items():
                for name, py in pythons.items():
                    times[c][name].append(timed(cli(py, roots[name], cargs)))
        for name, py in pythons.items():  # no timed command may have synced: they measured answering only
            for cfg in ([], ["--config", "{kw}"]):
                st = json.loads(subprocess.run(cli(py, roots[name], [*cfg, "status", "--json"]), check=True,
                                               capture_output=True, env=ENV).stdout)
                if st["index"]["lastSync"] != "cli" or st["dirty"]:
                    raise SystemExit(f"{name} {cfg or 'local'}: a timed command re-synced the index ({st['index']})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    med = {c: {n: statistics.median(v) for n, v in by.items()} for c, by in times.items()}
    cpu = {c: {n: statistics.median(CPU[tuple(cli(py, roots[n], COMMANDS[c]))][-args.runs:])
               for n, py in pythons.items()} for c in COMMANDS}
    floor_cpu = {f: statistics.median(CPU[tuple(argv)]) for f, argv in floors.items()}
    out = {
        "runs": args.runs,
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "first_index_s": {n: round(v, 2) for n, v in index_s.items()},
        "median_s": {c: {n: round(v, 3) for n, v in by.items()} for c, by in med.items()},
        "floors_s": {f: round(statistics.median(v), 3) for f, v in floor_times.items()},
        "median_cpu_s": {c: {n: round(v, 3) for n, v in by.items()} for c, by in cpu.items()},
        "floors_cpu_s": {f: round(v, 3) for f, v in floor_cpu.items()},
    }
    if args.json:
        print(json.dumps(out))
        return
    print(f"runs per command: {args.runs}; load average after: {out['loadavg_1m']}")
    print("first index of devmem (local): " + ", ".join(f"{n} {v:.1f} s" for n, v in index_s.items()))
    base = "baseline" in pythons
    head = "| command | now (s) |" + (" baseline (s) | ratio |" if base else "") + " CPU now (s) |" + \
        (" CPU baseline (s) | CPU ratio |" if base else "")
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for c, by in med.items():
        row = f"| `{c}` | {by['now']:.3f} |"
        if base:
            row += f" {by['baseline']:.3f} | {by['now'] / by['baseline']:.2f} |"
        row += f" {cpu[c]['now']:.3f} |"
        if base:
            row += f" {cpu[c]['baseline']:.3f} | {cpu[c]['now'] / cpu[c]['baseline']:.2f} |"
        print(row)
    for f, v in out["floors_s"].items():
        print(f"| `{f}` (floor) | {v:.3f} |" + (" | |" if base else "") + f" {floor_cpu[f]:.3f} |" +
              (" | |" if base else ""))


if __name__ == "__main__":
    main()
