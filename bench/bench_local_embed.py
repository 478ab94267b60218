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


def throughput(provider, texts: list[str], rounds: int, batch: int = 32) -> float:
    provider.embed_documents(texts[:4])  # warm the session's kernels
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(0, len(texts), batch):
            provider.embed_documents(texts[i : i + batch])
        times.append(time.perf_counter() - t0)
    return len(texts) / statistics.median(times)


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
    t0 = time.perf_counter()
    provider = hooks.create(ctx)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    hooks.create(ctx).close()
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
        "loadavg_1m": round(__import__("os").getloadavg()[0], 2),
        "load_cold_s": round(cold, 3),
        "load_warm_s": round(warm, 3),
        "texts_per_s": {
            "100tok_windowed": round(throughput(provider, short, args.rounds), 1),
            "400tok_windowed": round(throughput(provider, long, args.rounds), 1),
            "400tok_truncated": round(throughput(truncating, long, args.rounds), 1),
        },
    }
    if args.json:
        print(json.dumps(results))
        return
    print(f"threads: {threads} (host load average before the runs: {results['loadavg_1m']})")
    print(f"load (cold, with imports + sha256 check): {cold:.3f} s")
    print(f"load (warm, second instance):            {warm:.3f} s")
    for name, rate in results["texts_per_s"].items():
        print(f"{name:>18}: {rate:8.1f} texts/s")


if __name__ == "__main__":
    main()
