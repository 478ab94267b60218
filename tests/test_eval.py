"""The eval engine: throwaway index, per-query clock, and agreement with the dataset's own scorer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from symi_memory import load_config
from symi_memory.errors import ConfigError
from symi_memory.evaluation import format_table, parse_now, run_eval

REPO = Path(__file__).resolve().parents[1]
DEVMEM = REPO / "bench" / "datasets" / "devmem"


def _config(tmp_path: Path, **memory_search: object):
    return load_config(None, state_dir=tmp_path / "user-state",
                       overrides={"agents": {"defaults": {"memorySearch": memory_search}}})


def test_json_equals_score_py_on_the_same_results_file(tmp_path: Path) -> None:
    run_file = tmp_path / "run.jsonl"
    result = run_eval(DEVMEM, config=_config(tmp_path, provider="none"), results_out=run_file)
    proc = subprocess.run([sys.executable, str(DEVMEM / "score.py"), str(run_file), "--json"],
                          capture_output=True, text=True, check=True)
    search = result.pop("search")
    assert proc.stdout == json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    assert search["view"] == "as-configured" and search["max_results"] == 6
    assert result["overall"]["queries"] == 194 and result["missing_ids"] == []
    # Exact tokens (commit hashes, ticket ids) are what keyword search must get right.
    assert result["per_type"]["exact-token"]["hit@5"] > 0.9
    assert "overall" in format_table(result) and "exact-token" in format_table(result)


def test_results_file_is_in_the_run_format(tmp_path: Path) -> None:
    run_file = tmp_path / "run.jsonl"
    run_eval(DEVMEM, config=_config(tmp_path, provider="none"), n=12, min_score=0, results_out=run_file)
    rows = [json.loads(line) for line in run_file.read_text(encoding="utf-8").splitlines()]
    queries = [json.loads(line) for line in (DEVMEM / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [q["id"] for q in queries]
    q = next(r for r in rows if r["id"] == "q109")
    assert 0 < len(q["hits"]) <= 12
    for hit in q["hits"]:
        assert set(hit) == {"path", "start_line", "end_line", "score"}
        assert (DEVMEM / "workspace" / hit["path"]).is_file() and 1 <= hit["start_line"] <= hit["end_line"]
    scores = [h["score"] for h in q["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_the_users_index_is_never_touched(tmp_path: Path) -> None:
    cfg = _config(tmp_path, provider="none", store={"path": str(tmp_path / "user-index.sqlite")},
                  extraPaths=[str(tmp_path / "private")])
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "secret.md").write_text("zebra password vault\n", encoding="utf-8")
    run_file = tmp_path / "run.jsonl"
    run_eval(DEVMEM, config=cfg, results_out=run_file)
    assert not (tmp_path / "user-index.sqlite").exists()
    assert not (tmp_path / "user-state" / "memory").exists()
    assert "secret.md" not in run_file.read_text(encoding="utf-8")


def _decay_dataset(root: Path, now: str | None) -> Path:
    ws = root / "workspace"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Facts\n\n- Team sync happens at 10:00 now.\n", encoding="utf-8")
    (ws / "memory" / "2026-06-01.md").write_text(
        "# 2026-06-01\n\n- The team sync standup is at 09:45, team sync standup daily.\n", encoding="utf-8")
    for i, topic in enumerate(["sourdough starter", "router firmware", "dentist visit", "garden sensor",
                               "train tickets", "knee exercises"]):
        # Unrelated notes give the keyword index realistic term statistics (BM25 IDF).
        (ws / "memory" / f"topic-{i}.md").write_text(f"# {topic}\n\n- Notes about the {topic}.\n", encoding="utf-8")
    q = {"id": "t1", "query": "team sync standup", "type": "temporal",
         "gold": [{"path": "MEMORY.md", "start_line": 3, "end_line": 3, "hop": 1}],
         "stale": [{"path": "memory/2026-06-01.md", "start_line": 3, "end_line": 3}]}
    if now:
        q["now"] = now
    (root / "queries.jsonl").write_text(json.dumps(q) + "\n", encoding="utf-8")
    return root


@pytest.mark.parametrize(("query_now", "flag_now", "stale_wins"), [
    ("2026-06-01", None, True),  # the daily note is fresh: its stronger keyword match wins
    ("2027-06-01", None, False),  # a year later it has decayed below the undated MEMORY.md line
    ("2027-06-01", "2026-06-01", True),  # --now overrides every query's own date
])
def test_decay_uses_the_query_clock(tmp_path: Path, query_now: str, flag_now: str | None, stale_wins: bool) -> None:
    data = _decay_dataset(tmp_path / "ds", query_now)
    cfg = _config(tmp_path, provider="none", query={"hybrid": {"temporalDecay": {"enabled": True}}})
    result = run_eval(data, config=cfg, now=flag_now, min_score=0)
    assert result["overall"]["stale_above_gold"] == (1.0 if stale_wins else 0.0)
    assert result["overall"]["hit@1"] == (0.0 if stale_wins else 1.0)


def test_not_a_dataset_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="workspace/ and queries.jsonl"):
        run_eval(tmp_path, config=_config(tmp_path, provider="none"))
    with pytest.raises(ConfigError, match="2026-09-01"):
        parse_now("next tuesday")
    assert parse_now("2026-09-01") == 1788220800.0


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (['{"id": "q1", "query": "tea", "type": "paraphrase"}', '{"id": "q2", "type": "temporal"}'],
         ":2: field 'query' is missing; add it"),
        (['{"id": "q1", "query": "tea", "type": "paraphrase"', ""], ":1: bad JSON"),
        (['["q1", "tea"]'], ":1: not a JSON object"),
        (['{"id": "q1", "query": "tea", "type": "x"}', '{"id": "q1", "query": "tee", "type": "x"}'],
         ":2: id 'q1' is used twice"),
        (['{"id": "q1", "query": "tea", "type": "x", "gold": [{"path": "MEMORY.md", "start_line": "3"}]}'],
         ":1: gold[0].start_line is '3'; use a line number"),
        (['{"id": "q1", "query": "tea", "type": "x", "now": "someday"}'], ":1: field 'now' is 'someday'"),
        # A span no search result can fall in: the query scored 0 without a word.
        (['{"id": "q1", "query": "tea", "type": "x", "gold": [{"path": "MEMORY.md", "start_line": 3, "end_line": 1}]}'],
         ":1: gold[0] runs from line 3 to line 1"),
        (['{"id": "q1", "query": "tea", "type": "x", "stale": [{"path": "MEMORY.md", "start_line": 0, "end_line": 0}]}'],
         ":1: stale[0] runs from line 0 to line 0"),
    ],
)
def test_bad_query_lines_name_file_line_and_field(cli, tmp_path: Path, lines: list[str], expected: str) -> None:
    data = tmp_path / "ds"
    (data / "workspace").mkdir(parents=True)
    (data / "workspace" / "MEMORY.md").write_text("# Memory\n\nAlice prefers tea.\n")
    queries = data / "queries.jsonl"
    queries.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as err:
        run_eval(data, config=_config(tmp_path, provider="none"))
    assert str(err.value).startswith(f"{queries}{expected}")
    code, out, stderr = cli("eval", str(data))
    assert code == 2 and out == "" and "Traceback" not in stderr
    assert f"{queries}{expected}" in stderr


def test_missing_queries_file_is_named(cli, tmp_path: Path) -> None:
    (tmp_path / "ds" / "workspace").mkdir(parents=True)
    code, _, stderr = cli("eval", str(tmp_path / "ds"))
    assert code == 2 and "Traceback" not in stderr
    assert f"{tmp_path / 'ds' / 'queries.jsonl'} missing" in stderr


def test_progress_covers_indexing_and_every_query(tmp_path: Path) -> None:
    seen = []
    run_eval(DEVMEM, config=_config(tmp_path, provider="none"), progress=seen.append)
    queries = [p for p in seen if p.phase == "query"]
    assert any(p.phase == "index" for p in seen)
    assert [p.done for p in queries] == list(range(1, 195)) and {p.total for p in queries} == {194}
