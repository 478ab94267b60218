#!/usr/bin/env python3
"""Check the convmem dataset; optionally list every query with its gold and stale text (stdlib only).

Exit status 0 when there are no errors (warnings are allowed).

    python3 verify.py               # checks and counts
    python3 verify.py --list        # plus every query with its gold and stale line text
    python3 verify.py --type temporal --list
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
WS = HERE / "workspace"
TYPES = ["single-hop", "multi-hop", "temporal", "paraphrase", "negative"]
WORD = re.compile(r"[0-9a-zà-öø-ÿ]+(?:['’][a-z]+)?", re.I)
# function words and question words; a paraphrase may share these with its gold line, nothing else
STOP = set("""
a about above after again against all am an and any are as at be because been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers herself him
himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other
our ours ourselves out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while who whom why will
with would you your yours yourself yourselves get got go going one ones thing things much many new anything something
does did done make made still also ever way kind s t don doesn isn didn wasn use used each every
""".split())


def stem(w: str) -> str:
    w = w.lower().replace("’", "'")
    w = re.sub(r"'s$", "", w)
    for suf in ("ies", "ing", "ed", "es", "s"):
        if len(w) > len(suf) + 2 and w.endswith(suf):
            return w[: -len(suf)] + ("y" if suf == "ies" else "")
    return w


def content_words(text: str, extra_stop: set[str]) -> set[str]:
    return {stem(w) for w in WORD.findall(text) if w.lower() not in STOP and stem(w) not in extra_stop}


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check_bytes(errors: list[str]) -> None:
    for p in sorted(HERE.rglob("*")):
        if not p.is_file() or p.suffix not in {".md", ".jsonl", ".py"} or "__pycache__" in p.parts:
            continue
        raw = p.read_bytes()
        rel = p.relative_to(HERE).as_posix()
        if b"\r" in raw or raw.startswith(b"\xef\xbb\xbf"):
            errors.append(f"{rel}: CR or BOM")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(f"{rel}: not UTF-8 ({exc})")
        if raw and not raw.endswith(b"\n"):
            errors.append(f"{rel}: no final newline")


def check_build_is_current(errors: list[str]) -> None:
    """Re-run build.py into a copy and compare: the committed files must be exactly its output."""
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "convmem"
        shutil.copytree(HERE, copy, ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run([sys.executable, str(copy / "build.py")], check=True, capture_output=True)
        for p in sorted(copy.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                rel = p.relative_to(copy)
                if not (HERE / rel).is_file() or (HERE / rel).read_bytes() != p.read_bytes():
                    errors.append(f"{rel}: differs from build.py's output; run python3 build.py")


def transcript_lines(path: Path) -> dict[int, str]:
    """JSONL line number -> 'User: …' / 'Assistant: …', like the indexer reads transcripts."""
    out = {}
    for n, raw in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if not raw.strip():
            continue
        rec = json.loads(raw)
        if rec.get("type") != "message":
            continue
        msg = rec["message"]
        parts = msg["content"] if isinstance(msg["content"], list) else [{"type": "text", "text": msg["content"]}]
        text = " ".join(p["text"] for p in parts if p.get("type") == "text")
        out[n] = f"{'User' if msg['role'] == 'user' else 'Assistant'}: {text}"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print every query with its gold and stale text")
    ap.add_argument("--type", choices=TYPES, help="restrict the listing to one type")
    ap.add_argument("--no-rebuild", action="store_true", help="skip the check that build.py reproduces the files")
    args = ap.parse_args()

    errors: list[str] = []
    warnings: list[str] = []
    files = {p.relative_to(WS).as_posix(): p.read_text(encoding="utf-8").split("\n") for p in sorted(WS.rglob("*.md"))}
    queries = load_jsonl(HERE / "queries.jsonl")
    first_names = {q["user"]: None for q in queries}
    names = {}
    for rel, lines in files.items():
        m = re.match(r"memory/([^/]+)/\d{4}-\d{2}-\d{2}\.md$", rel)
        if m:
            names[m.group(1)] = lines[2].split(":", 1)[0]
    seen_ids, seen_text = set(), set()
    for q in queries:
        qid, t = q["id"], q["type"]
        if qid in seen_ids:
            errors.append(f"{qid}: duplicate id")
        if q["query"] in seen_text:
            errors.append(f"{qid}: duplicate query text")
        seen_ids.add(qid)
        seen_text.add(q["query"])
        if t not in TYPES:
            errors.append(f"{qid}: bad type {t}")
        if q["user"] not in first_names or q["user"] not in names:
            errors.append(f"{qid}: unknown user {q['user']}")
        gold_keys = set()
        for g in q["gold"]:
            lines = files.get(g["path"])
            if lines is None or not (1 <= g["start_line"] <= g["end_line"] <= len(lines)):
                errors.append(f"{qid}: gold {g} outside the workspace")
                continue
            text = "\n".join(lines[g["start_line"] - 1: g["end_line"]])
            if not text.strip():
                errors.append(f"{qid}: blank gold {g}")
            answer = q["answer"][g["hop"] - 1]
            if not any(a.strip().lower() in text.lower() for a in answer.split("||")):
                errors.append(f"{qid}: gold {g['path']}:{g['start_line']} does not contain the answer {answer!r}")
            if g["path"] != "MEMORY.md" and not g["path"].startswith(f"memory/{q['user']}/"):
                errors.append(f"{qid}: gold in another user's log {g['path']}")
            gold_keys.update((g["path"], n) for n in range(g["start_line"], g["end_line"] + 1))
        for s in q["stale"]:
            if s["path"] not in files or not (1 <= s["start_line"] <= s["end_line"] <= len(files[s["path"]])):
                errors.append(f"{qid}: stale {s} outside the workspace")
            if any((s["path"], n) in gold_keys for n in range(s["start_line"], s["end_line"] + 1)):
                errors.append(f"{qid}: stale {s['path']}:{s['start_line']} is also gold")
        hops = {g["hop"] for g in q["gold"]}
        if t == "negative" and q["gold"]:
            errors.append(f"{qid}: negative with gold")
        if t != "negative" and hops != set(range(1, len(q["answer"]) + 1)):
            errors.append(f"{qid}: hops {sorted(hops)} do not match {len(q['answer'])} answers")
        if t == "multi-hop":
            if len(hops) < 2:
                errors.append(f"{qid}: multi-hop with one hop")
            elif len({g["path"] for g in q["gold"]}) < 2:
                warnings.append(f"{qid}: multi-hop whose hops are two lines of one file")
        if t == "temporal" and not q["stale"]:
            errors.append(f"{qid}: temporal without stale")
        if t == "paraphrase":
            extra = {stem(names.get(q["user"], "")), stem(q["user"])}
            qw = content_words(q["query"], extra)
            for g in q["gold"]:
                if g["path"] == "MEMORY.md":
                    continue  # curated summaries; the check is against the chat lines
                line = files[g["path"]][g["start_line"] - 1].split(":", 1)[1]
                shared = qw & content_words(line, extra)
                if shared:
                    errors.append(f"{qid}: paraphrase shares {sorted(shared)} with {g['path']}:{g['start_line']}")

    # transcripts: the same turns, and their gold lines contain the answer too
    sess_dir = HERE / "sessions"
    tlines = {f"sessions/{p.name}": transcript_lines(p) for p in sorted(sess_dir.glob("*.jsonl"))}
    md_turns = sum(1 for rel, lines in files.items() if rel.startswith("memory/") for line in lines[2:] if line)
    if sum(len(v) for v in tlines.values()) != md_turns:
        errors.append("transcripts and Markdown logs hold a different number of turns")
    for q in load_jsonl(HERE / "queries_sessions.jsonl"):
        for g in q["gold"]:
            text = tlines.get(g["path"], {}).get(g["start_line"], "")
            if not any(a.strip().lower() in text.lower() for a in q["answer"][g["hop"] - 1].split("||")):
                errors.append(f"{q['id']}: transcript gold {g['path']}:{g['start_line']} lacks the answer")

    check_bytes(errors)
    if not args.no_rebuild:
        check_build_is_current(errors)

    if args.list:
        for q in queries:
            if args.type and q["type"] != args.type:
                continue
            print(f"\n{q['id']} [{q['type']}] {q['query']}")
            for g in q["gold"]:
                print(f"   gold h{g['hop']} {g['path']}:{g['start_line']}  {files[g['path']][g['start_line'] - 1]}")
            for s in q["stale"]:
                print(f"   stale   {s['path']}:{s['start_line']}  {files[s['path']][s['start_line'] - 1]}")
    for w in warnings:
        print(f"warning: {w}")
    for e in errors:
        print(f"ERROR: {e}")
    counts = Counter(q["type"] for q in queries)
    n_lines = sum(len(v) - 1 for v in files.values())
    print(f"{len(files)} Markdown files, {n_lines} lines, {len(tlines)} transcripts; {len(queries)} queries: "
          + ", ".join(f"{t} {counts[t]}" for t in TYPES)
          + f"; {len(warnings)} warnings, {len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
