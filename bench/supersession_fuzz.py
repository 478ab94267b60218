"""Differential fuzz of the supersession post-processor: this checkout against a baseline, window by window.

Generates search windows (candidates, query, "as of" date and left-out hits, stored line analyses good, of
another version or of another text, transcript write times, line vectors and a query vector or not): plain filler
chunks beside a family of chunks about one thing that differ by a value (numbers, times, dates, currency,
fractions, ordinals, non-ASCII digits), a change word, an ending or a thing gone, and chunks of mutated words of
every pattern the rules use and of the bench datasets' lines. One child per interpreter (this checkout, and
``--baseline-python``) runs ``Supersession.process`` over the same windows in the same order (its caches carry
over from window to window as in a long-lived process) and prints each result (ids in order, exact scores,
``superseded_by``, ``supersedes``); the parent compares them line by line. ``--broken`` also runs this checkout
with a plainness test that forgets a number can start a word: the fuzz must see it (a few windows differ).
``--threads`` runs this checkout's child with four threads over the windows in shuffled orders, each result held
to the others.

    python bench/supersession_fuzz.py --windows 3000 --seed 3 --baseline-python ../base/.venv/bin/python --broken
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PLAIN = ("the car is blue and quiet team meets in big room coffee good house garden bike cat dog lamp chair table Anna "
         "Bob Juf Marloes Coach Wouter hatchback Gazelle router dentist school case committee boiler").split()
ODD = ["3pm", "\u00bd", "1st", "2nd", "\u20ac5", "$5", "5%", "2026-07-28", "07-28", "x07-28", "due:2026-07-28", "09:45",
       "1:5:5", "v0.4.2", "V2", "x3", "-3", ".5", "3.5kg", "#3", "(3)", "_3", "1/2", "\u212a", "\u017f", "\u0131", "\u0130",
       "\uff13", "\u0663", "\u4e2d\u6587", "\u00e9", "\u00a0", "\x0b", "\x1c", "\r", "\t", "it's", "June 2026", "yesterday",
       "next Monday", "2026-13-45", "00-00"]
VALUES = ["2000 IU a day", "3000 IU a day", "09:45", "10:00", "13.6 kg", "14.1 kg", "v0.4.2", "v0.5", "1:5:5", "1:10:10",
          "07-28", "08-02", "2026-07-28", "2026-08-02", "3pm", "4pm", "\u00bd cup", "1\u00bd cup", "\u20ac5", "\u20ac7", "$5",
          "$7", "1st", "2nd", "3 times", "4 times", "76%", "80 %", "380 ms", "410 ms", "in June 2026", "on Tuesday",
          "yesterday", "Tuesdays at 20:30", "V2", "x3", "#3", "room 12", "\uff13 kg", "\u0663 kg", "Hoka", "Asics",
          "the red one", "\u4e2d\u6587", "caf\u00e9", "\u212aLM"]
EXTRA = ["now", "Now", "NOW", "new", "moved", "instead", "since", "previously", "until", "no longer", "anymore", "changed",
         "retires", "sold", "was stolen", "is gone", "submitted", "approved", "steps down", "took over from Juf Marloes",
         "re-moved", "newly", "swapped", "retirement", "was", "used to", "before the swap", "from now on", "switched"]


def _words() -> list[str]:
    import symi_memory.chronology as chronology
    import symi_memory.supersession as supersession

    sources = [v.pattern for m in (supersession, chronology) for v in vars(m).values() if isinstance(v, re.Pattern)]
    sources += [p.pattern for _rank, p in supersession.STAGES]
    return sorted({w for s in sources if isinstance(s, str) for w in re.findall(r"[a-z]{2,}", re.sub(r"\\[a-zA-Z]", " ", s))})


def _dataset_lines() -> list[str]:
    out: list[str] = []
    for note in sorted((ROOT / "bench" / "datasets").rglob("*.md")):
        out += [ln for ln in note.read_text(encoding="utf-8").split("\n") if ln.strip()]
    return out


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.words = _words()
        self.lines = _dataset_lines()

    def word(self) -> str:
        r, w = self.rnd, self.rnd.choice(self.words)
        return r.choice([w, w.upper(), w.capitalize(), w + "s", w + "ed", w + "ing", "re-" + w, w + "-car", "x" + w,
                         w[:-1], w + "_", w + "2", "2" + w, "(" + w + ")", w + ".", w.replace("s", "\u017f", 1)])

    def filler(self) -> str:
        r = self.rnd
        return r.choice(["\n", "\r\n", "\n\n"]).join(
            r.choice(["", "# ", "- "]) + " ".join(r.sample(PLAIN, r.randint(2, 8))) + r.choice(["", ".", ";"])
            for _ in range(r.randint(1, 4)))

    def text(self, trig: float) -> str:
        r = self.rnd
        lines = []
        for _ in range(r.randint(1, 5)):
            if r.random() < 0.25:
                toks = r.choice(self.lines).split(" ")
            else:
                toks = [r.choice(PLAIN) for _ in range(r.randint(1, 10))]
            for _ in range(r.randint(0, 3)):
                if r.random() < trig:
                    toks.insert(r.randrange(len(toks) + 1), self.word() if r.random() < 0.7 else r.choice(ODD))
            lines.append(r.choice(["", "", "- ", "# ", "## History\n"]) + r.choice([" ", ", ", "\t"]).join(toks))
        return r.choice(["\n", "\r\n"]).join(lines)

    def windows(self, n: int) -> list[dict[str, Any]]:
        r = self.rnd
        paths = [f"memory/notes-{k}.md" for k in range(6)] + [f"memory/2026-0{m}-1{d}.md" for m in range(1, 9)
                                                               for d in range(3)] + ["sessions/s1.jsonl", "MEMORY.md"]
        pool = []
        for k in range(2000):
            path = r.choice(paths)
            pool.append({"id": f"c{k}", "path": path, "start_line": r.choice([1, 5, 17]), "text": self.text(
                r.choice([0.0, 0.0, 0.05, 0.2, 0.5])), "mtime": r.choice([None, 1.70e9 + r.randint(0, 30_000_000)]),
                "source": "sessions" if path.startswith("sessions/") else "memory"})
        out = []
        for _ in range(n):
            size = r.choice([2, 3, 5, 8, 12, 20, 25])
            if r.random() < 0.7:  # plain fillers and a family of chunks about one thing
                pick = [dict(c, text=self.filler()) for c in r.sample(pool, size)]
                subject = " ".join(r.sample(PLAIN, r.randint(2, 4)))
                for k in range(r.randint(2, min(4, size))):
                    extra = r.choice(EXTRA) if r.random() < 0.15 else ""
                    line = r.choice(["{s} {v} {e}", "{s}: {v} {e}", "{e} {s} {v}", "- {s} {v}"]).format(
                        s=subject, v=r.choice(VALUES), e=extra).strip()
                    if r.random() < 0.3:
                        line = self.filler() + r.choice(["\n", "\r\n", "\n## History\n"]) + line
                    path = r.choice([f"memory/2026-0{1 + k}-1{k}.md", "sessions/s1.jsonl", f"memory/notes-{k}.md"])
                    pick[k].update(text=line, path=path, mtime=1.70e9 + k * 1e6,
                                   source="sessions" if path.startswith("sessions/") else "memory")
                r.shuffle(pick)
            else:
                pick = [dict(c) for c in r.sample(pool, size)]
            for c in pick:
                c["score"] = round(r.random(), 3) if r.random() < 0.9 else 0.5
            words = [w for c in pick for w in c["text"].split()[:20]] or ["car"]
            query = " ".join(r.choice(words) for _ in range(r.randint(1, 4)))
            if r.random() < 0.2:
                query = r.choice(["What did ", "Who was ", "What is the current ", ""]) + query + r.choice(["?", " now?"])
            as_of, left = None, []
            if r.random() < 0.3:
                as_of = r.choice([1.72e9, 1.76e9])
                left = [dict(c, score=round(r.random(), 3)) for c in r.sample(pool, r.choice([0, 1, 3, 10]))]
            out.append({"query": query, "cands": pick, "as_of": as_of, "left": left,
                        "line_vectors": r.random() < 0.5, "query_vector": r.random() < 0.5, "written": r.random() < 0.7,
                        "analysis": r.choice(["none", "good", "good", "mixed"]), "novec": r.random() < 0.1})
        return out


def _vec(text: str) -> list[float]:
    from symi_memory.supersession import TOKEN_RE

    v = [0.6] * 24
    for tok in TOKEN_RE.findall(text.lower()):
        h = int(hashlib.md5(tok.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16)
        v[h % 24] += 1.0
        v[(h >> 8) % 24] -= 0.3
    return v


def _process(proc: Any, w: dict[str, Any]) -> str:
    from symi_memory.specs import PostProcessContext
    from symi_memory.supersession import line_analysis
    from symi_memory.types import Candidate

    def cand(c: dict[str, Any]) -> Candidate:
        return Candidate(id=c["id"], path=c["path"], start_line=c["start_line"], end_line=c["start_line"] + 9,
                         score=c["score"], text=c["text"], source=c["source"], mtime=c["mtime"])

    cands, left = [cand(c) for c in w["cands"]], [cand(c) for c in w["left"]]
    by_id = {c.id: c for c in cands + left}

    def vectors(ids: Any) -> dict[str, list[float]]:
        return {i: _vec(by_id[i].text) for i in ids if not (w["novec"] and int(i[1:]) % 3 == 0)}

    def line_vectors(ids: Any) -> dict[str, list[tuple[int, int, list[float]]]]:
        return {i: [(by_id[i].start_line + o, by_id[i].start_line + o, _vec(ln))
                    for o, ln in enumerate(by_id[i].text.split("\n")) if ln.strip() and not ln.strip().startswith("#")]
                for i in ids}

    def written_at(cs: Any) -> dict[str, tuple[float, float]]:
        return {c.id: (1.74e9 + int(c.id[1:]) * 1e3, 1.74e9 + int(c.id[1:]) * 1e3 + 500) for c in cs
                if c.source == "sessions"}

    def analysis(ids: Any) -> dict[str, bytes]:
        out = {}
        for i in ids:
            c, kind = by_id[i], int(i[1:]) % 4 if w["analysis"] == "mixed" else 0
            if kind == 0:
                out[i] = line_analysis(c.path, c.start_line, c.text)
            elif kind == 1:
                out[i] = bytes((2,)) + line_analysis(c.path, c.start_line, c.text)[1:]  # another version
            elif kind == 2:
                out[i] = line_analysis(c.path, c.start_line, c.text + "\nx")  # another text
        return out

    ctx = PostProcessContext(query=w["query"], now=1.8e9, as_of=w["as_of"], vectors=vectors,
                             written_at=written_at if w["written"] else None,
                             line_vectors=line_vectors if w["line_vectors"] else None,
                             query_vector=_vec(w["query"]) if w["query_vector"] else None,
                             line_analysis=None if w["analysis"] == "none" else analysis, left_out=left)
    out = proc.process(cands, ctx)
    return json.dumps([[c.id, repr(c.score), c.superseded_by, list(c.supersedes)] for c in out], sort_keys=True)


def _broken_plain(text: str) -> bool:
    """plain_chunk without its check for a number starting a word: what --broken runs to show the fuzz sees it."""
    import symi_memory.supersession as s

    if not text.isascii():
        return False
    raw = text.encode("ascii")
    if b"dd-dd" in raw.translate(s._CHAR_CLASSES):
        return False
    runs = s._word_runs(raw)
    return s._FLAG_STARTS_RE.search(runs) is None and s._FLAG_WORDS.isdisjoint(runs.split())


def _drive(windows_file: Path, mode: str) -> None:
    from symi_memory_postprocess import supersede
    from symi_memory_postprocess.supersede import Supersession

    if mode == "broken":
        supersede.plain_chunks = lambda texts: all(map(_broken_plain, texts))  # type: ignore[attr-defined]
    proc = Supersession()
    windows = [json.loads(line) for line in windows_file.read_text(encoding="utf-8").splitlines()]
    if mode != "threads":
        for w in windows:
            print(_process(proc, w))
        return
    import threading

    sys.setswitchinterval(1e-5)
    results: dict[int, dict[int, str]] = {}

    def work(t: int) -> None:
        order = list(range(len(windows)))
        random.Random(t).shuffle(order)
        results[t] = {k: _process(proc, windows[k]) for k in order}

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for k in range(len(windows)):
        got = {results[t][k] for t in results}
        print(got.pop() if len(got) == 1 else f"threads disagree on window {k}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--baseline-python", required=True)
    ap.add_argument("--broken", action="store_true", help="also run a deliberately broken plainness test")
    ap.add_argument("--threads", action="store_true", help="run this checkout's side in four threads")
    ap.add_argument("--drive", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="plain", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.drive:
        _drive(args.drive, args.mode)
        return
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        wfile = Path(tmp) / "windows.jsonl"
        wfile.write_text("\n".join(json.dumps(w) for w in _Gen(args.seed).windows(args.windows)), encoding="utf-8")

        def run(python: str, mode: str) -> list[str]:
            cmd = [python, str(Path(__file__).resolve()), "--baseline-python", python, "--drive", str(wfile),
                   "--mode", mode]
            return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.splitlines()

        base = run(args.baseline_python, "plain")
        sides = [("this checkout", "plain")] + [("this checkout, broken plain_chunk", "broken")] * args.broken \
            + [("this checkout, 4 threads", "threads")] * args.threads
        superseding = sum('"endLine"' in line for line in base)
        print(f"{len(base)} windows (seed {args.seed}), {superseding} with a supersession in the baseline's results")
        for name, mode in sides:
            mine = run(sys.executable, mode)
            differ = [k for k, (a, b) in enumerate(zip(mine, base, strict=True)) if a != b]
            print(f"{name}: {len(differ)} windows differ from the baseline" + (f" (first: {differ[:5]})" if differ else ""))


if __name__ == "__main__":
    main()
