"""Benchmark the offline ``local`` embedding provider.

Measures model load time (cold: including the onnxruntime/tokenizers imports;
warm: a second load in the same process) and throughput in texts/s for
~100-token and ~400-token texts, with window pooling (the default) and with
plain truncation at 256 word pieces, so the cost of keeping a long chunk's
tail is visible.

    python bench/bench_local_embed.py [--threads N] [--rounds R] [--json]

Texts are cut from the devmem dev set's Markdown (bench/datasets/devmem).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

HERE = Path(__file__).parent
CORPUS = HERE / "datasets" / "devmem" / "workspace"


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


def throughput(provider, texts: list[str], rounds: int, batch: int = 32) -> tuple[float, float]:
    """(texts per wall second, texts per CPU second of this process), medians over ``rounds``.

    The CPU-second rate is far less sensitive to other load on a shared host;
    times the thread count it bounds what a dedicated machine reaches.
    """
    provider.embed_documents(texts[:4])  # warm the session's kernels
    wall, cpu = [], []
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(0, len(texts), batch):
            provider.embed_documents(texts[i : i + batch])
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return len(texts) / statistics.median(wall), len(texts) / statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="local.threads (default: min(2, cpus))")
    ap.add_argument("--rounds", type=int, default=2)
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

    threads = provider.session.get_session_options().intra_op_num_threads
    model_file = Path(provider.session._model_path)
    truncating = load_onnx_embedder(
        model_file,
        bundled_tokenizer(),
        model="trunc",
        model_sha256=MINILM_ONNX_SHA256,
        threads=threads,
        windowed=False,
    )
    counter = Tokenizer.from_file(str(bundled_tokenizer()))
    counter.no_truncation()
    counter.no_padding()
    corpus = corpus_text()
    short = make_texts(corpus, counter, 100, 96)
    long = make_texts(corpus, counter, 400, 32)

    results = {
        "threads": threads,
        # Other work on a shared host skews the rates; record it next to them.
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "load_cold_s": round(cold, 3),
        "load_warm_s": round(warm, 3),
        "texts_per_s": {},
        "texts_per_cpu_s": {},
    }
    for name, prov, texts in (
        ("100tok_windowed", provider, short),
        ("400tok_windowed", provider, long),
        ("400tok_truncated", truncating, long),
    ):
        per_wall, per_cpu = throughput(prov, texts, args.rounds)
        results["texts_per_s"][name] = round(per_wall, 1)
        results["texts_per_cpu_s"][name] = round(per_cpu, 1)
    if args.json:
        print(json.dumps(results))
        return
    print(f"threads: {threads} (host load average before the runs: {results['loadavg_1m']})")
    print(f"load (cold, with imports + sha256 check): {cold:.3f} s")
    print(f"load (warm, second instance):            {warm:.3f} s")
    for name, rate in results["texts_per_s"].items():
        per_cpu = results["texts_per_cpu_s"][name]
        print(f"{name:>18}: {rate:8.1f} texts/s  ({per_cpu:.1f} texts per CPU-second)")


if __name__ == "__main__":
    main()
