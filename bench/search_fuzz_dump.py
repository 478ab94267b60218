"""Every response of random searches on a small random workspace, with writes between them, to compare checkouts.

A seed makes the workspace (45-140 notes over a vocabulary of word families with stems and diacritics, identifiers,
CJK runs; some forms of each family present, some absent), the provider (none or the testing ``hash`` one) and a
run of rounds: a few random queries (absent words, stop words, quotes, NEAR(...), column filters, prefixes,
upper case), each answered as configured, in the ranking view and as the backend's candidates; then a write (an edit
adding a word asked for earlier, a new note, a deletion or a touch) synced by this memory, another one in this
process or (``FUZZ_XPROC=1``) another process. File mtimes are set from a clock, so two checkouts write the same
bytes. ``FORCE_JSON=1`` binds key lists as JSON arrays instead of ``carray``; ``FUZZ_LOCAL=1`` uses the local
provider with local synonyms. Run one seed with each checkout's interpreter and ``cmp`` the files:

    python bench/search_fuzz_dump.py SEED OUT WORKDIR [ROUNDS]
"""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
from pathlib import Path

os.environ.setdefault("SYMI_MEMORY_TESTING", "1")
os.environ["SYMI_MEMORY_PLUGINS"] = "symi_memory.testing.plugin"
import attrs  # noqa: E402

from symi_memory import load_config, open_memory  # noqa: E402
from symi_memory.types import SearchQuery  # noqa: E402

if os.environ.get("FORCE_JSON"):
    from symi_memory.index import chunks as _chunks
    _chunks.CARRAY = False
    _chunks._LISTED = "SELECT value FROM json_each(?)"
    _chunks._LISTED_TABLE = "json_each(?)"  # the list as a table (candidate rows join it)
    assert _chunks.listed().endswith("json_each(?)")

FAMILIES = [
    ["run", "running", "runs", "runner", "ran"],
    ["connect", "connection", "connected", "connecting", "connectivity"],
    ["plumb", "plumbing", "plumber", "plumbers"],
    ["flight", "flights", "flying", "fly", "flies"],
    ["generate", "generation", "generator", "generating", "general"],
    ["café", "cafe", "cafés", "naïve", "naive", "résumé", "resume"],
    ["index", "indexes", "indices", "indexing", "indexed"],
]
IDENTS = ["ERR_4411", "err_4411", "snake_case_name", "foo.bar", "v1.2.3", "c0ffee42", "HTTP2", "API", "x86_64",
          "build_id", "42", "2026", "a1b2c3d4", "PORT_8080", "__init__"]
CJK = ["金银价格", "价格上涨", "東京", "금융", "上", "涨", "データベース", "价格"]
PLAIN = ("kitchen sink tap leak garden tomato basil lunch marta friday parser commit flaky test merged deploy server "
         "backup disk quota memory search vector keyword ranking snippet heading chunk note alpha beta gamma delta "
         "zebra okapi lynx river mountain coffee tea budget invoice meeting travel hotel train ticket").split()
STOP = ["the", "what", "is", "a", "of", "about", "how", "when", "did", "we"]
ABSENT = ["zqxv", "qqqq", "frobnicated", "nonexistentword", "xylophones", "ERR_9999", "quuxing", "wibbly"]


def rand_words(rng: random.Random, vocab: list[str], k: int) -> str:
    return " ".join(rng.choice(vocab) for _ in range(k))


def make_vocab(rng: random.Random) -> list[str]:
    v = list(PLAIN)
    for fam in FAMILIES:
        v += rng.sample(fam, rng.randint(0, len(fam)))  # some forms present, some not
    v += rng.sample(IDENTS, rng.randint(2, 8))
    v += rng.sample(CJK, rng.randint(0, 4))
    return v


def note(rng: random.Random, vocab: list[str], i: int) -> str:
    lines = [f"# Note {i} {rng.choice(vocab)}", ""]
    for _ in range(rng.randint(1, 6)):
        lines.append("- " + rand_words(rng, vocab + STOP, rng.randint(2, 14)))
    return "\n".join(lines) + "\n"


def query(rng: random.Random, vocab: list[str], pending: list[str]) -> str:
    pool = vocab + [w for fam in FAMILIES for w in fam] + IDENTS + CJK + ABSENT + STOP + pending
    k = rng.choice([1, 2, 2, 3, 3, 4, 5, 7])
    words = [rng.choice(pool) for _ in range(k)]
    r = rng.random()
    if r < 0.08:
        return '"' + " ".join(words) + '"'
    if r < 0.12:
        return "NEAR(" + " ".join(words) + ")"
    if r < 0.16:
        return "text:" + " ".join(words)
    if r < 0.2:
        return " ".join(w + "*" for w in words)
    if r < 0.24:
        return " ".join(w.upper() for w in words)
    if r < 0.27:
        return "-".join(words) + "?"
    return " ".join(words)


