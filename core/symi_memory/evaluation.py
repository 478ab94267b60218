"""Retrieval quality on a labelled dataset (the devmem format): ``symi-memory eval``.

The dataset folder holds ``workspace/`` (indexed as the agent workspace) and
``queries.jsonl`` (gold and stale line ranges per query). The run indexes the
workspace with the active configuration in a throwaway state folder, never
the user's index, searches every query and scores the hits exactly like the
dataset's ``score.py`` (same metrics, same JSON as its ``--json``):
hit@1, hit@5, recall@5 and MRR@10 over positive queries, the
stale-above-gold rate, and the top score of negative queries.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from .config import Config
from .errors import ConfigError
from .host import load_config
from .types import SyncProgress

__all__ = ["TYPES", "format_table", "parse_now", "run_eval", "score_run"]

log = logging.getLogger("symi_memory.eval")

TYPES = ["paraphrase", "exact-token", "temporal", "multilingual", "multi-hop", "negative"]
K, MRR_K, STALE_K = 5, 10, 10


def parse_now(value: str | float | int | None) -> float | None:
    """Epoch seconds from a date (``2026-09-01``, UTC midnight), an ISO datetime or a number."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--now {value!r}: use a date like 2026-09-01 or an ISO datetime") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


# ------------------------------------------------------------------ scoring


def _norm_path(p: str) -> str:
    p = p.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p[len("workspace/"):] if p.startswith("workspace/") else p


def _overlaps(hit: dict[str, Any], loc: dict[str, Any]) -> bool:
    return (hit["path"] == _norm_path(loc["path"])
            and hit["start"] <= loc["end_line"] and loc["start_line"] <= hit["end"])


def _groups(gold: list[dict[str, Any]]) -> list[list[int]]:
    """Gold entry indices grouped by ``hop``; an entry without a hop is a group of its own."""
    by_hop: dict[object, list[int]] = {}
    alone: list[list[int]] = []
    for i, g in enumerate(gold):
        if g.get("hop") is None:
            alone.append([i])
        else:
            by_hop.setdefault(g["hop"], []).append(i)
    return alone + list(by_hop.values())


def _score_query(q: dict[str, Any], hits: list[dict[str, Any]]) -> dict[str, Any]:
    gold, stale = q.get("gold", []), q.get("stale", [])
    res: dict[str, Any] = {"id": q["id"], "type": q["type"], "n_hits": len(hits),
                           "top_score": hits[0]["score"] if hits else 0.0}
    if q["type"] == "negative" or not gold:
        return res
    first_gold = first_stale = None
    covered: set[int] = set()
    for rank, h in enumerate(hits, 1):
        matched = [i for i, g in enumerate(gold) if _overlaps(h, g)]
        if matched:
            if first_gold is None:
                first_gold = rank
                res["first_gold_score"] = h["score"]
            if rank <= K:
                covered.update(matched)
        elif stale and first_stale is None and any(_overlaps(h, s) for s in stale):
            first_stale = rank
    groups = _groups(gold)
    res["first_gold_rank"] = first_gold
    res["hit@1"] = 1.0 if first_gold == 1 else 0.0
    res[f"hit@{K}"] = 1.0 if first_gold is not None and first_gold <= K else 0.0
    res[f"recall@{K}"] = sum(1 for g in groups if covered.intersection(g)) / len(groups)
    res[f"mrr@{MRR_K}"] = 1.0 / first_gold if first_gold is not None and first_gold <= MRR_K else 0.0
    if stale:
        fg = first_gold if first_gold is not None and first_gold <= STALE_K else None
        fs = first_stale if first_stale is not None and first_stale <= STALE_K else None
        res["first_stale_rank"] = first_stale
        res["stale_above_gold"] = 1.0 if fs is not None and (fg is None or fs < fg) else 0.0
    return res


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    pos = [r for r in rows if r["type"] != "negative" and "hit@1" in r]
    neg = [r for r in rows if r["type"] == "negative"]
    out: dict[str, Any] = {"queries": len(rows), "positive": len(pos), "negative": len(neg)}
    for m in ("hit@1", f"hit@{K}", f"recall@{K}", f"mrr@{MRR_K}"):
        out[m] = _mean([r[m] for r in pos])
    stale = [r["stale_above_gold"] for r in pos if "stale_above_gold" in r]
    out["stale_queries"] = len(stale)
    out["stale_above_gold"] = _mean(stale)
    if pos:
        out["positive_empty"] = _mean([1.0 if r["n_hits"] == 0 else 0.0 for r in pos])
    if neg:
        out["negative_empty_count"] = sum(1 for r in neg if r["n_hits"] == 0)
        out["negative_empty"] = out["negative_empty_count"] / len(neg)
        tops = [r["top_score"] for r in neg]
        out["negative_top_score_mean"] = _mean(tops)
        out["negative_top_score_max"] = max(tops)
    if pos:
        out["positive_top_score_mean"] = _mean([r["top_score"] for r in pos])
    return out


