"""The docs cannot drift: hooks are documented and tested, generated references are current,
every config key has a doc, and the files the docs point at exist."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "docs" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()
HOOKS = gen.hookspecs()


def hook_doc_problems(func: Callable[..., Any]) -> list[str]:
    """What a hookspec's docstring lacks: a summary, a :param: per parameter, a :return: line."""
    doc = inspect.getdoc(func) or ""
    problems = [] if doc.strip() else ["no docstring"]
    problems += [f"no ':param {p}:' line" for p in gen.spec_params(func) if f":param {p}:" not in doc]
    if not re.search(r"^:return:", doc, re.MULTILINE):
        problems.append("no ':return:' line")
    return problems


def _implemented_in(tree: ast.AST) -> set[str]:
    """Names of functions (module level or methods) decorated with a hookimpl marker in one module."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if "hookimpl" in name or name.endswith("_marker"):
                    found.add(node.name)
    return found


def hooks_without_tests(names: list[str], roots: tuple[Path, ...] = (TESTS, REPO / "contrib")) -> list[str]:
    """Hook names that no test implements: a test plugin with a hookimpl of that name, whose effect it asserts.

    Mentioning the name is not enough; a test module (or a test-support module it loads) must define
    an implementation of the hook, so the hook is really called by the host in the suite.
    """
    implemented: set[str] = set()
    for root in roots:
        for path in root.rglob("*.py"):
            if ".venv" in path.parts or path.name == Path(__file__).name:
                continue
            in_tests = "tests" in path.parts or path.name.startswith("test_")
            if in_tests:
                implemented |= _implemented_in(ast.parse(path.read_text(encoding="utf-8")))
    return [n for n in names if n not in implemented]


def test_the_hookspecs_are_found() -> None:
    names = [f.__name__ for f in HOOKS]
    assert "symi_memory_register_backends" in names and "symi_memory_config_defaults" in names
    assert len(names) == len(set(names)) >= 5


@pytest.mark.parametrize("hook", HOOKS, ids=lambda f: f.__name__)
def test_every_hook_is_documented(hook: Callable[..., Any]) -> None:
    assert hook_doc_problems(hook) == []


def test_the_documentation_check_catches_a_bare_hook() -> None:
    def symi_memory_undocumented(register: Any, extra: Any) -> None:
        """Does something.

        :param register: the callback.
        """

    assert hook_doc_problems(symi_memory_undocumented) == ["no ':param extra:' line", "no ':return:' line"]
    assert "no docstring" in hook_doc_problems(lambda: None)


def test_every_hook_is_mentioned_by_a_test() -> None:
    assert hooks_without_tests([f.__name__ for f in HOOKS]) == []
    assert hooks_without_tests(["symi_memory_no_such_hook"]) == ["symi_memory_no_such_hook"]


@pytest.mark.parametrize("name", sorted(gen.FILES))
def test_generated_reference_is_current(name: str) -> None:
    committed = REPO / "docs" / name
    assert committed.exists(), f"docs/{name} is missing; run `python docs/gen_reference.py`"
    assert committed.read_text(encoding="utf-8") == gen.FILES[name](), (
        f"docs/{name} is out of date; run `python docs/gen_reference.py` and commit the result"
    )


def test_every_config_key_has_a_doc_and_is_in_the_reference() -> None:
    keys = gen.config_keys()
    assert len(keys) > 50
    assert [k.path for k in keys if not k.doc.strip()] == []
    reference = (REPO / "docs" / "config-reference.md").read_text(encoding="utf-8")
    for path in ("agents.defaults.memorySearch.query.hybrid.vectorWeight", "plugins.slots.memory",
                 "memory.qmd.limits.maxInjectedChars", "agents.defaults.compaction.memoryFlush.softThresholdTokens"):
        assert f"`{path}`" in reference


def test_paths_named_in_the_docs_exist() -> None:
    pattern = re.compile(r"`((?:core|plugins|contrib|tests|docs|bench)/[\w./-]+)`")
    missing = []
    for doc in sorted((REPO / "docs").glob("*.md")):
        for rel in pattern.findall(doc.read_text(encoding="utf-8")):
            if not (REPO / rel.rstrip("/")).exists():
                missing.append(f"{doc.name}: {rel}")
    assert missing == []


def test_no_merge_conflict_markers_are_left() -> None:
    """A merge left ``<<<<<<< HEAD`` in a docstring once (``help(MemoryManager.explain)`` showed both sides)."""
    marker = re.compile(r"^(<{7} |={7}$|>{7} )", re.M)
    files = [REPO / "README.md"] + [p for top in ("core", "plugins", "contrib", "docs", "bench", "tests")
                                    for p in sorted((REPO / top).rglob("*"))
                                    if p.suffix in {".py", ".md", ".toml", ".html", ".js"} and p.is_file()]
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}" for m in marker.finditer(text)]
    assert found == []


def test_architecture_names_every_core_module_with_its_job() -> None:
    """docs/architecture.md's module map has a row for each core module (or its package folder)."""
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([\w./]+)` \| (.+?) \|$", doc, re.MULTILINE))
    core = REPO / "core" / "symi_memory"
    missing = []
    for path in sorted(core.rglob("*.py")):
        rel = str(path.relative_to(REPO))
        folder = str(path.parent.relative_to(REPO)) + "/"
        if path.name in ("__init__.py", "__main__.py") and path.parent != core and rel not in rows:
            continue  # a package's own module: its folder or its modules have rows
        if rel not in rows and folder not in rows:
            missing.append(rel)
    assert missing == []
    assert all(job.strip() for job in rows.values())
