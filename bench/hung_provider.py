"""What a hung embedding provider costs a search and a sync (issue 14).

A loopback HTTP server accepts embedding requests and never answers within
the request timeout. Side by side in one run:

- search: ``MemoryManager.search`` (the query-embedding deadline) against the
  baseline of waiting for the provider's own answer, as every search did
  before (``provider.embed_query`` directly, bounded by ``remote.timeoutMs``);
- sync of ~600 chunks: how many times the sync waited on the hung provider,
  and the wall time, against the baseline of one wait per 256-chunk group
  (the number of groups, times the timeout).

    python bench/hung_provider.py [--timeout-ms 10000] [--files 120]

No network beyond 127.0.0.1. Prints one table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from symi_memory.config import load_config
from symi_memory.index.indexer import EMBED_BATCH
from symi_memory.manager import open_memory


class _Hang(BaseHTTPRequestHandler):
    calls = 0

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
        type(self).calls += 1
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(3600)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout-ms", type=int, default=10_000, help="remote.timeoutMs (the baseline's wait)")
    ap.add_argument("--files", type=int, default=120)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hang)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "memory").mkdir(parents=True)
        for i in range(args.files):
            lines = [f"Day {i} line {j}: topic{i} and the quarterly planning of item{i}x{j}" for j in range(90)]
            (ws / "memory" / f"n{i:03d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        cfg = load_config(None, state_dir=Path(tmp) / "state", overrides={"agents": {"defaults": {"memorySearch": {
            "provider": "openai", "remote": {"baseUrl": url, "apiKey": "sk-bench", "timeoutMs": args.timeout_ms}}}}})
        with open_memory(cfg, workspace=ws, start=False) as mem:
            t0 = time.monotonic()
            report = mem.sync()
            sync_s = time.monotonic() - t0
            waits = _Hang.calls
            chunks = report.chunks_written
            groups = -(-chunks // (EMBED_BATCH * 4))
            t0 = time.monotonic()
            resp = mem.search("topic7 quarterly")
            search_s = time.monotonic() - t0
            t0 = time.monotonic()
            resp2 = mem.search("topic8 quarterly")
            search2_s = time.monotonic() - t0
            provider = mem.backend.choice.provider
            t0 = time.monotonic()
            try:
                provider.embed_query("topic7 quarterly")
            except Exception:  # the timeout is the point
                pass
            baseline_s = time.monotonic() - t0
    server.shutdown()
    rows = [
        ("search, first (s)", f"{search_s:.2f}", f"{baseline_s:.2f}", f"mode {resp.mode}, {len(resp.results)} hits"),
        ("search, next (s)", f"{search2_s:.2f}", f"{baseline_s:.2f}", f"mode {resp2.mode}, {len(resp2.results)} hits"),
        ("sync: waits on the provider", str(waits), str(groups), f"{chunks} chunks, {groups} groups of 256"),
        ("sync wall time (s)", f"{sync_s:.2f}", f"~{groups * args.timeout_ms / 1000:.0f}",
         "baseline: one timeout per group"),
    ]
    print(f"hung provider, remote.timeoutMs = {args.timeout_ms}")
    print(f"{'figure':<30}{'now':>8}{'baseline':>10}  note")
    for name, now, base, note in rows:
        print(f"{name:<30}{now:>8}{base:>10}  {note}")
    print(json.dumps({"searchSeconds": search_s, "baselineSeconds": baseline_s, "syncWaits": waits,
                      "baselineWaits": groups, "syncSeconds": sync_s}))


if __name__ == "__main__":
    main()
