#!/usr/bin/env python3
"""Write the convmem dataset from the histories in source/*.py (stdlib only, deterministic).

Each source module holds one user's chat history with the assistant:

    KEY, NAME, FIRST     folder name, full name, first name (the speaker label in the logs)
    NOW                  the date the questions are asked on (the day after the last session)
    MEMORY               curated facts: the lines of the user's section in MEMORY.md
    SESSIONS             {"YYYY-MM-DD HH:MM": "U: ...\\nA: ...\\n..."}, one chat per day
    QUERIES              (type, question, hops, stale[, note]) tuples

A hop is ``(answer, ref, ref, ...)``: ``answer`` is the text that proves the
line answers (verify.py checks each gold line contains it), and each ref
names where it is said: ``"2026-03-04"`` (that day's log), ``"MEM"`` (the
user's section of MEMORY.md), or ``"2026-03-04|anchor"`` / ``"MEM|anchor"``
when the line is found by a different anchor than the answer. Stale refs are
always ``"where|anchor"``. Every line the anchor matches (case-insensitive) is taken; none is an error.
Answers and anchors may list alternatives as ``"a || b"``.

Outputs (all regenerated, never edited by hand):

    workspace/MEMORY.md                    one section per user
    workspace/memory/<key>/YYYY-MM-DD.md   one chat per file, one turn per line
    sessions/<key>-YYYY-MM-DD.jsonl        the same chats as session transcripts (spec/behaviour.md §8)
    queries.jsonl                          gold on the Markdown (what `symi-memory eval` indexes)
    queries_sessions.jsonl                 the same queries with gold on the transcripts' JSONL lines

    python3 build.py
"""
from __future__ import annotations

import importlib.util
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.dont_write_bytecode = True  # source/ stays free of __pycache__
HERE = Path(__file__).resolve().parent
SRC = HERE / "source"
WS = HERE / "workspace"
SESS = HERE / "sessions"
TYPES = ["single-hop", "multi-hop", "temporal", "paraphrase", "negative"]
ORDER = ["priya", "tomas", "ingrid", "marcus", "aiko", "daniel", "rosa", "sam", "leila", "owen"]


class BuildError(Exception):
    pass


ERRORS: list[str] = []


