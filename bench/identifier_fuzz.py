"""Differential fuzz of identifier matching: every response of generated queries on a generated workspace.

A workspace of notes full of identifier-like tokens and near misses (porter's ``q123s``, ``ERR_42`` beside
``ERR 42``, ``x86_64``, ALLCAPS words, words ending in s/ed/ing, apostrophes, Latin diacritics, full-width and
ligature letters, kana, Hangul, emoji, CJK punctuation, ASCII identifiers in non-ASCII notes, a line longer than
FTS5's token cap), made from a seed; queries of one to four such tokens. Each query is asked in two phases (the
sync, then a few files rewritten, appended to or deleted, with fixed mtimes, and a sync) and two rounds each (term
counts read from FTS5 first, then from the kept term strings): the configured response, the ranking view and the
backend's candidates with every field, one JSON line each. Run it with each checkout's interpreter and ``cmp``:

    python bench/identifier_fuzz.py SEED QUERIES none|hash OUT [--break nostem|asciionly]
        [--rrf] [--synonyms] [--analyze] [--ascii]

``hash`` is the test fakes' embedder (hybrid mode); ``--break`` swaps in a deliberately wrong identifier rule
(porter left out; non-ASCII texts ruled out too) to show the comparison catches one. ``--analyze`` gathers SQLite
statistics (``ANALYZE``: sqlite_stat1 and sqlite_stat4) after each sync, as a user's tool might. ``--ascii``: every
note ASCII (most candidates are then told apart by their term counts). ``--rrf``: reciprocal rank fusion.
``--synonyms``: the local provider with local synonyms on (the provider argument is then ignored).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

IDENTS = ["q123", "q123s", "Q123", "Q123S", "runs_2", "run_2", "ERR_42", "err_42", "ERR", "42", "v1", "2", "3",
          "v1_2_3", "C", "foo", "bar_baz", "foo_bar_baz", "x86_64", "x86", "64", "IPv6", "ipv6s", "IPV6", "NASA",
          "NASAS", "nasa", "NASA_1", "DEPLOY_TOKEN", "deploy_tokens", "DEPLOY_TOKENS", "c12w3", "c12w3ed",
          "c12w3ing", "c12w3s", "running_4", "tested_5", "testing_5", "test_5", "O", "Brien_7", "don", "t",
          "café_1", "cafe_1", "CAFÉ_1", "naïve_2", "naive_2", "ÜBER", "UBER", "Straße_1", "STRASSE", "strasse_1",
          "ﬁle_1", "file_1", "ＥＲＲ＿４２", "１２３", "q１２３", "テスト_1", "テスト", "ｶﾀｶﾅ_9", "한국어_1", "한국어",
          "🚀_1", "x²_1", "x2_1", "\u212a9_x", "k9_x", "K9_X", "İSTANBUL_1", "istanbul_1", "ABC", "abc1", "1abc",
          "2024", "123456", "0x1f", "0X1F", "e81f0b9", "E81F0B9", "a" * 70 + "_1", "b" * 66 + "s", "b" * 66,
          "id_", "_id", "__x1", "___", "HTTP2", "http2s", "API_KEY", "api_keys", "JSON", "JSONS", "jsons",
          "ALL", "alls", "THE", "ING", "SES", "connected_9", "connect_9", "connection_9", "agreed_3", "agree_3",
          "caresses_1", "caress_1", "ponies_2", "poni_2", "ÀB_1", "AB_1", "ǅ_1", "dž_1", "ß_1", "ss_1", "ſ_1",
          "Ω_1", "ω_1", "ΑΒΓ", "αβγ", "Ÿ_1", "ÿ_1", "ØRE_1", "ore_1", "mañana_1", "manana_1", "ﬀ_2", "ff_2",
          "金银价格", "金银", "価格_3", "q123ed", "q123ing", "run2", "runs2", "RUNS2"]
WORDS = ["deploy", "runs", "running", "tested", "notes", "the", "error", "meeting", "flight", "flights", "alpha",
         "beta", "is", "and", "ticket", "version", "server", "memory", "日本語", "中文", "テスト", "ok", "é", "naïve"]
SEPS = [" ", " ", " ", "_", "-", ".", ",", "(", ")", "\n", "'", "\u2019", "/", ":", "#", "+", "++", "。", "、",
        "「", "」", "\u3000", "・", "\t", "!", "?", "$", "@", "=", "\u00a0", "—", "\u200b", "*", "`", "[", "]"]


ASCII_TOKENS = [t for t in IDENTS + WORDS if t.isascii()]


def token(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.55:
        t = rng.choice(IDENTS)
    elif r < 0.85:
        t = rng.choice(WORDS)
    else:  # near miss: an identifier with a letter/digit glued on, or a case change
        t = rng.choice(IDENTS)
        t = rng.choice([t + rng.choice("xs1e"), rng.choice("xa9") + t, t.upper(), t.lower(), t.title(), t + "s",
                        t + "ed", t + "ing", t.replace("_", " "), t.replace("_", "-"),
                        # the token as written glued to a letter, then in another case on its own
                        "x" + t.lower() + " " + t.upper(), t.lower() + t.upper() + " " + t.title(),
                        "".join(c.upper() if i % 2 else c for i, c in enumerate(t))])
    return t


def line(rng: random.Random, ascii_only: bool) -> str:
    parts = []
    for _ in range(rng.randrange(1, 14)):
        t = token(rng)
        if ascii_only and not t.isascii():
            t = rng.choice(ASCII_TOKENS)
        parts.append(t)
        s = rng.choice(SEPS)
        if ascii_only and not s.isascii():
            s = " "
        parts.append(s)
    return "".join(parts).strip("\n") or "empty"




def build(seed: int, n_queries: int, out: Path, ascii_share: float = 0.6) -> dict[str, Any]:
    rng = random.Random(seed)
    ws = out / "ws"
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    files = {}
    for i in range(rng.randrange(30, 70)):
        ascii_only = rng.random() < ascii_share
        n = rng.choice([1, 2, 3, 5, 8, 40, 120])
        body = "\n".join(line(rng, ascii_only) for _ in range(n))
        if rng.random() < 0.3:
            body = f"# Note {i}\n\n" + body
        files[f"memory/n{i}.md"] = body + "\n"
    if rng.random() < 0.25:  # a chunk longer than FTS5's token cap, ascii, with identifiers after a huge token
        files["memory/long.md"] = "zz " + "z" * rng.choice([33000, 40000]) + " ERR_42 q123 NASA x86_64\n"
    if rng.random() < 0.25:
        files["memory/longtok.md"] = "zz " + ("q123" * 9000) + " q123\n"
    files["MEMORY.md"] = "deploy " + line(rng, False) + "\n"
    for rel, text in files.items():
        (ws / rel).write_text(text, encoding="utf-8")
        os.utime(ws / rel, (1_600_000_000, 1_600_000_000))  # the same mtimes in every run

    queries = []
    for _ in range(n_queries):
        k = rng.randrange(1, 5)
        toks = [token(rng) for _ in range(k)]
        if rng.random() < 0.3:
            toks.insert(0, rng.choice(["where is", "what about", "the", "deploy"]))
        sep = rng.choice([" ", " ", ", ", " ", "? "])
        queries.append(sep.join(toks))
    # mutations applied between phases: rewrite (same path: rowids of the last file get reused), append, delete
    names = sorted(files)
    muts = []
    for _ in range(rng.randrange(3, 9)):
        rel = rng.choice(names)
        muts.append({"path": rel, "op": rng.choice(["rewrite", "append", "delete"]),
                     "text": "\n".join(line(rng, rng.random() < 0.6) for _ in range(rng.choice([1, 3, 10]))) + "\n"})
    return {"queries": queries, "mutations": muts}


def broken_rule(mode: str) -> None:
    """Swap a deliberately wrong rule into ``backend._identifier_candidates`` (to show the comparison sees it)."""
    import inspect
    import textwrap

    from symi_memory.index import backend

    code = textwrap.dedent(inspect.getsource(backend._identifier_candidates))
    if mode == "nostem":  # the identifier's parts as written, porter left out, used even when not counted
        code = code.replace("terms = _index_terms(ident)",
                            "import re; terms = tuple(t for t in re.split('[^a-z0-9]+', ident.lower()) if t)")
        code = code.replace("if not terms or not known.issuperset(terms):", "if not terms:")
    elif mode == "asciionly":  # texts with other characters ruled out by their counts too
        code = code.replace("not r.text.isascii() or ", "").replace("if not r.text.isascii()\n", "if False\n")
        code = code.replace("other = list(compress(rows, map(not_, map(str.isascii, map(_TEXT, rows.values())))))",
                            "other = []")
    else:
        raise SystemExit(f"unknown --break {mode}")
    ns = dict(vars(backend))
    exec(code, ns)  # noqa: S102
    backend._identifier_candidates = ns["_identifier_candidates"]  # type: ignore[attr-defined]


def main() -> int:
    os.environ.setdefault("SYMI_MEMORY_TESTING", "1")
    import attrs

    from symi_memory import load_config
    from symi_memory.manager import open_memory
    from symi_memory.types import SearchQuery

    args = sys.argv[1:]
    analyze = "--analyze" in args
    if analyze:
        args.remove("--analyze")
    ascii_share = 0.6
    if "--ascii" in args:  # every note ASCII: most candidates then have their identifiers told by term counts
        args.remove("--ascii")
        ascii_share = 1.0
    ms: dict[str, Any] = {}
    if "--rrf" in args:  # reciprocal rank fusion instead of the weighted one
        args.remove("--rrf")
        ms["query"] = {"hybrid": {"fusion": "rrf"}}
    if "--synonyms" in args:  # local synonyms on (with the local provider: the provider argument is ignored)
        args.remove("--synonyms")
        ms.setdefault("query", {}).setdefault("hybrid", {})["synonyms"] = {"enabled": True}
    if "--break" in args:
        i = args.index("--break")
        broken_rule(args[i + 1])
        del args[i : i + 2]
    seed, n_queries, provider, out = int(args[0]), int(args[1]), args[2], Path(args[3])
    work = Path(tempfile.mkdtemp(prefix="identifier-fuzz-"))
    plan = build(seed, n_queries, work, ascii_share)
    if "synonyms" in ms.get("query", {}).get("hybrid", {}):
        provider = "local"
    cfg = load_config(None, state_dir=work / "s",
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": provider, **ms}}}})
    mem = open_memory(cfg, workspace=work / "ws", start=False)
    n = 0
    try:
        with out.open("w", encoding="utf-8") as f:
            for phase in range(2):
                mem.sync()
                if provider == "local":
                    import time

                    for _ in range(300):  # until the synonyms' word vectors are in
                        st = mem.status()
                        if ((st.get("custom") or {}).get("synonyms") or st.get("synonyms") or {}).get("active"):
                            break
                        time.sleep(0.1)
                if analyze:
                    import apsw

                    conn = apsw.Connection(str(mem.backend.store.path))
                    conn.execute("ANALYZE")
                    conn.close()
                for _ in range(2):
                    for q in plan["queries"]:
                        configured = mem.search(q, max_results=10).to_dict()
                        ranking = mem.search(q, max_results=10, min_score=0).to_dict()
                        got = mem.backend.search(SearchQuery(text=q, max_results=10, min_score=0.0, candidate_limit=50))
                        f.write(json.dumps({"phase": phase, "q": q, "default": configured, "ranking": ranking,
                                            "mode": got.mode, "backend": [attrs.asdict(c) for c in got.candidates]},
                                           sort_keys=True, default=repr, ensure_ascii=False) + "\n")
                        n += 1
                for j, m in enumerate(plan["mutations"]):
                    p = work / "ws" / m["path"]
                    if m["op"] == "delete":
                        p.unlink(missing_ok=True)
                    elif m["op"] == "append" and p.exists():
                        p.write_text(p.read_text(encoding="utf-8") + m["text"], encoding="utf-8")
                    else:
                        p.write_text(m["text"], encoding="utf-8")
                    if p.exists():
                        os.utime(p, (1_700_000_000 + j, 1_700_000_000 + j))  # the same mtimes in every run
    finally:
        mem.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{n} responses: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
