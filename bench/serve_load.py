"""Load on `symi-memory serve` side by side with in-process search and one-shot CLI calls (devmem).

    python bench/serve_load.py                       # 10 s per concurrency level
    python bench/serve_load.py --duration 60         # the issue's 60 s run
    python bench/serve_load.py --provider hash       # no model (SYMI_MEMORY_PLUGINS=symi_memory.testing.plugin)

What it does, all on loopback, every loop bounded by a count or a deadline:

1. indexes bench/datasets/devmem once in a throwaway state dir and copies the index for agents a1..a3;
2. in-process: one warm MemoryManager runs the devmem queries (the baseline p50/p95);
3. starts `symi-memory serve` and drives POST /api/agents/main/search with 1, 8 and 32 concurrent
   keep-alive clients for --duration seconds each: p50, p95, requests/s, errors;
4. one-shot CLI: `symi-memory search Q --json` answered by the server, then with --no-server
   (a cold process each time), next to `python -c pass` for the interpreter's own start-up;
5. memory: the server's RSS with one agent open, then with four (main, a1, a2, a3) and how many
   embedding models it holds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEVMEM = REPO / "bench" / "datasets" / "devmem"


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def queries() -> list[str]:
    rows = [json.loads(line) for line in (DEVMEM / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line]
    return [r["query"] for r in rows]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def write_config(state: Path, provider: str) -> None:
    agents = "".join(f'[[agents.list]]\nid = "a{i}"\n' for i in (1, 2, 3))
    (state / "symi.toml").write_text(
        f'[agents.defaults]\nworkspace = "{DEVMEM / "workspace"}"\n'
        f'[agents.defaults.memorySearch]\nprovider = "{provider}"\n{agents}', encoding="utf-8")


def in_process(state: Path, qs: list[str], n: int) -> dict[str, Any]:
    from symi_memory import load_config, open_memory

    with open_memory(load_config(state_dir=state), start=False) as mem:
        mem.sync()
        for q in qs[:5]:
            mem.search(q)  # warm
        lat = []
        t0 = time.perf_counter()
        for i in range(n):
            s = time.perf_counter()
            mem.search(qs[i % len(qs)])
            lat.append(time.perf_counter() - s)
        wall = time.perf_counter() - t0
        provider = mem.status().get("provider")
    for agent in ("a1", "a2", "a3"):  # the same index for the other agents: no reindexing in the memory test
        shutil.copy(state / "memory" / "main.sqlite", state / "memory" / f"{agent}.sqlite")
    return {"p50": pct(lat, 50), "p95": pct(lat, 95), "rps": n / wall, "n": n, "provider": provider}


class Server:
    def __init__(self, state: Path) -> None:
        self.state = state
        env = {**os.environ, "SYMI_STATE_DIR": str(state)}
        self.proc = subprocess.Popen([sys.executable, "-m", "symi_memory.cli", "serve", "--port", "0"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                rec = json.loads((state / "serve.json").read_text())
                if rec.get("pid") == self.proc.pid:
                    self.port = int(rec["port"])
                    return
            except (OSError, ValueError):
                pass
            if self.proc.poll() is not None:
                raise SystemExit(f"serve exited: {self.proc.stderr.read() if self.proc.stderr else ''}")
            time.sleep(0.1)
        raise SystemExit("serve did not start in 300 s")

    def conn(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)

    def call(self, conn: http.client.HTTPConnection, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)


def drive(srv: Server, qs: list[str], clients: int, duration: float) -> dict[str, Any]:
    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + duration

    def worker(k: int) -> None:
        conn = srv.conn()
        i = k
        mine: list[float] = []
        while time.monotonic() < deadline:
            s = time.perf_counter()
            try:
                status, out = srv.call(conn, "POST", "/api/agents/main/search", {"query": qs[i % len(qs)]})
                if status != 200 or out.get("error"):
                    with lock:
                        errors.append(f"{status} {out.get('error')}")
            except (OSError, http.client.HTTPException) as exc:
                with lock:
                    errors.append(repr(exc))
                conn.close()
                conn = srv.conn()
            mine.append(time.perf_counter() - s)
            i += clients
        conn.close()
        with lock:
            lat.extend(mine)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"clients": clients, "n": len(lat), "p50": pct(lat, 50), "p95": pct(lat, 95), "rps": len(lat) / wall,
            "errors": len(errors), "firstError": errors[0] if errors else None}


def one_shot(state: Path, args: list[str], n: int) -> dict[str, Any]:
    env = {**os.environ, "SYMI_STATE_DIR": str(state)}
    exe = shutil.which("symi-memory", path=str(Path(sys.executable).parent)) or "symi-memory"
    lat = []
    for _ in range(n):
        cmd = [exe, *args] if args[:1] != ["-c"] else [sys.executable, *args]
        s = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        lat.append(time.perf_counter() - s)
        if proc.returncode != 0:
            raise SystemExit(f"{cmd} failed: {proc.stderr}")
    return {"p50": pct(lat, 50), "min": min(lat), "max": max(lat), "n": n}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per concurrency level (default 10)")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--provider", default="local", help="embedding provider (default local; hash needs the test plugin)")
    ap.add_argument("--in-process", type=int, default=200, help="in-process searches for the baseline")
    ap.add_argument("--one-shot", type=int, default=10, help="one-shot CLI calls through the server")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    qs = queries()
    out: dict[str, Any] = {"loadavg": os.getloadavg(), "cpus": os.cpu_count(), "duration": args.duration}
    with tempfile.TemporaryDirectory(prefix="symi-serve-bench-") as tmp:
        state = Path(tmp)
        write_config(state, args.provider)
        out["inProcess"] = base = in_process(state, qs, args.in_process)
        srv = Server(state)
        try:
            conn = srv.conn()
            srv.call(conn, "POST", "/api/agents/main/search", {"query": "warm up"})
            out["rssOneAgentMB"] = rss_mb(srv.proc.pid)
            out["load"] = [drive(srv, qs, int(c), args.duration) for c in args.clients.split(",")]
            out["oneShotServer"] = one_shot(state, ["search", qs[0], "--json"], args.one_shot)
            out["pythonStartup"] = one_shot(state, ["-c", "pass"], args.one_shot)
            conn.close()
            conn = srv.conn()  # the first one idled out during the load runs
            for agent in ("a1", "a2", "a3"):
                srv.call(conn, "POST", f"/api/agents/{agent}/search", {"query": "warm up"})
            _, st = srv.call(conn, "GET", "/api/agents/main/status")
            out["rssFourAgentsMB"] = rss_mb(srv.proc.pid)
            out["sharedModels"] = st["server"]["sharedModels"]
            out["openAgents"] = st["server"]["agents"]
            conn.close()
        finally:
            out["serverExit"] = srv.stop()
        out["oneShotInProcess"] = one_shot(state, ["search", qs[0], "--json", "--no-server"], max(2, args.one_shot // 3))
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    ms = lambda s: f"{s * 1000:7.1f}"  # noqa: E731
    print(f"devmem, provider {base['provider']}, {out['cpus']} CPUs, load average {out['loadavg'][0]:.1f}, "
          f"{args.duration:.0f} s per level")
    print(f"{'mode':34} {'p50 ms':>8} {'p95 ms':>8} {'req/s':>8} {'errors':>7}")
    print(f"{'in-process search (1 thread)':34} {ms(base['p50'])} {ms(base['p95'])} {base['rps']:8.1f} {0:7d}")
    for r in out["load"]:
        print(f"{'server, ' + str(r['clients']) + ' clients':34} {ms(r['p50'])} {ms(r['p95'])} {r['rps']:8.1f} "
              f"{r['errors']:7d}")
    print(f"{'one-shot CLI via server':34} {ms(out['oneShotServer']['p50'])} {'':8} {'':8}   (min {ms(out['oneShotServer']['min'])})")
    print(f"{'one-shot CLI --no-server':34} {ms(out['oneShotInProcess']['p50'])}")
    print(f"{'python -c pass':34} {ms(out['pythonStartup']['p50'])}")
    worst = max(r["p95"] for r in out["load"])
    print(f"p95 at {out['load'][-1]['clients']} clients / in-process p50: {out['load'][-1]['p95'] / base['p50']:.1f}x "
          f"(worst level {worst / base['p50']:.1f}x)")
    print(f"server RSS: {out['rssOneAgentMB']:.0f} MB with 1 agent, {out['rssFourAgentsMB']:.0f} MB with "
          f"{len(out['openAgents'])} agents; embedding models loaded: {out['sharedModels']['loaded']} "
          f"({', '.join(out['sharedModels']['models'])}) used by {out['sharedModels']['users']} agents")
    print(f"server exit code after SIGTERM: {out['serverExit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