def load_sources() -> list:
    mods = []
    for key in ORDER:
        path = SRC / f"{key}.py"
        if not path.exists():
            raise BuildError(f"{path} is missing")
        spec = importlib.util.spec_from_file_location(f"convmem_{key}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if mod.KEY != key:
            raise BuildError(f"{path}: KEY is {mod.KEY!r}, expected {key!r}")
        mods.append(mod)
    return mods


def parse_turns(key: str, stamp: str, text: str) -> list[tuple[str, str]]:
    turns = []
    for raw in text.strip().split("\n"):
        raw = raw.strip()
        if not raw:
            continue
        role, _, body = raw.partition(": ")
        if role not in ("U", "A") or not body.strip():
            raise BuildError(f"{key} {stamp}: bad turn {raw[:60]!r} (start with 'U: ' or 'A: ')")
        turns.append(("user" if role == "U" else "assistant", " ".join(body.split())))
    return turns


def render_day(mod, date: str, turns: list[tuple[str, str]]) -> list[str]:
    lines = [f"# {date} · chat with {mod.FIRST}", ""]
    for role, body in turns:
        lines.append(f"{mod.FIRST if role == 'user' else 'Assistant'}: {body}")
    return lines


def render_memory(mods) -> tuple[list[str], dict[str, tuple[int, int]]]:
    lines = ["# MEMORY.md · curated facts the assistant keeps about its users", "",
             "One section per user. The chats themselves are in memory/<user>/YYYY-MM-DD.md.", ""]
    spans = {}
    for mod in mods:
        lines.append(f"## {mod.NAME}")
        start = len(lines) + 1
        for fact in mod.MEMORY:
            lines.append(f"- {' '.join(fact.split())}")
        spans[mod.KEY] = (start, len(lines))
        lines.append("")
    return lines[:-1], spans


def find_lines(lines: list[str], lo: int, hi: int, anchor: str, where: str) -> list[int]:
    alts = [a.strip().lower() for a in anchor.split("||")]
    found = [n for n in range(lo, hi + 1) if any(a in lines[n - 1].lower() for a in alts)]
    if not found:
        raise BuildError(f"{where}: anchor {anchor!r} matches no line")
    return found


def resolve(mod, ref: str, answer: str | None, files: dict, mem_span, qid: str) -> list[dict]:
    """Every line of the referenced file (or MEMORY.md section) that contains the anchor."""
    where, _, anchor = ref.partition("|")
    anchor = anchor or answer
    if not anchor:
        raise BuildError(f"{qid}: ref {ref!r} needs an anchor")
    if where == "MEM":
        path, (lo, hi) = "MEMORY.md", mem_span
    else:
        path = f"memory/{mod.KEY}/{where}.md"
        if path not in files:
            ERRORS.append(f"{qid}: no session on {where} for {mod.KEY}")
            return []
        lo, hi = 3, len(files[path])
    try:
        found = find_lines(files[path], lo, hi, anchor, f"{qid} {path}")
    except BuildError as exc:
        ERRORS.append(str(exc))
        return []
    return [{"path": path, "start_line": n, "end_line": n} for n in found]


def main() -> int:
    mods = load_sources()
    files: dict[str, list[str]] = {}
    transcripts: dict[str, list[str]] = {}
    turn_line: dict[tuple[str, int], tuple[str, int]] = {}  # (md path, md line) -> (session path, jsonl line)
    for mod in mods:
        for stamp in sorted(mod.SESSIONS):
            date, _, clock = stamp.partition(" ")
            turns = parse_turns(mod.KEY, stamp, mod.SESSIONS[stamp])
            md_path = f"memory/{mod.KEY}/{date}.md"
            if md_path in files:
                raise BuildError(f"{mod.KEY}: two sessions on {date}")
            files[md_path] = render_day(mod, date, turns)
            start = datetime.fromisoformat(f"{date}T{clock}:00").replace(tzinfo=timezone.utc)
            sid = f"{mod.KEY}-{date}"
            rec = [json.dumps({"type": "session", "version": 1, "id": sid, "timestamp": start.isoformat().replace("+00:00", "Z")},
                              ensure_ascii=False)]
            for i, (role, body) in enumerate(turns):
                ts = (start + timedelta(seconds=45 * i)).isoformat().replace("+00:00", "Z")
                rec.append(json.dumps({"type": "message", "timestamp": ts,
                                       "message": {"role": role, "content": [{"type": "text", "text": body}]}},
                                      ensure_ascii=False))
                turn_line[(md_path, 3 + i)] = (f"sessions/{sid}.jsonl", 2 + i)
            transcripts[f"{sid}.jsonl"] = rec
    mem_lines, spans = render_memory(mods)
    files["MEMORY.md"] = mem_lines

    queries, queries_s = [], []
    counter = 0
    for mod in mods:
        for item in mod.QUERIES:
            qtype, text, hops, stale = item[:4]
            note = item[4] if len(item) > 4 else ""
            counter += 1
            qid = f"c{counter:03d}"
            if qtype not in TYPES:
                raise BuildError(f"{qid}: unknown type {qtype!r}")
            gold, answers = [], []
            for h, hop in enumerate(hops, 1):
                answer, refs = hop[0], hop[1:]
                if not refs:
                    raise BuildError(f"{qid}: hop {h} has no refs")
                answers.append(answer)
                for ref in refs:
                    gold.extend(dict(loc, hop=h) for loc in resolve(mod, ref, answer, files, spans[mod.KEY], qid))
            stale_locs = [loc for ref in stale for loc in resolve(mod, ref, None, files, spans[mod.KEY], qid)]
            if (qtype == "negative") != (not gold):
                raise BuildError(f"{qid}: negatives and only negatives have no gold")
            if qtype == "temporal" and not stale_locs:
                raise BuildError(f"{qid}: temporal query without stale lines")
            row = {"id": qid, "query": text, "type": qtype, "user": mod.KEY, "now": mod.NOW,
                   "gold": gold, "stale": stale_locs, "answer": answers, "note": note}
            queries.append(row)
            # transcript view: Markdown turn lines map to JSONL lines; MEMORY.md has no transcript
            sg = [dict(path=turn_line[(g["path"], g["start_line"])][0],
                       start_line=turn_line[(g["path"], g["start_line"])][1],
                       end_line=turn_line[(g["path"], g["start_line"])][1], hop=g["hop"])
                  for g in gold if g["path"] != "MEMORY.md"]
            ss = [dict(path=turn_line[(s["path"], s["start_line"])][0],
                       start_line=turn_line[(s["path"], s["start_line"])][1],
                       end_line=turn_line[(s["path"], s["start_line"])][1])
                  for s in stale_locs if s["path"] != "MEMORY.md"]
            if {g["hop"] for g in sg} == set(range(1, len(hops) + 1)):
                queries_s.append(dict(row, gold=sg, stale=ss))

    if ERRORS:
        raise BuildError(f"{len(ERRORS)} bad refs:\n  " + "\n  ".join(ERRORS))
    # write everything fresh
    for folder in (WS, SESS):
        if folder.exists():
            for p in sorted(folder.rglob("*"), reverse=True):
                p.unlink() if p.is_file() else p.rmdir()
    for path, lines in files.items():
        out = WS / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    SESS.mkdir(parents=True, exist_ok=True)
    for name, rec in transcripts.items():
        (SESS / name).write_text("\n".join(rec) + "\n", encoding="utf-8")
    for name, rows in (("queries.jsonl", queries), ("queries_sessions.jsonl", queries_s)):
        with open(HERE / name, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts = {t: sum(1 for q in queries if q["type"] == t) for t in TYPES}
    print(f"{len(mods)} users, {len(transcripts)} sessions, {len(files)} Markdown files, "
          f"{len(queries)} queries {counts}; {len(queries_s)} with transcript gold")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BuildError as exc:
        print(f"build.py: {exc}", file=sys.stderr)
        sys.exit(1)
