"""Sentinel secrets: API keys, header values and URL credentials must never leak.

    python bench/reliability/secrets.py

Puts distinct sentinels in ``remote.apiKey``, ``remote.headers``
(Authorization-like names and odd ones: ``X-Custom-Auth``,
``Ocp-Apim-Subscription-Key``), ``models.providers.openai.headers``,
``query.rerank.headers`` and ``baseUrl`` (``http://u:PASS@host/v1?api-key=K``),
points them at a loopback server that echoes every request header and the
query string back in its error bodies (400, 401, 500, malformed JSON), and
counts sentinel occurrences in: exceptions and ``lastError``, tool output
(``memory_search``), every log record (DEBUG and up, httpx included), the
CLI's stdout/stderr (``-v`` ``index``, ``search``, ``status``, ``config
show``) and the bytes of the index files (main, WAL, SHM). Prints one count
per place; the target is 0 everywhere.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.loopback_http import LoopbackServer, Recorded, Reply  # noqa: E402

from symi_memory import tools  # noqa: E402
from symi_memory.config import load_config  # noqa: E402
from symi_memory.manager import open_memory  # noqa: E402

SENTINELS = {
    "apiKey": "sk-SNTL-apikey-a1",
    "header X-Custom-Auth": "SNTL-custom-auth-b2",
    "header Ocp-Apim-Subscription-Key": "SNTL-subscription-c3",
    "models.providers header": "SNTL-provider-header-d4",
    "rerank Authorization header": "SNTL-rerank-bearer-e5",
    "baseUrl password": "SNTL-url-password-f6",
    "baseUrl query api-key": "SNTL-url-query-g7",
}


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def echo(status: int, malformed: bool = False):
    def reply(req: Recorded) -> Reply:
        body = json.dumps({"error": "nope", "headers": req.headers, "query": req.query})
        return Reply(status=status, body=body[:-1] if malformed else body)

    return reply


def embeddings(req: Recorded) -> Reply:
    n = len(req.json()["input"])
    return Reply(json={"data": [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3]} for i in range(n)]})


def config(server: LoopbackServer) -> dict:
    host = server.url.removeprefix("http://")
    s = SENTINELS
    return {
        "agents": {"defaults": {"memorySearch": {
            "provider": "openai",
            "remote": {"baseUrl": f"http://svc:{s['baseUrl password']}@{host}/v1?api-key={s['baseUrl query api-key']}"
                                  "&api-version=2024-02-01",
                       "apiKey": s["apiKey"], "timeoutMs": 3000,
                       "headers": {"X-Custom-Auth": s["header X-Custom-Auth"],
                                   "Ocp-Apim-Subscription-Key": s["header Ocp-Apim-Subscription-Key"]}},
            "query": {"rerank": {"provider": "cohere", "apiKey": s["apiKey"], "baseUrl": f"{server.url}/v1",
                                 "headers": {"Authorization": f"Bearer {s['rerank Authorization header']}"}}},
        }}},
        "models": {"providers": {"openai": {"headers": {"X-Tenant-Token": s["models.providers header"]}}}},
    }


def count(text: str) -> Counter[str]:
    return Counter({name: text.count(value) for name, value in SENTINELS.items() if value in text})


def main() -> int:
    found: dict[str, Counter[str]] = {}
    handler = Collect()
    root_log = logging.getLogger()
    root_log.addHandler(handler)
    root_log.setLevel(logging.DEBUG)
    with tempfile.TemporaryDirectory() as tmp, LoopbackServer() as server:
        root = Path(tmp)
        ws = root / "ws"
        (ws / "memory").mkdir(parents=True)
        for i in range(6):
            (ws / "memory" / f"2026-01-0{i + 1}.md").write_text(f"okapi planning note {i}\n" * 30, encoding="utf-8")
        cfg_data = config(server)
        cfg_file = root / "symi.json"
        cfg_file.write_text(json.dumps(cfg_data), encoding="utf-8")
        outputs: list[str] = []
        server.add("POST", "/v1/embeddings", embeddings)
        server.add("POST", "/v1/rerank", echo(401))
        cfg = load_config(None, state_dir=root / "state", overrides=cfg_data)
        with open_memory(cfg, workspace=ws, start=False) as mem:
            mem.sync()
            outputs.append(json.dumps(tools.memory_search(mem, {"query": "okapi planning"})))
            for i, reply in enumerate((echo(400), echo(500), echo(200, malformed=True), echo(401))):
                server.add("POST", "/v1/embeddings", reply)
                (ws / "memory" / f"new-{i}.md").write_text(f"new okapi {i}\n", encoding="utf-8")
                mem.sync()
                outputs.append(json.dumps(tools.memory_search(mem, {"query": f"okapi {i}"})))
                outputs.append(json.dumps(mem.status()))
        found["tool output and status"] = count("\n".join(outputs))
        env = {**os.environ, "SYMI_STATE_DIR": str(root / "state2")}
        cli_out = []
        for args in (("-v", "index"), ("-v", "search", "okapi"), ("status", "--json"), ("config", "show"),
                     ("config", "show", "--json"),
                     ("config", "get", "agents.defaults.memorySearch.remote.headers.X-Custom-Auth"),
                     ("config", "get", "agents.defaults.memorySearch.remote.baseUrl")):
            proc = subprocess.run([sys.executable, "-m", "symi_memory.cli", "--config", str(cfg_file), "--workspace",
                                   str(ws), *args], capture_output=True, text=True, env=env, timeout=300)
            cli_out.append(proc.stdout + proc.stderr)
        found["CLI stdout/stderr"] = count("\n".join(cli_out))
        found["log records"] = count("\n".join(handler.lines))
        db_bytes = Counter()
        for state in ("state", "state2"):
            for f in (root / state).rglob("*"):
                if f.is_file():
                    data = f.read_bytes()
                    for name, value in SENTINELS.items():
                        db_bytes[name] += data.count(value.encode())
        found["index and state files (db, WAL, SHM)"] = +db_bytes
        requests = len(server.requests)
    total = sum(sum(c.values()) for c in found.values())
    print(f"sentinel secrets: {len(SENTINELS)} sentinels, {requests} requests to an echoing server")
    for place, c in found.items():
        detail = ", ".join(f"{k} x{v}" for k, v in c.items()) or "-"
        print(f"  {place:40s} {sum(c.values()):4d}  {detail}")
    print(f"  {'total leak occurrences':40s} {total:4d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
