"""Sync benchmark: full index throughput, no-change sync and one changed file among 10k files.

    python bench/sync_bench.py [--files 10000] [--backends builtin-sqlite,faiss] [--out docs]

Uses the deterministic ``hash`` embedder (pure Python, so throughput is a
floor, not a model's speed). The one-changed-file time is also reported with
the embedding time taken out (measured around the provider's calls).
Targets: no-change sync < 1 s, one changed file < 200 ms (excluding
embedding), full index >= 2000 chunks/s. Appends a section to docs/benchmarks.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("SYMI_MEMORY_PLUGINS", "symi_memory.testing.plugin")  # opts in to the deterministic `hash` test provider

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import write_section  # noqa: E402

WORDS = "garden harbour router backup standup sourdough knee dentist ticket deploy pipeline beagle".split()


def make_workspace(root: Path, files: int) -> None:
    mem = root / "memory" / "notes"
    mem.mkdir(parents=True)
    for i in range(files):
        body = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(40))
        (mem / f"note-{i:05d}.md").write_text(f"# Note {i}\n\n- item{i} {body}\n- ref {i * 13}\n", encoding="utf-8")


class Timed:
    """Wraps a provider instance and adds up the time spent embedding."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.seconds = inner, 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_documents(self, texts: Any) -> Any:
        t = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - t


def bench(backend: str, files: int) -> dict[str, Any]:
    from symi_memory.config import load_config
    from symi_memory.manager import open_memory

    root = Path(tempfile.mkdtemp(prefix="symi-sync-"))
    try:
        ws = root / "ws"
        make_workspace(ws, files)
        cfg = load_config(None, state_dir=root / "state", overrides={
            "plugins": {"slots": {"memory": backend}},
            "agents": {"defaults": {"memorySearch": {"provider": "hash", "sync": {"watch": False}}}}})
        with open_memory(cfg, workspace=ws, start=False) as mem:
            timed = Timed(mem.backend.choice.provider)
            mem.backend.choice.provider = timed
            full = mem.sync()
            nochange = []
            for _ in range(3):
                t = time.perf_counter()
                mem.sync()
                nochange.append(time.perf_counter() - t)
            one, one_embed = [], []
            for k in range(3):
                target = ws / "memory" / "notes" / f"note-{k * 997:05d}.md"
                target.write_text(target.read_text(encoding="utf-8") + f"- edited {k}\n", encoding="utf-8")
                before = timed.seconds
                t = time.perf_counter()
                report = mem.sync()
                one.append(time.perf_counter() - t)
                one_embed.append(timed.seconds - before)
                assert report.files_indexed == 1, report
        return {"backend": backend, "files": files, "chunks": full.chunks_written, "full_s": full.seconds,
                "chunks_per_s": full.chunks_written / full.seconds,
                "nochange_s": statistics.median(nochange), "one_changed_s": statistics.median(one),
                "one_changed_minus_embed_s": statistics.median(a - b for a, b in zip(one, one_embed, strict=True))}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--backends", default="builtin-sqlite,faiss")
    ap.add_argument("--out", default="docs")
    args = ap.parse_args()
    rows = [bench(b, args.files) for b in args.backends.split(",")]
    lines = ["Hash embedder (pure Python); median of 3 runs for the incremental cases.", "",
             "| backend | files | chunks | full index (s) | chunks/s (target >= 2000) | no-change sync (ms, target < 1000) "
             "| one changed file (ms) | ... minus embedding (ms, target < 200) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['backend']} | {r['files']:,} | {r['chunks']:,} | {r['full_s']:.1f} | {r['chunks_per_s']:.0f} | "
                     f"{r['nochange_s'] * 1000:.0f} | {r['one_changed_s'] * 1000:.0f} | {r['one_changed_minus_embed_s'] * 1000:.0f} |")
    table = "\n".join(lines)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_section(out / "benchmarks.md", f"Sync: {args.files:,} files", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
