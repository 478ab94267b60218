"""Plugins use the core's public API only: no plugin or contrib file reaches for an underscore name."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _is_core(module: str | None) -> bool:
    return module is not None and (module == "symi_memory" or module.startswith("symi_memory."))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(source: str) -> list[str]:
    """Underscore names a module takes from ``symi_memory``: imported, in a module path, or as an attribute."""
    tree = ast.parse(source)
    found: list[str] = []
    core_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_core(node.module):
            assert node.module is not None
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"line {node.lineno}: from {node.module}")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"line {node.lineno}: {node.module}.{alias.name}")
                core_names.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_core(alias.name):
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"line {node.lineno}: import {alias.name}")
                    core_names.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in core_names:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def _plugin_files() -> list[Path]:
    files = [*sorted((REPO / "plugins").rglob("*.py")), *sorted((REPO / "contrib").rglob("*.py"))]
    return [p for p in files if ".venv" not in p.parts and "build" not in p.parts]


def test_no_plugin_or_contrib_file_uses_an_underscore_name_from_symi_memory() -> None:
    files = _plugin_files()
    assert len(files) > 40 and any("contrib" in p.parts for p in files)
    problems = {str(p.relative_to(REPO)): found for p in files if (found := private_uses(p.read_text(encoding="utf-8")))}
    assert problems == {}


def test_the_scan_catches_each_way_of_reaching_a_private_name() -> None:
    assert private_uses("from symi_memory.config.fields import _meta, opt\n") == ["line 1: symi_memory.config.fields._meta"]
    assert private_uses("from symi_memory._secret import x\n") == ["line 1: from symi_memory._secret"]
    assert private_uses("import symi_memory.plugins as p\np._pick(1)\n") == ["line 2: p._pick"]
    assert private_uses("from symi_memory import plugins\nplugins._KINDS\n") == ["line 2: plugins._KINDS"]
    # Its own private names, dunders and other packages are fine.
    assert private_uses("from .x import _mine\nimport attrs\nattrs._make\nfrom symi_memory import __version__\n") == []


def test_the_engine_pieces_a_backend_reuses_have_documented_names_and_cost_nothing_to_import() -> None:
    import subprocess
    import sys

    import symi_memory.index as engine
    from symi_memory.index.backend import IndexedBackend, assemble_backend
    from symi_memory.index.indexer import Indexer
    from symi_memory.index.store import IndexStore
    from symi_memory.index.vectors import ExactVectors

    assert [getattr(engine, n) for n in engine.__all__] == [ExactVectors, IndexStore, IndexedBackend, Indexer,
                                                            assemble_backend]
    code = "import sys, symi_memory.index; print(sorted(m for m in ('apsw', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
