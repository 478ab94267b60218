"""Benchmark the offline ``local`` embedding provider against a baseline, in one run.

Measures model load time (cold: including the onnxruntime/tokenizers imports;
warm: a second load in the same process) and throughput in texts/s for
~100-token and ~400-token texts (window pooling, the default), for this
checkout's embedder and for a baseline one taken from git (``--baseline-ref``,
by default the commit before the batch-size change of issue 13) with the same
model and thread count (``local.threads``: the baseline's intra-op threads, this
checkout's parallel single-threaded batches). The two alternate round by round so
host load hits both alike; medians are reported, with the ratio, and the
minimum cosine between the two embedders' vectors over every text (the new
code must give the same vectors: >= 0.9999). ``--truncated`` adds plain
truncation at 256 word pieces, so the cost of keeping a long chunk's tail is
visible. ``--plain`` adds this checkout's embedder on the plain (unfused) graph, so the gain of the
graph rewrite (plugins/symi_memory_local/fusion.py) shows apart from the batching changes.

    python bench/bench_local_embed.py [--threads N] [--rounds R] [--baseline-ref REF] [--truncated] [--plain] [--json]

Texts are cut from the devmem dev set's Markdown (bench/datasets/devmem).
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
CORPUS = HERE / "datasets" / "devmem" / "workspace"
#: main before the issue-13 embedding work (batches of up to 8,192 padded tokens).
DEFAULT_BASELINE = "b918e7d"


def baseline_module(ref: str, into: Path):
    """``symi_memory_local.onnx_embedder`` as it was at git ``ref``, importable beside this checkout's."""
    tar = subprocess.run(["git", "-C", str(HERE.parent), "archive", ref, "plugins/symi_memory_local"],
                         check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(into, filter="data")
    (into / "plugins" / "symi_memory_local").rename(into / "symi_memory_local_baseline")
    sys.path.insert(0, str(into))
    return importlib.import_module("symi_memory_local_baseline.onnx_embedder")


def corpus_text() -> str:
    return "\n".join(md.read_text(encoding="utf-8") for md in sorted(CORPUS.rglob("*.md")))


def make_texts(corpus: str, tokenizer, target_tokens: int, count: int) -> list[str]:
    """``count`` texts of ``target_tokens`` word pieces each (plus [CLS]/[SEP]), cut at piece offsets."""
    offsets = tokenizer.encode(corpus, add_special_tokens=False).offsets
    step = max(1, (len(offsets) - target_tokens) // count)
    texts = []
    for i in range(count):
        start = (i * step) % (len(offsets) - target_tokens)
        texts.append(corpus[offsets[start][0] : offsets[start + target_tokens - 1][1]])
    return texts


def run_once(provider, texts: list[str], batch: int = 32) -> tuple[float, float, list[list[float]]]:
    """(wall s, CPU s of this process, vectors) to embed ``texts`` in calls of ``batch`` like the indexer.

    The CPU time is far less sensitive to other load on a shared host; times
    the thread count it bounds what a dedicated machine reaches.
    """
    t0, c0 = time.perf_counter(), time.process_time()
    vectors: list[list[float]] = []
    for i in range(0, len(texts), batch):
        vectors.extend(provider.embed_documents(texts[i : i + batch]))
    return time.perf_counter() - t0, time.process_time() - c0, vectors


def min_cosine(a: list[list[float]], b: list[list[float]]) -> float:
    return min(sum(x * y for x, y in zip(u, v, strict=True)) for u, v in zip(a, b, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="local.threads (default: min(2, cpus))")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline-ref", default=DEFAULT_BASELINE,
                    help=f"git commit whose embedder is the baseline (default {DEFAULT_BASELINE})")
    ap.add_argument("--truncated", action="store_true", help="also time plain truncation at 256 pieces")
    ap.add_argument("--plain", action="store_true", help="also time this checkout's embedder on the unfused graph")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args()

    from symi_memory.specs import ProviderContext
    from symi_memory_local import hooks

    local = {"modelPath": None, "modelCacheDir": None, "threads": args.threads, "sha256": None, "model": None}
    ctx = ProviderContext(settings={"local": local})
    def load() -> object:
        p = hooks.create(ctx)
        # The bundled model loads lazily (on first use); time the real load.
        return p.embedder() if hasattr(p, "embedder") else p

    t0 = time.perf_counter()
    provider = load()
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    load().close()
    warm = time.perf_counter() - t0

    from tokenizers import Tokenizer

    from symi_memory_local.integrity import MINILM_ONNX_SHA256, bundled_tokenizer
    from symi_memory_local.onnx_embedder import load_onnx_embedder

    threads = provider.threads
    model_file = Path(provider.session._model_path)
    provider.close()
    common = {"model_sha256": MINILM_ONNX_SHA256, "threads": threads}
    tmp = tempfile.TemporaryDirectory(prefix="symi-embed-baseline-")
    old = baseline_module(args.baseline_ref, Path(tmp.name))
    # Both fully optimised from the start (the provider's fast-start session is swapped for this one after
    # its first use), so the rates compare the embedding paths and nothing else.
    embedders = {
        "baseline": old.load_onnx_embedder(model_file, bundled_tokenizer(), model="baseline", **common),
        "new": load_onnx_embedder(model_file, bundled_tokenizer(), model="new", **common),
    }
    if args.truncated:
        embedders["new, truncated"] = load_onnx_embedder(model_file, bundled_tokenizer(), model="trunc",
                                                         windowed=False, **common)
    if args.plain:
        embedders["new, plain graph"] = load_onnx_embedder(model_file, bundled_tokenizer(), model="plain",
                                                           fuse=False, **common)
    counter = Tokenizer.from_file(str(bundled_tokenizer()))
    counter.no_truncation()
    counter.no_padding()
    corpus = corpus_text()
    sets = {"100-token": make_texts(corpus, counter, 100, 96), "400-token": make_texts(corpus, counter, 400, 32)}
    for e in embedders.values():
        e.embed_documents(sets["400-token"][:4])  # warm the session's kernels

    load_before = os.getloadavg()[0]
    wall: dict[str, dict[str, list[float]]] = {s: {n: [] for n in embedders} for s in sets}
    cpu: dict[str, dict[str, list[float]]] = {s: {n: [] for n in embedders} for s in sets}
    vectors: dict[str, dict[str, list[list[float]]]] = {s: {} for s in sets}
    for r in range(args.rounds):
        names = list(embedders) if r % 2 == 0 else list(reversed(embedders))
        for set_name, texts in sets.items():
            for name in names:
                w, c, vecs = run_once(embedders[name], texts)
                wall[set_name][name].append(len(texts) / w)
                cpu[set_name][name].append(len(texts) / c)
                vectors[set_name].setdefault(name, vecs)
    for e in embedders.values():
        e.close()
    tmp.cleanup()

    results = {
        "threads": threads,
        "rounds": args.rounds,
        "baseline_ref": args.baseline_ref,
        # Other work on a shared host skews the rates; record it next to them.
        "loadavg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "load_cold_s": round(cold, 3),
        "load_warm_s": round(warm, 3),
        "texts_per_s": {s: {n: round(statistics.median(v), 2) for n, v in by.items()} for s, by in wall.items()},
        "texts_per_cpu_s": {s: {n: round(statistics.median(v), 2) for n, v in by.items()} for s, by in cpu.items()},
        "min_cosine_new_vs_baseline": {
            s: round(min_cosine(vectors[s]["new"], vectors[s]["baseline"]), 7) for s in sets},
    }
    if args.json:
        print(json.dumps(results))
        return
    print(f"threads: {threads}; rounds: {args.rounds}; baseline: {args.baseline_ref}; "
          f"host load average before/after: {results['loadavg_1m'][0]} / {results['loadavg_1m'][1]}")
    print(f"load (cold, with imports + sha256 check): {cold:.3f} s")
    print(f"load (warm, second instance):            {warm:.3f} s")
    print("| texts | embedder | texts/s | ratio | texts per CPU-s | ratio | min cosine vs baseline |")
    print("|---|---|---|---|---|---|---|")
    for s in sets:
        bw, bc = results["texts_per_s"][s]["baseline"], results["texts_per_cpu_s"][s]["baseline"]
        for n in embedders:
            w, c = results["texts_per_s"][s][n], results["texts_per_cpu_s"][s][n]
            cosine = results["min_cosine_new_vs_baseline"][s] if n == "new" else ""
            print(f"| {s} | {n} | {w:.1f} | {w / bw:.2f} | {c:.1f} | {c / bc:.2f} | {cosine} |")


if __name__ == "__main__":
    main()
