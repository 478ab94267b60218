"""The inspector page in a real headless Chromium (Debian's `chromium`, driven by Playwright)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")

from test_serve import running_server  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = Path(os.environ.get("SYMI_SCREENSHOT_DIR", "")) if os.environ.get("SYMI_SCREENSHOT_DIR") else None


def _chromium() -> tuple[tuple[Any, Any], str]:
    """Playwright's sync API and the system Chromium, or a skip (a failure when SYMI_REQUIRE_CHROMIUM=1)."""
    required = os.environ.get("SYMI_REQUIRE_CHROMIUM") == "1"
    exe = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p), None)
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        sync_playwright = expect = None
    if exe is None or sync_playwright is None:
        why = "needs Debian's chromium and the playwright package (apt-get install chromium; pip install playwright)"
        if required:
            pytest.fail(f"SYMI_REQUIRE_CHROMIUM=1 but the inspector test {why}")
        pytest.skip(why)
    return (sync_playwright, expect), exe


@pytest.fixture
def served(tmp_path: Path, workspace: Path, cli: Any) -> Any:
    (workspace / "memory" / "2026-03-04.md").write_text(
        "# 2026-03-04\n\n- Switched the team chat to Matrix; Nadia prefers Signal for anything urgent.\n"
        "- Tea tasting on Friday: oolong won.\n", encoding="utf-8")
    (workspace / "memory" / "huge.md").write_text("x" * 5000, encoding="utf-8")
    (workspace / "memory" / "2026-03-01.md").write_text(
        "# 2026-03-01\n\n- The car is a blue hatchback.\n- Booked the dentist for Tuesday.\n", encoding="utf-8")
    (workspace / "memory" / "2026-06-01.md").write_text(
        "# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.\n- Bought running shoes.\n", encoding="utf-8")
    state = tmp_path / "state"
    state.mkdir()
    (state / "symi.toml").write_text(
        f'[agents.defaults]\nworkspace = "{workspace}"\n'
        '[agents.defaults.memorySearch]\nprovider = "hash"\n'
        '[agents.defaults.memorySearch.query]\nminScore = 0.2\n'
        '[agents.defaults.memorySearch.sync]\nmaxFileBytes = 4000\n'
        '[agents.defaults.memorySearch.query.hybrid.mmr]\nenabled = true\n'
        '[agents.defaults.memorySearch.query.hybrid.temporalDecay]\nenabled = true\n'
        '[agents.defaults.memorySearch.query.hybrid.supersession]\nenabled = true\n', encoding="utf-8")
    # A real eval run leaves its result for the inspector.
    data = tmp_path / "dataset"
    shutil.copytree(workspace, data / "workspace")
    rows = [
        {"id": "p1", "query": "Which drink does the user prefer?", "type": "paraphrase",
         "gold": [{"path": "MEMORY.md", "start_line": 3, "end_line": 3}]},
        {"id": "e1", "query": "Signal Nadia urgent", "type": "exact-token",
         "gold": [{"path": "memory/2026-03-04.md", "start_line": 3, "end_line": 3}]},
        {"id": "n1", "query": "passport renewal appointment", "type": "negative"},
    ]
    (data / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, _, err = cli("eval", str(data), "--json")
    assert code == 0, err
    assert json.loads((state / "eval" / "last.json").read_text())["result"]["overall"]["queries"] == 3
    with running_server(state) as srv:
        yield srv


def test_inspector_shows_a_search_with_its_score_breakdown_and_the_files(served: Any, tmp_path: Path) -> None:
    (sync_playwright, expect), exe = _chromium()
    shots = SCREENSHOTS or tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 820})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("requestfailed", lambda req: errors.append(f"request failed: {req.url}"))
            page.goto(served.url + "/")
            # Files and freshness.
            page.wait_for_selector("#files tr")
            files = {r.locator("td").nth(0).inner_text(): r.locator("td").nth(1).inner_text()
                     for r in page.locator("#files tr").all()}
            assert files["MEMORY.md"] == "indexed" and files["memory/2026-03-04.md"] == "indexed"
            assert files["memory/huge.md"] == "skipped"
            assert "provider hash" in page.locator("#status").inner_text()
            # Eval plot: one bar label per query type, with hit@k values.
            page.wait_for_selector("#eval svg")
            labels = page.locator("#eval svg text").all_text_contents()
            assert {"paraphrase", "exact-token", "negative"} <= set(labels), labels
            assert page.locator("#eval svg rect").count() == 4  # hit@k and hit@1 bars for the two positive types
            # A search, explained.
            page.fill("#q", "tea preference")
            page.click("button[type=submit]")
            page.wait_for_selector("#hits tr")
            headers = page.locator("#hits-head th").all_inner_texts()
            assert headers[:5] == ["#", "file", "keyword", "vector", "fused"]
            assert "temporal-decay" in headers and "mmr" in headers and headers[-2:] == ["final", "outcome"]
            rows = [r.locator("td").all_inner_texts() for r in page.locator("#hits tr").all()]
            note = next(r for r in rows if r[1].startswith("memory/2026-03-04.md"))
            # Its keyword and vector scores (the vector column is the calibrated probability: small for the hash embedder).
            assert float(note[2]) >= 0 and float(note[3]) > 0
            decayed = float(note[headers.index("temporal-decay")].split()[0])
            assert decayed < float(note[4])  # a months-old daily note loses score to temporal decay
            assert rows[0][-1] == "returned"
            outcomes = set(page.locator("#hits tr td:last-child").all_inner_texts())
            assert outcomes <= {"returned", "below minScore", "beyond maxResults"}
            assert "minScore 0.200" in page.locator("#meta").inner_text()
            page.screenshot(path=str(shots / "inspector.png"), full_page=True)
            # Supersession: the older note's row says, in the supersession column, what superseded it.
            page.fill("#q", "what car do I drive?")
            with page.expect_response(lambda r: r.url.endswith("/explain")):
                page.click("button[type=submit]")
            expect(page.locator("#meta")).to_contain_text("candidates")
            headers = page.locator("#hits-head th").all_inner_texts()
            col = headers.index("supersession")
            rows = {r.locator("td").nth(1).inner_text(): r.locator("td").nth(col).inner_text()
                    for r in page.locator("#hits tr").all()}
            march = next(v for k, v in rows.items() if k.startswith("memory/2026-03-01.md"))
            assert "superseded by memory/2026-06-01.md:3" in march
            page.screenshot(path=str(shots / "inspector-supersession.png"), full_page=True)
            # As of April: the June note is listed as written after that date.
            page.fill("#asof", "2026-04-01")
            page.click("button[type=submit]")
            expect(page.locator("#meta")).to_contain_text("as of 2026-04-01")
            outcome = {r.locator("td").nth(1).inner_text(): r.locator("td").last.inner_text()
                       for r in page.locator("#hits tr").all()}
            june = next(v for k, v in outcome.items() if k.startswith("memory/2026-06-01.md"))
            assert june == "written after asOf"
            assert page.locator("#warnings").inner_text() == ""
            # A search's warnings (a query cut to 1,024 words, a stage skipped, an agent still catching up with its
            # files) are in the explain answer: the inspector showed none, its results looking complete.
            page.fill("#asof", "")
            page.fill("#q", "tea " + " ".join(f"w{i:05d}" for i in range(1_100)))
            with page.expect_response(lambda r: r.url.endswith("/explain")):
                page.click("button[type=submit]")
            expect(page.locator("#warnings")).to_contain_text("only its first 1,024 were searched for")
            assert errors == []
        finally:
            browser.close()
