"""The backend tutorial cannot drift from its example, and the example passes the conformance suite
as a third party runs it: pip-installed, selected by name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.offline_install import pip_install_offline

REPO = Path(__file__).resolve().parents[1]
TUTORIAL = REPO / "docs" / "backend-authors.md"
CONTRIB = REPO / "contrib" / "symi-memory-json-index"
EXCERPT = re.compile(r"<!-- from: (?P<path>[\w./-]+) -->\n```python\n(?P<code>.*?)\n```", re.DOTALL)


def excerpts(markdown: str) -> list[tuple[str, str]]:
    """``(path, code)`` for every fenced excerpt announced with ``<!-- from: path -->``."""
    return [(m["path"], m["code"]) for m in EXCERPT.finditer(markdown)]


def drift(code: str, source: str) -> str | None:
    """Why ``code`` is not a faithful excerpt of ``source``, or None.

    A line ``...`` (any indent) stands for code left out; every other run of
    lines must appear in the file verbatim, in the order given.
    """
    segments: list[list[str]] = [[]]
    for line in code.split("\n"):
        if line.strip() == "...":
            segments.append([])
        else:
            segments[-1].append(line)
    lines = source.split("\n")
    at = 0
    for seg in (s for s in segments if s):
        n = len(seg)
        found = next((i for i in range(at, len(lines) - n + 1) if lines[i:i + n] == seg), None)
        if found is None:
            return f"not in the file (in this order): {seg[0].strip()!r}..."
        at = found + n
    return None


@pytest.mark.parametrize(("doc", "least"), [("backend-authors.md", 7), ("plugin-authors.md", 3)])
def test_every_excerpt_matches_its_file(doc: str, least: int) -> None:
    """Both tutorials (backend, post-processor) are built from the real files in contrib/."""
    found = excerpts((REPO / "docs" / doc).read_text(encoding="utf-8"))
    assert len(found) >= least
    problems = [f"{path}: {why}" for path, code in found
                if (why := drift(code, (REPO / path).read_text(encoding="utf-8"))) is not None]
    assert problems == []


def test_every_module_of_the_example_is_shown() -> None:
    shown = {path for path, _ in excerpts(TUTORIAL.read_text(encoding="utf-8"))}
    modules = {str(p.relative_to(REPO)) for p in (CONTRIB / "symi_memory_json_index").glob("*.py")
               if p.name != "__init__.py"}
    assert modules and modules <= shown


def test_the_drift_check_catches_a_changed_line() -> None:
    source = "def f():\n    a = 1\n    b = 2\n    return a + b\n"
    assert drift("def f():\n    ...\n    return a + b", source) is None
    assert drift("def f():\n    a = 1\n    b = 3", source) is not None
    assert drift("    return a + b\n    ...\n    a = 1", source) is not None  # out of order


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example installed like a user would (offline, into a directory only subprocesses see)."""
    target = tmp_path_factory.mktemp("site")
    pip_install_offline(CONTRIB, target, tmp_path_factory.mktemp("pip"))
    return target


def test_the_installed_example_passes_the_conformance_suite(site: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYMI_") and k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = str(site)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "--pyargs", "symi_memory.testing.conformance", "--symi-backend", "json-index"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    passed = int(re.search(r"(\d+) passed", out)[1])  # type: ignore[index]
    assert passed >= 9 and "failed" not in out
    # What does not apply to a keyword-only backend is a skip with its reason, never a silent pass.
    assert "this backend stores no vectors" in out


def test_the_example_imports_only_the_public_api_the_tutorial_lists() -> None:
    import ast

    listed = set(re.findall(r"^- `(symi_memory(?:\.[\w.]+)?)`:", TUTORIAL.read_text(encoding="utf-8"), re.MULTILINE))
    assert {"symi_memory", "symi_memory.specs", "symi_memory.types"} <= listed
    used: dict[str, set[str]] = {}
    for path in sorted((CONTRIB / "symi_memory_json_index").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "symi_memory":
                used.setdefault(node.module or "", set()).update(a.name for a in node.names)
    assert used and set(used) <= listed, f"not in the tutorial's public API list: {set(used) - listed}"