def score_run(queries: list[dict[str, Any]], run: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Score hits (``{id: [{path, start, end, score}, ...]}``, best first) against the queries."""
    rows = [_score_query(q, run.get(q["id"], [])) for q in queries]
    types = TYPES + sorted({r["type"] for r in rows} - set(TYPES))
    per_type = {t: _aggregate([r for r in rows if r["type"] == t]) for t in types if any(r["type"] == t for r in rows)}
    return {"overall": _aggregate(rows), "per_type": per_type,
            "missing_ids": [q["id"] for q in queries if q["id"] not in run],
            "settings": {"k": K, "mrr_k": MRR_K, "stale_k": STALE_K, "min_score": None}}


# ---------------------------------------------------------------------- run


def _line_problem(row: Any, seen: set[str]) -> str | None:
    """What is wrong with one parsed ``queries.jsonl`` line, or None."""
    if not isinstance(row, dict):
        return "not a JSON object; each line is {id, query, type, gold?, stale?, now?}"
    for field in ("id", "query", "type"):
        value = row.get(field)
        if not isinstance(value, str) or not value.strip():
            got = "missing" if field not in row else f"{value!r}, not a non-empty string"
            return f"field {field!r} is {got}; add it"
    if row["id"] in seen:
        return f"id {row['id']!r} is used twice; ids must be unique"
    for field in ("gold", "stale"):
        entries = row.get(field, [])
        if not isinstance(entries, list):
            return f"field {field!r} must be a list of {{path, start_line, end_line}}"
        for i, loc in enumerate(entries):
            if not isinstance(loc, dict) or not isinstance(loc.get("path"), str):
                return f"{field}[{i}] needs a string 'path'"
            for key in ("start_line", "end_line"):
                if isinstance(loc.get(key), bool) or not isinstance(loc.get(key), int):
                    return f"{field}[{i}].{key} is {loc.get(key)!r}; use a line number"
            if not 1 <= loc["start_line"] <= loc["end_line"]:
                return (f"{field}[{i}] runs from line {loc['start_line']} to line {loc['end_line']}; lines count "
                        "from 1 and start_line comes first")
    try:
        parse_now(row.get("now"))
    except ConfigError:
        return f"field 'now' is {row.get('now')!r}; use a date like 2026-09-01 or an ISO datetime"
    if row.get("as_of") is not None:
        from .manager import parse_as_of

        try:
            parse_as_of(row["as_of"])
        except ValueError:
            return f"field 'as_of' is {row['as_of']!r}; use a date like 2026-04-01"
    return None


def load_queries(path: Path) -> list[dict[str, Any]]:
    """Read and check ``queries.jsonl``; a bad line is a ``ConfigError`` naming the file and line."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{path}:{n}: bad JSON ({exc}); fix the line") from None
                problem = _line_problem(row, seen)
                if problem:
                    raise ConfigError(f"{path}:{n}: {problem}")
                seen.add(row["id"])
                rows.append(row)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the queries file ({exc}); it must be UTF-8 JSON lines") from None
    return rows


def _throwaway_config(config: Config, state_dir: Path) -> Config:
    """The same settings, but the index lives in ``state_dir`` and holds only the dataset."""
    data = copy.deepcopy(config.data)
    agents = data["agents"]
    for ms in [agents["defaults"]["memorySearch"]] + [e.get("memorySearch", {}) for e in agents.get("list", [])]:
        ms.setdefault("store", {})["path"] = str(state_dir / "eval.sqlite")
        ms["extraPaths"] = []
        ms["sources"] = ["memory"]
    return attrs.evolve(config, data=data, state_dir=state_dir)


