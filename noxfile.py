"""Developer sessions: ``nox -l`` lists them, ``nox -s NAME`` runs one.

The README's test command and ``.ci/run`` run the same suite as ``tests``.
"""

from __future__ import annotations

import tempfile
import tomllib
import zipfile
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
PYTHON = "3.11"
CONFORMANCE_BACKENDS = ["builtin-sqlite", "faiss", "in-memory"]
# The contrib test installs the example plugin offline with --no-build-isolation,
# so hatchling must be importable wherever the suite runs.
BUILD_BACKEND = "hatchling>=1.21"

nox.options.sessions = ["lint", "typecheck", "docs", "tests", "contrib"]


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole test suite, with every optional extra installed."""
    session.install("-e", ".[local,multilingual,faiss,mcp,dev]", BUILD_BACKEND)
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
@nox.parametrize("backend", CONFORMANCE_BACKENDS)
def conformance(session: nox.Session, backend: str) -> None:
    """The backend conformance suite against one backend, as a third party would run it."""
    session.install(".[faiss]" if backend == "faiss" else ".", "pytest", "pytest-timeout")
    # Run from outside the checkout so the installed package, not the source tree, is tested.
    with tempfile.TemporaryDirectory() as tmp:
        session.chdir(tmp)
        session.run("pytest", "-p", "no:cacheprovider", "--pyargs", "symi_memory.testing.conformance",
                    "--symi-backend", backend, *session.posargs)


@nox.session(python=PYTHON)
def contrib(session: nox.Session) -> None:
    """Install each contrib plugin next to symi-memory and run its own tests."""
    session.install(".", "pytest")
    for project in sorted(ROOT.glob("contrib/*/pyproject.toml")):
        # --no-deps: the plugin's symi-memory dependency is this checkout, not PyPI.
        session.install("--no-deps", str(project.parent))
        session.run("pytest", str(project.parent / "tests"), "-p", "no:cacheprovider", *session.posargs)
        session.run("symi-memory", "plugins")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff over the whole repository."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".", *session.posargs)


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy over the core package."""
    session.install("-e", ".[dev]")
    session.run("mypy", "core/symi_memory", *session.posargs)


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Fail when docs/config-reference.md or docs/hooks.md differ from what the code generates."""
    session.install("-e", ".")
    session.run("python", "docs/gen_reference.py", "--check")


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Build the wheel and check that every plugin package and data file is inside it."""
    session.install("build")
    with tempfile.TemporaryDirectory() as out:
        session.run("python", "-m", "build", "--wheel", "--outdir", out, str(ROOT))
        wheels = list(Path(out).glob("symi_memory-*.whl"))
        if len(wheels) != 1:
            session.error(f"expected one symi_memory wheel in {out}, found {[w.name for w in wheels]}")
        problems = check_wheel(wheels[0])
        if problems:
            session.error("the wheel is incomplete:\n  " + "\n  ".join(problems))
        session.log(f"{wheels[0].name}: every package, data file and entry point is present")


def check_wheel(wheel: Path) -> list[str]:
    """What the wheel lacks compared with pyproject.toml and the source tree."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry_points = next((zf.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt")), "")
    problems = []
    for package in project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]:
        source = ROOT / package
        top = source.name
        for path in sorted(source.rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            inside = f"{top}/{path.relative_to(source).as_posix()}"
            if inside not in names:
                problems.append(f"missing {inside} (from {path.relative_to(ROOT)})")
    for name, target in project["project"]["entry-points"]["symi_memory"].items():
        if f"{name} = {target}" not in entry_points:
            problems.append(f"entry point symi_memory:{name} = {target} is not declared in the wheel")
    return problems
