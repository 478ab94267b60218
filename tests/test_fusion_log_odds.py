"""Issue 10, ranking: weighted fusion adds both sides' calibrated evidence in log-odds."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from symi_memory import load_config, open_memory
from symi_memory.fusion import FUSION_CALIBRATION, fuse_weighted
from symi_memory.index.analysis import KEYWORD_CALIBRATION, keyword_log_odds

REPO = Path(__file__).resolve().parents[1]
DEVMEM = REPO / "bench" / "datasets" / "devmem" / "workspace"


def _p(evidence: float) -> float:
    return 1.0 / (1.0 + math.exp(-keyword_log_odds(evidence)))


def test_a_note_holding_the_query_words_outranks_a_closer_sounding_one_holding_none() -> None:
    # "close" sounds more like the question (vector 0.5) but holds none of its words; "says" is further
    # off by meaning (0.2) but holds most of them (evidence 0.9). The old mix 0.7 * p_v + 0.3 * p_t put
    # "close" first (0.35 against 0.24); now "says" adds both sides' log-odds (0.38) and "close" keeps
    # only its vector side at its weight (0.45 * 0.5).
    vector = {"close": 0.5, "says": 0.2}
    text = {"says": _p(0.9)}
    scores = fuse_weighted(vector, text, vector_weight=0.45, text_weight=0.55,
                           text_log_odds={"close": keyword_log_odds(0.0), "says": keyword_log_odds(0.9)})
    assert scores["says"] > scores["close"]
    assert scores["close"] == pytest.approx(0.45 * 0.5)
    k, c = FUSION_CALIBRATION
    lt = KEYWORD_CALIBRATION[0] * (0.9 - KEYWORD_CALIBRATION[1])
    want = 1.0 / (1.0 + math.exp(-(k * (0.45 * math.log(0.2 / 0.8) + 0.55 * lt) + c)))
    assert scores["says"] == pytest.approx(want)


def test_weighted_fusion_stays_a_probability_and_grows_with_each_side() -> None:
    grid = [0.0, 0.01, 0.2, 0.5, 0.8, 0.99, 1.0]
    evidence = [0.0, 0.3, 1.0, 2.2]
    for ev in evidence:
        row = [fuse_weighted({"c": v}, {"c": _p(ev) if ev else 0.0}, vector_weight=0.45, text_weight=0.55,
                             text_log_odds={"c": keyword_log_odds(ev)})["c"] for v in grid]
        assert all(0.0 <= s <= 1.0 for s in row)
        assert row == sorted(row)
    for v in grid:
        col = [fuse_weighted({"c": v}, {"c": _p(ev) if ev else 0.0}, vector_weight=0.45, text_weight=0.55,
                             text_log_odds={"c": keyword_log_odds(ev)})["c"] for ev in evidence]
        assert col == sorted(col)


def test_without_log_odds_the_keyword_probability_stands_in_and_exact_chunks_keep_their_floor() -> None:
    # Callers that pass only probabilities get the same scores as with the log-odds of those probabilities.
    given = fuse_weighted({"a": 0.4, "b": 0.4}, {"a": _p(1.2)}, vector_weight=0.45, text_weight=0.55,
                          text_log_odds={"a": keyword_log_odds(1.2), "b": keyword_log_odds(0.0)})
    derived = fuse_weighted({"a": 0.4, "b": 0.4}, {"a": _p(1.2)}, vector_weight=0.45, text_weight=0.55)
    assert derived == pytest.approx(given)
    # A chunk with no stored vector yet is scored by its keyword side alone, at its weight.
    only_text = fuse_weighted({}, {"x": 0.8}, vector_weight=0.45, text_weight=0.55)
    assert only_text["x"] == pytest.approx(0.55 * 0.8)
    # An identifier look-up mixes probabilities: a chunk without the identifier gets only 0.3 * p_v.
    lookup = fuse_weighted({"hit": 0.2, "other": 0.05}, {"hit": 0.9}, vector_weight=0.3, text_weight=0.7,
                           exact={"hit"}, log_odds=False)
    assert lookup == pytest.approx({"hit": 0.9, "other": 0.3 * 0.05})
    # A chunk holding the identifier keeps at least its (floored) keyword probability.
    floored = fuse_weighted({"h": 0.0}, {"h": 0.5}, vector_weight=0.3, text_weight=0.7, exact={"h"},
                            text_log_odds={"h": keyword_log_odds(0.1)})
    assert floored["h"] == pytest.approx(0.5)


def _has_local() -> bool:
    try:
        from symi_memory_local.hooks import available  # noqa: F401
        from symi_memory_local.integrity import bundled_tokenizer  # noqa: F401
    except ImportError:
        return False
    return True


# Questions of devmem whose answer holds several of the question's words, while another note shares only
# its person ("Nadia posted her update at 09:50") and sounds closer to the local model. The old fusion
# (0.7 * p_v + 0.3 * p_t) put that other note first for each of them.
QUESTIONS = {
    "Which evening does Nadia go bouldering these days?": "memory/2026-08-31.md",
    "Which two colleagues are writing Nadia's promotion letters, and what does each of them own in Tidewater?":
        "memory/2026-07-20.md",
    "What is the title of Nadia's accepted talk, and what is her speaker ID?": "memory/2026-08-03.md",
    "Did Nadia's conference talk get accepted?": "memory/2026-08-03.md",
}


@pytest.mark.skipif(not _has_local(), reason="needs the local extra (pip install 'symi-memory[local]')")
def test_questions_whose_words_are_in_the_answer_find_it_first_with_the_default_config(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    shutil.copy(DEVMEM / "MEMORY.md", ws / "MEMORY.md")
    for name in ("2026-05-01", "2026-06-08", "2026-06-21", "2026-07-03", "2026-07-14-offsite", "2026-07-20",
                 "2026-08-03", "2026-08-04", "2026-08-31", "people"):
        shutil.copy(DEVMEM / "memory" / f"{name}.md", ws / "memory" / f"{name}.md")
    cfg = load_config(None, state_dir=tmp_path / "state",
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": "local"}}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        if mem.status()["provider"] != "local":
            pytest.skip("the local model is not installed")
        got = {}
        for question in QUESTIONS:
            res = mem.search(question)
            assert res.mode == "hybrid"
            got[question] = res.results[0].path if res.results else None
        assert got == QUESTIONS


def test_score_hits_keyword_side_is_keyword_evidence_bit_for_bit() -> None:
    # score_hits writes keyword_evidence/keyword_probability out inline for speed: the two must not drift,
    # with or without stand-ins for a query word no chunk holds.
    import random

    from symi_memory.fusion import score_hits
    from symi_memory.index.analysis import keyword_evidence, keyword_probability

    rng = random.Random(7)
    weights = {"deploy": 2.1, "stag": 1.3, "server": 0.7, "portug": 3.0}
    synonyms = {"portug": (("lisbon", 0.62), ("madrid", 0.48))}
    vocab = [*weights, "lisbon", "madrid", "other"]
    counts = {i: {t: rng.randint(1, 4) for t in rng.sample(vocab, rng.randint(1, 5))} for i in range(200)}
    lengths = {i: rng.randint(20, 1600) for i in range(200)}
    for syn in (None, synonyms):
        hits = score_hits("deploy staging server portugal", {"enabled": True}, texts={i: "" for i in counts},
                          keyword_ids=list(counts), vector_hits={}, term_weights=weights,
                          term_counts=lambda i: (counts[i], lengths[i]), chunk_chars=1600,
                          calibration=None, use_vector=False, synonyms=syn)
        for i, c in counts.items():
            evidence = keyword_evidence(c, lengths[i] / 1600, weights, syn)
            exact = all(t in c for t in weights)
            assert hits.text_scores.get(i, 0.0) == keyword_probability(evidence, exact=exact), (syn, i)


def test_score_hits_vector_side_is_the_calibration_bit_for_bit() -> None:
    # score_hits writes ScoreCalibration.probability out inline for speed: every vector hit (cosines below 0,
    # above 1, and far below the midpoint, where the probability is 0) scores what the calibration says.
    import random

    from symi_memory.fusion import score_hits
    from symi_memory.specs import ScoreCalibration

    class Declared:  # a calibration of another type: score_hits asks it, as it always did
        def __init__(self, inner: ScoreCalibration) -> None:
            self.inner = inner

        def probability(self, cosine: float) -> float:
            return self.inner.probability(cosine)

    rng = random.Random(11)
    cosines = {i: rng.uniform(-0.3, 1.2) for i in range(300)}
    for cal in (ScoreCalibration(slope=8.0, midpoint=0.61), ScoreCalibration(slope=90.0, midpoint=0.9)):
        hits = score_hits("deploy", {"enabled": True, "fusion": "weighted", "vectorWeight": 0.7, "textWeight": 0.3},
                          texts={i: "" for i in cosines}, keyword_ids=[], vector_hits=cosines, term_weights={},
                          term_counts=lambda i: ({}, 10), chunk_chars=1600, calibration=cal, use_vector=True)
        asked = score_hits("deploy", {"enabled": True, "fusion": "weighted", "vectorWeight": 0.7, "textWeight": 0.3},
                           texts={i: "" for i in cosines}, keyword_ids=[], vector_hits=cosines, term_weights={},
                           term_counts=lambda i: ({}, 10), chunk_chars=1600, calibration=Declared(cal),
                           use_vector=True)
        assert hits.vector_scores == {i: cal.probability(c) for i, c in cosines.items()} == asked.vector_scores
        assert hits.scores == asked.scores
        assert 0.0 in hits.vector_scores.values() or cal.slope < 60


def test_score_hits_weighted_fusion_is_fuse_of_its_sides_bit_for_bit() -> None:
    # score_hits fuses each candidate in the pass that weighs its keyword evidence (fuse_weighted written out,
    # for speed): its scores and scores before the floor must be fuse's of the same sides, bit for bit, for
    # every kind of candidate: every query word or some or none, an identifier holder, a keyword hit without
    # evidence, no vector, a vector hit that is no keyword candidate, and a chunk on neither side (no score).
    import random

    from symi_memory.fusion import fuse, score_hits
    from symi_memory.index.analysis import keyword_evidence
    from symi_memory.specs import ScoreCalibration

    rng = random.Random(13)
    weights = {"deploy": 2.1, "stag": 1.3, "server": 0.7}
    vocab = [*weights, "other"]
    n = 300
    counts = {i: {t: rng.randint(1, 4) for t in rng.sample(vocab, rng.randint(0, 4))} for i in range(n)}
    lengths = {i: rng.randint(0, 2400) for i in range(n)}
    texts = {i: ("see ABC-1234 here" if i % 9 == 0 else "plain text") for i in range(n)}
    keyword_ids = [i for i in range(n) if counts[i] and rng.random() < 0.8] + [i for i in range(n) if i % 23 == 1]
    vector_hits = {i: rng.uniform(-0.2, 1.1) for i in range(n) if rng.random() < 0.7}
    vector_hits.update({n + i: rng.uniform(0.0, 1.0) for i in range(20)})  # no keyword candidates
    cal = ScoreCalibration(slope=8.0, midpoint=0.61)
    checked = set()
    for query in ("deploy staging server", "deploy ABC-1234 staging"):
        for vw, tw in ((0.7, 0.3), (0.45, 0.55), (0.0, 1.0), (1.0, 0.0)):
            hybrid = {"enabled": True, "fusion": "weighted", "vectorWeight": vw, "textWeight": tw, "rrfK": 60}
            hits = score_hits(query, hybrid, texts=texts, keyword_ids=keyword_ids, vector_hits=vector_hits,
                              term_weights=weights, term_counts=lambda i: (counts[i], lengths[i]), chunk_chars=1600,
                              calibration=cal, use_vector=True)
            exact = {i for i in texts if i in hits.identifiers or all(t in counts[i] for t in weights)}
            logs = {i: keyword_log_odds(keyword_evidence(counts[i], lengths[i] / 1600, weights)) for i in texts}
            before: dict[int, float] = {}
            want = fuse(hybrid, hits.vector_scores, hits.text_scores, exact, has_identifier=bool(hits.identifiers),
                        text_log_odds=logs, before_floor=before)
            assert sorted(hits.scores) == sorted(want) and sorted(hits.tie_scores) == sorted(before)
            assert all(hits.scores[i].hex() == want[i].hex() for i in want), (query, vw)
            assert all(hits.tie_scores[i].hex() == before[i].hex() for i in before), (query, vw)
            checked.add(bool(hits.identifiers))
    assert checked == {False, True}  # both the log-odds sum and the identifier look-up's mix


def test_order_is_the_sort_by_score_then_tie_scores_then_rank_then_key() -> None:
    # ScoredHits.order sorts by the score alone when no two scores are equal: the order must be the one the
    # whole key gives, with scores all distinct, some equal, or many at one floor.
    import random

    from symi_memory.fusion import ScoredHits

    rng = random.Random(5)
    for trial in range(300):
        n = rng.randint(0, 60)
        pool = [rng.random() for _ in range(max(1, n // (1 + trial % 4)))] + [0.5, 0.0, 1.0]
        if trial % 10 == 9:
            pool += [-0.0, math.nan]  # never a score of score_hits; still sorted as the whole key sorts them
        scores = {f"k{rng.randint(0, 10**6)}": rng.choice(pool) if trial % 3 else rng.random() for _ in range(n)}
        ties = {k: rng.choice((0.1, 0.2, rng.random())) for k in scores if rng.random() < 0.8}
        rank = {k: rng.randint(0, 5) for k in scores}
        hits = ScoredHits("hybrid", scores, {}, {}, set(), ties)
        want = sorted(scores.items(), key=lambda kv: (-kv[1], -ties.get(kv[0], kv[1]), rank[kv[0]], kv[0]))
        assert [(k, s.hex()) for k, s in hits.order(rank.__getitem__)] == [(k, s.hex()) for k, s in want]
        want = sorted(scores.items(), key=lambda kv: (-kv[1], -ties.get(kv[0], kv[1]), kv[0]))
        assert [(k, s.hex()) for k, s in hits.order()] == [(k, s.hex()) for k, s in want]
        # ScoredHits.ranked (what IndexedBackend.search reads) is the same order as two lists, and asks for the
        # given rank only when two scores are equal (or one is NaN): the backend indexes its keyword ranking then.
        asked: list[str] = []

        def asking(key: str, asked: list[str] = asked, rank: dict[str, int] = rank) -> int:
            asked.append(key)
            return rank[key]

        keys, values = hits.ranked(asking)
        want = sorted(scores.items(), key=lambda kv: (-kv[1], -ties.get(kv[0], kv[1]), rank[kv[0]], kv[0]))
        assert list(zip(keys, [v.hex() for v in values], strict=True)) == [(k, s.hex()) for k, s in want]
        distinct = len(set(scores.values())) == len(scores) and not any(map(math.isnan, scores.values()))
        assert (asked == []) == distinct or not scores


@pytest.mark.skipif(not _has_local(), reason="needs the local extra (pip install 'symi-memory[local]')")
def test_chunks_tied_at_the_exact_match_floor_are_ordered_by_their_evidence(tmp_path: Path) -> None:
    # Three notes hold every word of this question the index knows, so each scores the exact-match floor
    # (0.5). The keyword ranking alone put the sprint note of 05-15 first; the note that answers it (the
    # ICE back from Munich, 05-25) sounds closest to the question, and its fused score before the floor
    # says so: it comes first.
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    shutil.copy(DEVMEM / "MEMORY.md", ws / "MEMORY.md")
    for name in ("2026-05-07", "2026-05-15", "2026-05-23", "2026-05-25"):
        shutil.copy(DEVMEM / "memory" / f"{name}.md", ws / "memory" / f"{name}.md")
    cfg = load_config(None, state_dir=tmp_path / "state",
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": "local"}}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        if mem.status()["provider"] != "local":
            pytest.skip("the local model is not installed")
        res = mem.search("Wie lange hatte der ICE auf der Rückfahrt aus München Verspätung?")
        tied = [h for h in res.results if h.score == pytest.approx(0.5)]
        assert len(tied) >= 2
        assert res.results[0].path == "memory/2026-05-25.md"


def test_equal_scores_are_ordered_by_the_score_before_the_floor_then_the_given_rank() -> None:
    from symi_memory.fusion import ScoredHits

    hits = ScoredHits("hybrid", {"a": 0.5, "b": 0.5, "c": 0.7, "d": 0.5}, {}, {}, set(),
                      {"a": 0.1, "b": 0.3, "c": 0.7, "d": 0.1})
    assert [k for k, _ in hits.order({"a": 1, "b": 2, "c": 3, "d": 0}.__getitem__)] == ["c", "b", "d", "a"]
    # Without scores before the floor (keyword only, RRF), the given rank alone decides.
    plain = ScoredHits("fts-only", {"a": 0.5, "b": 0.5}, {}, {}, set())
    assert [k for k, _ in plain.order({"a": 1, "b": 0}.__getitem__)] == ["b", "a"]


def test_order_keeps_the_rrf_order_among_scores_its_cap_made_equal() -> None:
    # Under RRF a chunk's score is capped by the one above it, so two chunks can share a score while RRF put
    # one first. ScoredHits.order (what the postgres backend and backend-authors.md use) sorted those by key.
    from symi_memory.fusion import score_hits
    from symi_memory.specs import ScoreCalibration

    counts = {"a": ({"deploy": 3, "pipeline": 1}, 30), "b": ({"deploy": 1}, 12), "c": ({}, 5)}
    hits = score_hits("deploy pipeline", {"enabled": True, "fusion": "rrf", "vectorWeight": 0.7, "textWeight": 0.3,
                                          "rrfK": 60},
                      texts={"a": "deploy deploy deploy pipeline", "b": "deploy notes", "c": "other"},
                      keyword_ids=["a", "b"], vector_hits={"a": 0.62, "b": 0.66, "c": 0.3},
                      term_weights={"deploy": 1.0, "pipeline": 2.0}, term_counts=counts.__getitem__,
                      chunk_chars=1600, calibration=ScoreCalibration(slope=8.0, midpoint=0.61), use_vector=True)
    assert hits.scores["a"] == hits.scores["b"]  # a's better evidence is capped by b, first in the RRF order
    assert [k for k, _ in hits.order()] == list(hits.scores) == ["b", "a", "c"]


def test_score_hits_identifier_candidates_keep_their_meaning_whatever_collection_holds_them() -> None:
    # ``identifier_candidates`` is the candidates that may hold an identifier (any collection of keys, a dict's
    # keys included); ``identifier_candidates_by_token`` narrows each identifier token to its own candidates.
    from symi_memory.fusion import score_hits
    from symi_memory.index.keyword import identifier_tokens
    from symi_memory.specs import ScoreCalibration

    texts = {1: "deploy T-1234 today", 2: "ticket INC_9 and T-1234", 3: "nothing here", 4: "INC_9 only"}

    def holders(**kw):  # type: ignore[no-untyped-def]
        return score_hits("T-1234 INC_9", {"enabled": True, "fusion": "weighted", "vectorWeight": 0.7,
                                            "textWeight": 0.3},
                          texts=texts, keyword_ids=list(texts), vector_hits={k: 0.5 for k in texts},
                          term_weights={}, term_counts=lambda i: ({}, 10), chunk_chars=1600,
                          calibration=ScoreCalibration(slope=8.0, midpoint=0.61), use_vector=True, **kw).identifiers

    assert holders() == {1, 2, 4}
    assert holders(identifier_candidates={1: "x", 4: "y"}) == holders(identifier_candidates=[1, 4]) == {1, 4}
    tokens = identifier_tokens("T-1234 INC_9")
    assert len(tokens) == 2
    assert holders(identifier_candidates_by_token={tokens[0]: [1, 3], tokens[1]: [2]}) == {1, 2}