def main() -> int:
    seed, out, root = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    rng = random.Random(seed)
    shutil.rmtree(root, ignore_errors=True)
    ws, state = root / "ws", root / "state"
    (ws / "memory").mkdir(parents=True)
    vocab = make_vocab(rng)
    n = rng.randint(45, 140)
    clock = [1_700_000_000.0]

    def write(rel: str, text: str) -> None:
        p = ws / rel
        p.write_text(text, encoding="utf-8")
        clock[0] += 10
        os.utime(p, (clock[0], clock[0]))

    for i in range(n):
        write(f"memory/n{i}.md", note(rng, vocab, i))
    provider = rng.choice(["none", "none", "hash"])
    ms = {"provider": provider}
    if os.environ.get("FUZZ_LOCAL"):
        provider = "local"
        ms = {"provider": "local", "query": {"hybrid": {"synonyms": {"enabled": True}}}}
    ov = {"agents": {"defaults": {"memorySearch": ms}}}
    cfg = load_config(None, state_dir=state, overrides=ov)
    plugins = None
    mem = open_memory(cfg, workspace=ws, start=False, plugins=plugins)
    pending: list[str] = []  # words the workspace will get later (asked before they exist)
    with out.open("w", encoding="utf-8") as f, mem:
        mem.sync()
        if os.environ.get("FUZZ_LOCAL"):
            import time
            for _ in range(300):
                st = mem.status()
                syn = (st.get("custom") or {}).get("synonyms") or st.get("synonyms") or {}
                if syn.get("active"):
                    break
                time.sleep(0.1)
        f.write(json.dumps({"seed": seed, "n": n, "provider": provider, "mode": mem.status().get("provider")}) + "\n")
        for r in range(rounds):
            for _ in range(rng.randint(1, 6)):
                q = query(rng, vocab, pending)
                mr = rng.choice([1, 3, 10])
                try:
                    configured = mem.search(q, max_results=mr).to_dict()
                    ranking = mem.search(q, max_results=mr, min_score=0).to_dict()
                    got = mem.backend.search(SearchQuery(text=q, max_results=mr, min_score=0.0, candidate_limit=40))
                    rec = {"q": q, "default": configured, "ranking": ranking, "mode": got.mode,
                           "backend": [attrs.asdict(c) for c in got.candidates]}
                except Exception as exc:  # noqa: BLE001
                    rec = {"q": q, "error": repr(exc)}
                f.write(json.dumps(rec, sort_keys=True, default=repr, ensure_ascii=False) + "\n")
            op = rng.random()
            if op < 0.35:  # edit: maybe add a word asked for before
                i = rng.randrange(n)
                extra = rng.choice(ABSENT + [w for fam in FAMILIES for w in fam] + IDENTS + CJK)
                pending.append(extra)
                write(f"memory/n{i}.md", note(rng, vocab, i) + f"- {extra} {rng.choice(vocab)}\n")
            elif op < 0.45:
                i = rng.randrange(n)
                p = ws / f"memory/n{i}.md"
                if p.exists():
                    p.unlink()
            elif op < 0.6:
                i = n
                n += 1
                write(f"memory/n{i}.md", note(rng, vocab + ABSENT[:3], i))
            elif op < 0.7:
                i = rng.randrange(n)
                p = ws / f"memory/n{i}.md"
                if p.exists():
                    clock[0] += 10
                    os.utime(p, (clock[0], clock[0]))
            else:
                continue  # no write: warm caches
            pick = rng.random()
            if os.environ.get("FUZZ_XPROC") and pick < 0.35:  # another process syncs
                import subprocess
                code = ("import os,sys; os.environ['SYMI_MEMORY_TESTING']='1'; "
                        "os.environ['SYMI_MEMORY_PLUGINS']='symi_memory.testing.plugin'; "
                        "from symi_memory import load_config, open_memory; from pathlib import Path; "
                        f"cfg = load_config(None, state_dir=Path({str(state)!r}), overrides={ov!r}); "
                        f"m = open_memory(cfg, workspace=Path({str(ws)!r}), start=False); m.sync(); m.close()")
                subprocess.run([sys.executable, "-c", code], check=True)
            elif pick < 0.3:  # another connection of this process writes
                other = open_memory(cfg, workspace=ws, start=False, plugins=plugins)
                with other:
                    other.sync()
            else:
                mem.sync()
            f.write(json.dumps({"synced": r}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