def run_eval(dataset_dir: str | os.PathLike[str], *, config: Config | None = None, now: str | float | None = None,
             n: int | None = None, min_score: float | None = None, results_out: str | os.PathLike[str] | None = None,
             progress: Callable[[SyncProgress], None] | None = None,
             queries: str = "queries.jsonl") -> dict[str, Any]:
    """Index the dataset's workspace, run its queries and score them (``score.py --json`` format).

    With ``min_score`` and ``n`` unset, each query is searched as configured
    (``minScore``, ``maxResults``). ``min_score`` (say 0, the ranking view)
    overrides the threshold and then ``n`` defaults to 10 (at least 10).
    ``progress`` gets the indexing progress, then one ``phase="query"`` report per query.
    ``queries`` names the query file inside the dataset folder (devmem also has
    ``asof.jsonl``); a query with ``as_of`` is searched "as of" that date.
    """
    from .manager import open_memory

    root = Path(dataset_dir).expanduser()
    workspace, queries_file = root / "workspace", root / queries
    missing = [str(p) for p, ok in ((workspace, workspace.is_dir()), (queries_file, queries_file.is_file())) if not ok]
    if missing:
        raise ConfigError(
            f"{root}: not a dataset folder ({' and '.join(missing)} missing); "
            f"it needs workspace/ and {queries} (devmem format)"
        )
    rows = load_queries(queries_file)
    config = config if config is not None else load_config()
    fixed_now = parse_now(now)
    limit: int | None = None
    if min_score is not None or n is not None:
        limit = max(int(n), 10) if n is not None else 10
    run: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="symi-eval-") as tmp:
        with open_memory(_throwaway_config(config, Path(tmp)), workspace=workspace, start=False) as mem:
            mem.sync(reason="eval", progress=progress)
            q_cfg = mem.agent.memory_search["query"]
            used_min = float(min_score) if min_score is not None else float(q_cfg["minScore"])
            used_max = limit if limit is not None else int(q_cfg["maxResults"])
            for i, q in enumerate(rows, start=1):
                if progress:
                    progress(SyncProgress(phase="query", done=i, total=len(rows)))
                clock = fixed_now if fixed_now is not None else parse_now(q.get("now"))
                resp = mem.search(q["query"], max_results=used_max, min_score=used_min, now=clock,
                                   as_of=q.get("as_of"))
                run[q["id"]] = [{"path": h.path, "start": h.start_line, "end": h.end_line, "score": h.score}
                                for h in resp.results]
    if results_out is not None:
        with open(results_out, "w", encoding="utf-8") as fh:
            for q in rows:
                hits = [{"path": h["path"], "start_line": h["start"], "end_line": h["end"], "score": h["score"]}
                        for h in run[q["id"]]]
                fh.write(json.dumps({"id": q["id"], "hits": hits}, ensure_ascii=False) + "\n")
    result = score_run(rows, run)
    # How the queries were searched (score.py cannot know: it only sees the hits).
    result["search"] = {"view": "as-configured" if limit is None else "ranking", "min_score": used_min,
                        "max_results": used_max}
    return result


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def format_table(result: dict[str, Any]) -> str:
    """The result as a plain-text table, overall and per query type."""
    cols = ["n", "hit@1", f"hit@{K}", f"recall@{K}", f"MRR@{MRR_K}", "stale>gold", "no result", "top score (neg)"]
    lines = [f"{'type':<13}" + "".join(f"{c:>16}" for c in cols)]
    for name, a in [("overall", result["overall"])] + list(result["per_type"].items()):
        count = a["negative"] if name == "negative" else a["positive"]
        stale = f"{_fmt(a['stale_above_gold'])} ({a['stale_queries']})" if a["stale_queries"] else "-"
        neg = (f"{_fmt(a.get('negative_top_score_mean'))} / {_fmt(a.get('negative_top_score_max'))}"
               if a.get("negative") else "-")
        if name == "negative":
            empty = a.get("negative_empty")
        elif name == "overall":
            empty = a.get("positive_empty")
        else:
            empty = a.get("positive_empty", a.get("negative_empty"))
        vals = [count, a["hit@1"], a[f"hit@{K}"], a[f"recall@{K}"], a[f"mrr@{MRR_K}"], stale, empty, neg]
        lines.append(f"{name:<13}" + "".join(f"{_fmt(v):>16}" for v in vals))
    lines.append("")
    st = result.get("search") or {}
    if st.get("min_score") is not None:
        lines.append(f"searched with minScore {st['min_score']:g} and maxResults {st.get('max_results')}"
                     + (" (as configured)." if st.get("view") == "as-configured" else "."))
    neg_all = result["per_type"].get("negative", {})
    lines.append("no result: share of queries that returned nothing (overall: positive queries"
                 + (f"; negative queries: {_fmt(neg_all.get('negative_empty'))}" if neg_all else "") + ").")
    lines.append(f"stale>gold: share of queries with stale lines where a stale match outranks the first gold match "
                 f"(top {STALE_K}); number of such queries in brackets.")
    lines.append("top score (neg): mean / max rank-1 score on negative queries (positives' mean rank-1 score: "
                 f"{_fmt(result['overall'].get('positive_top_score_mean'))}).")
    return "\n".join(lines)
