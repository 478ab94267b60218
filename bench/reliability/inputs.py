"""Bad files and provider faults: one bad input must not stop memory.

    python bench/reliability/inputs.py [--timeout-ms 60000] [--skip-faults]

**Bad files.** One workspace of good notes plus, one kind at a time, a bad
input: a file name that is not UTF-8, a malformed transcript line (with
``sources = ["memory", "sessions"]``), a path deeper than PATH_MAX, an
unreadable file, binary bytes, a NUL-filled file, a FIFO named ``.md``, a
symlink loop, a file over ``maxFileBytes``. For each kind it syncs once
through the library and counts it as *stopping a sync* when the sync
raises, or when a good probe note is then not found.

**Provider faults.** An OpenAI-compatible loopback server that hangs,
answers 500, answers malformed JSON, or returns vectors of varying
dimensions. For each fault: the time a search takes, whether it answers,
and what ``status`` says after a sync.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("SYMI_MEMORY_TESTING", "1")  # older versions register the test fakes only with this

from support.loopback_http import LoopbackServer, Recorded, Reply  # noqa: E402

from symi_memory.config import load_config  # noqa: E402
from symi_memory.manager import open_memory  # noqa: E402
from symi_memory.testing import plugin as testing_plugin  # noqa: E402  (the deterministic `hash` provider)

PROBE = ("okapi enclosure zone four", "memory/good.md")


def good_workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- Prefers tea.\n", encoding="utf-8")
    (ws / "memory" / "good.md").write_text("# Zoo\n\nThe okapi enclosure is in zone four.\n", encoding="utf-8")
    return ws


def bad_inputs(ws: Path, state: Path) -> dict:
    def non_utf8() -> None:
        fd = os.open(os.fsencode(ws / "memory") + b"/caf\xe9.md", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"# Cafe\n\nnotes\n")
        os.close(fd)

    def transcript() -> None:
        d = state / "agents" / "main" / "sessions"
        d.mkdir(parents=True, exist_ok=True)
        (d / "s1.jsonl").write_text('{"type":"message","message":{"role":["user"],"content":"x"}}\n'
                                    '{"type":"message","message":{"role":"user","content":"hello okapi"}}\n',
                                    encoding="utf-8")

    def deep() -> None:
        d = os.fsencode(ws / "memory")
        fd = os.open(d, os.O_RDONLY)
        try:
            for _ in range(int(5000 / 101)):
                os.mkdir(b"d" * 100, dir_fd=fd)
                nfd = os.open(b"d" * 100, os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = nfd
            wfd = os.open(b"deep.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(wfd, b"# Deep\n\ndeep note\n")
            os.close(wfd)
        finally:
            os.close(fd)

    def unreadable() -> None:
        p = ws / "memory" / "locked.md"
        p.write_text("# Locked\n", encoding="utf-8")
        p.chmod(0)

    def fifo() -> None:
        os.mkfifo(ws / "memory" / "pipe.md")

    def loop() -> None:
        os.symlink("loop.md", ws / "memory" / "loop.md")

    return {
        "file name not UTF-8": (non_utf8, {}),
        "malformed transcript line": (transcript, {"sources": ["memory", "sessions"],
                                                   "experimental": {"sessionMemory": True}}),
        "path deeper than PATH_MAX": (deep, {}),
        "unreadable file" + (" (root reads it)" if os.geteuid() == 0 else ""): (unreadable, {}),
        "binary bytes": (lambda: (ws / "memory" / "bin.md").write_bytes(os.urandom(4096)), {}),
        "NUL-filled file": (lambda: (ws / "memory" / "nul.md").write_bytes(b"\x00" * 10000), {}),
        "FIFO named .md": (fifo, {}),
        "symlink loop": (loop, {}),
        "file over maxFileBytes": (lambda: (ws / "memory" / "big.md").write_text("x " * 600_000), {}),
        "invalid UTF-8 content": (lambda: (ws / "memory" / "latin1.md").write_bytes(b"caf\xe9 \xff\xfe note\n"), {}),
    }


def run_bad_files() -> None:
    stopped = []
    rows = []
    names = list(bad_inputs(Path("/nonexistent"), Path("/nonexistent")))
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            ws = good_workspace(root)
            make, extra = bad_inputs(ws, root / "state")[name]
            ms = {"provider": "hash", "query": {"minScore": 0}, "sync": {"maxFileBytes": 1_000_000}, **extra}
            try:
                make()
                cfg = load_config(None, state_dir=root / "state",
                                  overrides={"agents": {"defaults": {"memorySearch": ms}}},
                                  extra_defaults={})
            except Exception as exc:  # a config key this version does not know
                rows.append(f"  {name:28s} not run ({type(exc).__name__}: {str(exc)[:80]})")
                continue
            outcome = "ok"
            try:
                with open_memory(cfg, workspace=ws, start=False, plugins=[("testing", testing_plugin)]) as mem:
                    report = mem.sync()
                    hits = [h.path for h in mem.search(PROBE[0]).results]
                    st = mem.status()
                    if PROBE[1] not in hits:
                        outcome = "STOPPED (probe not found)"
                    skipped = st.get("skipped") or []
                    detail = f"files {st.get('files')}, errors {len(report.errors)}, skipped {len(skipped)}"
            except Exception as exc:
                outcome = f"STOPPED ({type(exc).__name__}: {str(exc)[:60]})"
                detail = traceback.format_exc().strip().splitlines()[-1][:80]
            finally:
                for p in (ws / "memory").glob("*.md"):
                    if p.exists() and not p.is_symlink():
                        p.chmod(0o644)
            if outcome != "ok":
                stopped.append(name)
            rows.append(f"  {name:28s} {outcome}; {detail}")
    print(f"bad files: {len(names)} kinds, {len(stopped)} stop a sync" + (f" ({', '.join(stopped)})" if stopped else ""))
    print("\n".join(rows))


def run_provider_faults(timeout_ms: int) -> None:
    def vectors(dims_of):
        def reply(req: Recorded) -> Reply:
            n = len(req.json()["input"])
            return Reply(json={"data": [{"index": i, "embedding": [0.1] * dims_of(i)} for i in range(n)]})
        return reply

    faults = {
        "hung (no answer)": Reply(status=200, json={"data": []}, delay=timeout_ms / 1000 + 5),
        "HTTP 500": Reply(status=500, body="internal error"),
        "malformed JSON": Reply(status=200, body="{not json"),
        "varying dimensions": vectors(lambda i: 3 if i % 2 else 4),
    }
    print(f"provider faults (remote.timeoutMs = {timeout_ms}):")
    for name, reply in faults.items():
        with tempfile.TemporaryDirectory() as tmp, LoopbackServer() as server:
            root = Path(tmp)
            ws = good_workspace(root)
            for i in range(20):
                (ws / "memory" / f"n{i}.md").write_text(f"# N{i}\n\nnote {i} about giraffes\n", encoding="utf-8")
            server.add("POST", "/v1/embeddings", reply)
            ms = {"provider": "openai", "remote": {"baseUrl": server.url + "/v1", "apiKey": "k",
                                                   "timeoutMs": timeout_ms}, "query": {"minScore": 0}}
            cfg = load_config(None, state_dir=root / "state", overrides={"agents": {"defaults": {"memorySearch": ms}}})
            with open_memory(cfg, workspace=ws, start=False) as mem:
                t0 = time.perf_counter()
                try:
                    report = mem.sync()
                    sync_note = f"sync {time.perf_counter() - t0:.1f}s, errors {len(report.errors)}"
                except Exception as exc:
                    sync_note = f"sync raised {type(exc).__name__}"
                t0 = time.perf_counter()
                try:
                    resp = mem.search(PROBE[0])
                    found = PROBE[1] in [h.path for h in resp.results]
                    search_note = f"search {time.perf_counter() - t0:.1f}s ({resp.mode}, probe found: {found})"
                except Exception as exc:
                    search_note = f"search raised {type(exc).__name__}"
                st = mem.status()
                print(f"  {name:20s} {sync_note}; {search_note}; status dirty={st.get('dirty')} "
                      f"lastError={'set' if st.get('lastError') else 'none'} chunks={st.get('chunks')} "
                      f"dims={(st.get('vector') or {}).get('dims')}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timeout-ms", type=int, default=60_000, help="remote.timeoutMs (60000 is the default)")
    ap.add_argument("--skip-faults", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    run_bad_files()
    if not args.skip_faults:
        run_provider_faults(args.timeout_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
