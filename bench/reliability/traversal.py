"""Traversal fuzz: memory_get must read memory files and nothing else, on every backend.

    python bench/reliability/traversal.py [--paths 10000] [--seed 14] [--backends builtin-sqlite,faiss,qmd-standin,qmd-real]

Builds a workspace whose allowed files hold ``ALLOWED`` and whose decoys
(``NOTES.md``, ``.git/x.md``, ``memory/.git/y.md``, files outside the
workspace, symlinks into them, exported session transcripts, a directory
named ``x.md``, a FIFO) each hold a unique ``DECOY-*`` line. Then it calls
the ``memory_get`` tool with generated paths (plain, ``qmd/<collection>/``,
absolute, ``~``, ``..`` chains, backslashes, NUL bytes, lone surrogates,
over-long names, percent-encoding, stray whitespace...) and counts:

- escapes: an answer whose text holds a decoy line;
- ignored-dir reads: an answer from ``memory/.git/`` or ``memory/node_modules/``
  (never indexed; refused since issue 14, counted apart because the spec's
  "anything under memory/" once allowed them on the builtin);
- non-``path required`` errors: an error other than the refusals the spec
  names (``path required``, ``invalid qmd path``, ``qmd path escapes
  collection``, ``unknown qmd collection: X``);
- tracebacks: log records carrying an exception.

``qmd-standin`` runs the qmd-sidecar backend with tests/qmd_standin/qmd as
its command, ``qmd-real`` with the real CLI when it is installed
(.ci/install-qmd.sh); memory_get does not call qmd, so both exercise the
plugin's path rules. Prints one line per backend.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from symi_memory import tools  # noqa: E402
from symi_memory.config import load_config  # noqa: E402
from symi_memory.manager import open_memory  # noqa: E402

REFUSALS = ("path required", "invalid qmd path", "qmd path escapes collection", "unknown qmd collection: ")


def build(root: Path) -> tuple[Path, Path, list[str], list[str]]:
    """The workspace, the extra dir, allowed relative paths, decoy relative paths."""
    ws = root / "ws"
    extra = root / "team-docs"
    outside = root / "outside"
    sessions = root / "state" / "agents" / "main" / "sessions"
    for d in (ws / "memory" / "sub", ws / ".git", ws / "memory" / ".git", ws / "memory" / "node_modules",
              ws / "docs", extra, outside, sessions, ws / "memory" / "dir.md"):
        d.mkdir(parents=True, exist_ok=True)

    def put(p: Path, text: str) -> None:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n", encoding="utf-8")

    allowed = {"MEMORY.md": ws / "MEMORY.md", "memory.md": ws / "memory.md",
               "memory/2026-01-01.md": ws / "memory" / "2026-01-01.md",
               "memory/sub/deep.md": ws / "memory" / "sub" / "deep.md",
               "../team-docs/x.md": extra / "x.md"}
    for rel, p in allowed.items():
        put(p, f"ALLOWED {rel}")
    decoys = {"NOTES.md": ws / "NOTES.md", ".git/x.md": ws / ".git" / "x.md",
              "memory/.git/y.md": ws / "memory" / ".git" / "y.md",
              "memory/node_modules/z.md": ws / "memory" / "node_modules" / "z.md",
              "docs/d.md": ws / "docs" / "d.md", "../outside/secret.md": outside / "secret.md",
              "../outside/passwd": outside / "passwd", "memory/notes.txt": ws / "memory" / "notes.txt",
              "sessions.md": ws / "sessions.md"}
    for rel, p in decoys.items():
        # Files in directories the walker ignores are never indexed; reading them counts apart.
        put(p, f"IGNORED-{rel}" if "/.git/" in rel or "node_modules" in rel else f"DECOY-{rel}")
    put(sessions / "abc.jsonl", '{"type":"message","message":{"role":"user","content":"DECOY-transcript"}}')
    export = root / "state" / "agents" / "main" / "qmd" / "sessions"
    put(export / "abc.md", "User: DECOY-exported-transcript")
    os.symlink(outside / "secret.md", ws / "memory" / "link.md")
    os.symlink(outside, ws / "memory" / "linkdir")
    os.symlink(ws / "NOTES.md", ws / "memory" / "notes-link.md")
    os.symlink("loop.md", ws / "memory" / "loop.md")
    os.mkfifo(ws / "memory" / "fifo.md")
    extra_decoys = ["memory/link.md", "memory/linkdir/secret.md", "memory/notes-link.md", "memory/loop.md",
                    "memory/fifo.md", "memory/dir.md"]
    return ws, extra, list(allowed), [*decoys, *extra_decoys]


def generate(n: int, rng: random.Random, ws: Path, allowed: list[str], decoys: list[str]) -> list[str]:
    collections = ["memory-root-main", "memory-alt-main", "memory-dir-main", "sessions-main", "team-docs", "nope"]
    prefixes = ["", "./", "memory/", "memory/../", "memory/sub/../../", "../", "../../", "ws/", str(ws) + "/",
                "~/", "/", "//", "memory//", "memory/./", ".\\", "memory\\..\\", "qmd/", "qmd//", "qmd/../"]
    prefixes += [f"qmd/{c}/" for c in collections] + [f"qmd/{c}/../" for c in collections]
    prefixes += [f"qmd/{c}/../../" for c in collections] + [f"qmd/{c}/.git/" for c in collections[:3]]
    targets = [*allowed, *decoys, "abc.md", "abc.jsonl", "sessions/abc.jsonl", "agents/main/sessions/abc.jsonl",
               "etc/passwd", "../../../../etc/passwd", "MEMORY.md/", "memory", "memory/", ".", "..", "",
               "x.md", "2026-01-01.md", "sub/deep.md", "secret.md", ".git/config", "NOTES.MD", "memory.MD"]
    mutations = [
        lambda s: s, lambda s: s, lambda s: s,
        lambda s: " " + s + " ", lambda s: s + "\x00", lambda s: s.replace(".md", "\x00.md"),
        lambda s: s + "\ud800", lambda s: "\udcff" + s, lambda s: s.replace("/", "\\"),
        lambda s: s.replace("/", "//"), lambda s: s.replace("..", "%2e%2e"), lambda s: s.replace(".", "\u2024"),
        lambda s: s + "/", lambda s: s + "/.", lambda s: s + "/x.md", lambda s: "a" * 300 + s,
        lambda s: s.replace(".md", "a" * 300 + ".md"), lambda s: "d/" * 2500 + s, lambda s: s.upper(),
        lambda s: s + "\n", lambda s: s.replace("memory", "Memory"), lambda s: "./" * 50 + s,
        lambda s: s.replace(".md", ".md.md"), lambda s: s + "#x", lambda s: s + "?x=1",
    ]
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        path = rng.choice(mutations)(rng.choice(prefixes) + rng.choice(targets))
        if rng.random() < 0.1:
            path = rng.choice(mutations)(path)
        if path not in seen:
            seen.add(path)
            out.append(path)
    return out


class _Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.count += 1


def open_backend(name: str, root: Path, ws: Path, extra: Path):
    ms = {"provider": "none", "extraPaths": [str(extra)]}
    over: dict = {"agents": {"defaults": {"memorySearch": ms}}}
    if name in ("builtin-sqlite", "faiss"):
        over["plugins"] = {"slots": {"memory": name}}
    else:
        from qmd_standin.helpers import real_qmd, standin_command

        command = standin_command() if name == "qmd-standin" else real_qmd()
        if command is None:
            return None
        over["plugins"] = {"slots": {"memory": "qmd-sidecar"}}
        over["memory"] = {"qmd": {"command": command, "sessions": {"enabled": True},
                                  "paths": [{"path": str(extra), "name": "team-docs"}]}}
    cfg = load_config(None, state_dir=root / "state", overrides=over)
    return open_memory(cfg, workspace=ws, start=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--backends", default="builtin-sqlite,faiss,qmd-standin,qmd-real")
    ap.add_argument("--show", type=int, default=5)
    args = ap.parse_args()
    handler = _Tracebacks()
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.DEBUG)
    for noisy in ("httpx", "httpcore", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ws, extra, allowed, decoys = build(root)
        paths = generate(args.paths, random.Random(args.seed), ws, allowed, decoys)
        print(f"traversal fuzz: {len(paths)} distinct paths (seed {args.seed}), {len(decoys) + 2} decoys")
        for backend in args.backends.split(","):
            mem = open_backend(backend, root, ws, extra)
            if mem is None:
                print(f"  {backend:15s} skipped (not installed)")
                continue
            handler.count = 0
            escapes: list[str] = []
            ignored: list[str] = []
            odd: list[str] = []
            reads = 0
            started = time.perf_counter()
            try:
                ok_reads = sum(tools.memory_get(mem, {"path": a}).get("text", "").startswith("ALLOWED")
                               for a in allowed)
                for path in paths:
                    out = tools.memory_get(mem, {"path": path})
                    if "error" in out:
                        if not any(out["error"] == r or (r.endswith(": ") and out["error"].startswith(r))
                                   for r in REFUSALS):
                            odd.append(f"{path[:60]!r}: {out['error'][:100]}")
                        continue
                    reads += 1
                    if "DECOY" in out["text"]:
                        escapes.append(f"{path[:80]!r} -> {out['text'].strip()[:60]}")
                    elif "IGNORED" in out["text"]:
                        ignored.append(f"{path[:80]!r} -> {out['text'].strip()[:60]}")
            finally:
                mem.close()
            secs = time.perf_counter() - started
            print(f"  {backend:15s} escapes {len(escapes)}, ignored-dir reads {len(ignored)}, "
                  f"non-path-required errors {len(odd)}, "
                  f"tracebacks {handler.count}, reads {reads}, allowed files readable {ok_reads}/{len(allowed)}, "
                  f"{secs:.1f}s")
            for line in (escapes[: args.show] + odd[: args.show]):
                print("     ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
