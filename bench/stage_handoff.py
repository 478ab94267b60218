"""The per-search cost of a stage deadline's hand-over to the stage's worker thread (``query.stageDeadlineMs``).

Two figures, each with the host idle and with a busy loop per core (``--busy N`` processes spinning, started by
this script), run side by side under this tree's interpreter and a baseline's (``--baseline``), alternating rounds
so both see the same load:

* ``StageState.call`` of a function that returns at once (the hand-over and back alone), median and p90 of
  ``--calls`` calls;
* a search with a pass-through third-party post-processor, with the default deadline (run on the stage's worker)
  and with ``stageDeadlineMs`` 0 (run on the searching thread): the difference of the medians is the hand-over's
  cost inside a search.

    PYTHONPATH=core:plugins python bench/stage_handoff.py --baseline /tmp/py-baseb13

With ``--base-pipeline`` (the baseline checkout's ``core/symi_memory/pipeline.py``) it first compares the two
hand-overs in one process, alternating call by call, each after ~0.3 ms of Python (a search's work before the
stage): on a shared host the fairest figure, the two processes of the table above never run at the same moments.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NOTES = {"MEMORY.md": "# Memory\n\n- The router admin page is at 10.0.0.1.\n",
         "memory/net.md": "# Network\n\n- The router admin password rotates monthly.\n"}


def _spin() -> None:  # pragma: no cover - a busy core until terminated
    while True:
        pass


def _spinners(n: int) -> list[Any]:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_spin, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    return procs


def _stop(procs: list[Any]) -> None:
    for p in procs:
        p.terminate()
        p.join()


def _quantiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"p50": xs[len(xs) // 2] * 1e6, "p90": xs[int(len(xs) * 0.9)] * 1e6}


def measure(calls: int, searches: int) -> dict[str, Any]:
    """One round in this interpreter: the figures in microseconds."""
    from symi_memory import hookimpl, load_config, open_memory
    from symi_memory.pipeline import StageState
    from symi_memory.specs import PostProcessorSpec

    stage = StageState(kind="postprocessor", name="bench", plugin="bench")
    for _ in range(50):
        stage.call(lambda: None, 5.0)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        stage.call(lambda: None, 5.0)
        times.append(time.perf_counter() - t0)
    stage.stop()
    out: dict[str, Any] = {"call": _quantiles(times)}

    class Passing:
        def process(self, candidates: Any, ctx: Any) -> Any:
            return list(candidates)

    class PassPlugin:
        @hookimpl
        def symi_memory_register_postprocessors(self, register: Any) -> None:
            register(PostProcessorSpec(name="passing", factory=lambda hybrid: Passing(), order=200))

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        for rel, text in NOTES.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text, encoding="utf-8")
        mems = {}
        for label, deadline in (("worker", 5000), ("inline", 0)):
            cfg = load_config(None, state_dir=Path(tmp) / f"state-{label}", overrides={"agents": {"defaults": {
                "memorySearch": {"provider": "none", "sync": {"watch": False},
                                 "query": {"stageDeadlineMs": deadline}}}}})
            mem = mems[label] = open_memory(cfg, workspace=ws, start=False, plugins=[("pass-plugin", PassPlugin())])
            mem.sync()
            for _ in range(20):
                mem.search("router admin")
        per: dict[str, list[float]] = {"worker": [], "inline": []}
        cpu: dict[str, float] = {"worker": 0.0, "inline": 0.0}
        switches: dict[str, int] = {"worker": 0, "inline": 0}
        for k in range(searches):  # interleaved: both see the same moments of the host's load
            for label in (("worker", "inline") if k % 2 else ("inline", "worker")):
                r0, c0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
                mems[label].search("router admin")
                t1, c1, r1 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
                per[label].append(t1 - t0)
                cpu[label] += c1 - c0
                switches[label] += r1.ru_nvcsw - r0.ru_nvcsw + r1.ru_nivcsw - r0.ru_nivcsw
        for mem in mems.values():
            mem.close()
    for label, xs in per.items():
        out[f"search_{label}"] = _quantiles(xs)
    out["search_overhead_p50"] = out["search_worker"]["p50"] - out["search_inline"]["p50"]
    out["cpu_overhead"] = (cpu["worker"] - cpu["inline"]) / searches * 1e6  # µs of process CPU per search
    out["switches"] = {k: v / searches for k, v in switches.items()}  # context switches of the process per search
    return out


def _work(n: int = 3000) -> int:
    """About 0.3 ms of Python on this host: what a search does on its thread before handing a stage over."""
    total = 0
    for i in range(n):
        total += i * i
    return total


def ab(base_pipeline: str, calls: int) -> dict[str, dict[str, float]]:
    """This tree's ``StageState.call`` and the baseline's (its ``pipeline.py`` loaded beside it) in one process,
    alternating, each call after ``_work``: both see the same moments of the host's load."""
    import importlib.util

    from symi_memory import pipeline

    spec = importlib.util.spec_from_file_location("symi_memory._pipeline_baseline", base_pipeline)
    assert spec is not None and spec.loader is not None
    base = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = base
    spec.loader.exec_module(base)
    stages = {"this tree": pipeline.StageState(kind="postprocessor", name="new", plugin="bench"),
              "baseline": base.StageState(kind="postprocessor", name="base", plugin="bench")}
    for st in stages.values():
        for _ in range(50):
            st.call(lambda: None, 5.0)
    times: dict[str, list[float]] = {k: [] for k in stages}
    switches = dict.fromkeys(stages, 0)
    for i in range(calls):
        for k in (("this tree", "baseline") if i % 2 else ("baseline", "this tree")):
            _work()
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            stages[k].call(lambda: None, 5.0)
            t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            times[k].append(t1 - t0)
            switches[k] += r1.ru_nvcsw - r0.ru_nvcsw + r1.ru_nivcsw - r0.ru_nivcsw
    out = {}
    for k, xs in times.items():
        out[k] = {**_quantiles(xs), "mean": statistics.mean(xs) * 1e6, "switches": switches[k] / calls}
        stages[k].stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", help="the baseline interpreter (a script setting its PYTHONPATH)")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=INTERPRETER",
                    help="one more interpreter to run side by side")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--searches", type=int, default=1000)
    ap.add_argument("--busy", type=int, default=os.cpu_count() or 2, help="busy loops in the busy runs")
    ap.add_argument("--base-pipeline", help="the baseline's core/symi_memory/pipeline.py, for the in-process A/B")
    ap.add_argument("--one", action="store_true", help="one round in this interpreter, as JSON (internal)")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.calls, args.searches)))
        return 0
    if args.base_pipeline:
        print(f"in one process, alternating, each call after ~0.3 ms of Python ({args.calls} calls each), in µs")
        print("| host | hand-over | p50 | p90 | mean | context switches per call |")
        print("|---|---|---:|---:|---:|---:|")
        for load in ("idle", "busy"):
            spinning = _spinners(args.busy if load == "busy" else 0)
            try:
                for label, f in ab(args.base_pipeline, args.calls).items():
                    print(f"| {load} | {label} | {f['p50']:.0f} | {f['p90']:.0f} | {f['mean']:.0f} | "
                          f"{f['switches']:.1f} |")
            finally:
                _stop(spinning)
        print(f"load average: {os.getloadavg()[0]:.1f}")
    me = [sys.executable]
    runs = [("this tree", me)] + ([("baseline", [args.baseline])] if args.baseline else [])
    runs += [(label, [cmd]) for label, cmd in (a.split("=", 1) for a in args.also)]
    here = os.path.abspath(__file__)
    got: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for load in ("idle", "busy"):
        spinners = _spinners(args.busy if load == "busy" else 0)
        try:
            for r in range(args.rounds):
                for label, cmd in (runs if r % 2 == 0 else runs[::-1]):
                    res = subprocess.run([*cmd, here, "--one", "--calls", str(args.calls),
                                          "--searches", str(args.searches)],
                                         capture_output=True, text=True, check=True)
                    got.setdefault((load, label), []).append(json.loads(res.stdout))
        finally:
            _stop(spinners)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}; rounds {args.rounds}, calls {args.calls}, "
          f"searches {args.searches} each; medians over the rounds, in µs")
    print("| host | interpreter | call p50 | call p90 | search on worker p50 | search inline p50 | overhead p50 | "
          "CPU overhead | context switches per search (worker / inline) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (load, label), rounds in got.items():
        def med(f: Any, rounds: list[dict[str, Any]] = rounds) -> float:
            return statistics.median(f(x) for x in rounds)
        print(f"| {load} | {label} | {med(lambda x: x['call']['p50']):.0f} | {med(lambda x: x['call']['p90']):.0f} | "
              f"{med(lambda x: x['search_worker']['p50']):.0f} | {med(lambda x: x['search_inline']['p50']):.0f} | "
              f"{med(lambda x: x['search_overhead_p50']):.0f} | {med(lambda x: x['cpu_overhead']):.0f} | "
              f"{med(lambda x: x['switches']['worker']):.1f} / {med(lambda x: x['switches']['inline']):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
