"""Malformed configs: every clearly invalid config file must exit 2 with one line.

    python bench/reliability/configs.py [--subprocess 40] [--show 5]

Generates invalid configs from the typed model (every scalar key gets values
of the wrong type, NaN, infinities, out-of-range numbers where the key is not
clamped, bad durations...) plus structural breakage (``agents = []``, files
that are not UTF-8, JSON nested 900 deep, syntax errors), written as TOML,
JSON and JSON5 in turn. Each one runs ``symi-memory --config FILE status
--json`` in-process (``--subprocess N`` also runs N of them as real
processes and reports whether the two agree). Prints how many exited 2 with
one line, printed a traceback, were silently accepted (exit 0), or did
something else, and how many one-line errors name the bad key.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import math
import random
import subprocess
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from symi_memory.config.fields import _meta
from symi_memory.config.schema import RootConfig

NAN, INF = float("nan"), float("inf")


def full_schema() -> type:
    """The config model with the installed plugins' sections (older versions: the core's alone)."""
    from symi_memory.plugins import load_plugins

    plugins = load_plugins()
    return plugins.schema() if hasattr(plugins, "schema") else RootConfig


def scalar_keys(cls: type | None = None, prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    cls = cls or full_schema()
    out = []
    for f in attrs.fields(cls):
        meta = _meta(f)
        path = f"{prefix}.{meta['key']}" if prefix else meta["key"]
        if meta["kind"] == "section":
            out += scalar_keys(meta["cls"], path)
        else:
            out.append((path, meta))
    return out


def bad_values(meta: dict[str, Any]) -> list[Any]:
    kind = meta["kind"]
    if kind == "bool":
        return ["yes", 1, [True], {"a": 1}]
    if kind in ("int", "float"):
        vals: list[Any] = ["many", True, [1], NAN, INF, -INF, 10**400]
        if kind == "int":
            vals.append(1.5)
        if not meta["clamp"]:
            if meta["lo"] is not None:
                vals.append(meta["lo"] - 1)
            if meta["hi"] is not None:
                vals.append(meta["hi"] + 1)
        return vals
    if kind == "duration":
        return ["5 minutes", -1, INF, 1e305, "9" * 400, "abc", True, [], "-5m"]
    if kind == "str":
        vals = [5, [], {"a": 1}]
        if meta["choices"]:
            vals.append("bogus-choice")
        return vals
    if kind == "list":
        vals = ["x", 5, {"a": 1}]
        if meta.get("item") == "str":
            vals.append([1, 2])
        return vals
    if kind == "dict":
        return ["x", 5, [1]]
    return []


def nest(path: str, value: Any) -> dict[str, Any]:
    out: Any = value
    for part in reversed(path.split(".")):
        out = {part: out}
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == INF else "-inf" if v == -INF else repr(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def to_toml(path: str, value: Any) -> str:
    *table, key = path.split(".")
    head = f"[{'.'.join(table)}]\n" if table else ""
    return f"{head}{json.dumps(key) if '-' in key else key} = {_toml_value(value)}\n"


def to_json(data: Any) -> str:
    return json.dumps(data, allow_nan=True)  # NaN/Infinity: what a hand-written JSON5 file may hold


def generate(out: Path) -> list[tuple[str, Path, str]]:
    """``(case name, file, key it is about)`` for every invalid config."""
    cases: list[tuple[str, Path, str]] = []
    n = 0

    def add(name: str, suffix: str, text: str | bytes, key: str = "") -> None:
        nonlocal n
        n += 1
        p = out / f"c{n:04d}{suffix}"
        p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        cases.append((name, p, key))

    fmt = 0
    for path, meta in scalar_keys():
        if path.startswith("agents.defaults.memorySearch.") and "list" in path:
            pass
        for value in bad_values(meta):
            fmt += 1
            name = f"{path} = {value!r}"[:90]
            if fmt % 3 == 0:
                try:
                    add(name, ".toml", to_toml(path, value), path)
                    continue
                except TypeError:
                    pass
            if fmt % 3 == 1:
                add(name, ".json", to_json(nest(path, value)), path)
            else:
                add(name, ".json5", to_json(nest(path, value)), path)
    structural = {
        "agents = []": ({"agents": []}, "agents"),
        'agents = "x"': ({"agents": "x"}, "agents"),
        "agents.list = 5": ({"agents": {"list": 5}}, "agents.list"),
        'agents.list = "x"': ({"agents": {"list": "x"}}, "agents.list"),
        "agents.list = [5]": ({"agents": {"list": [5]}}, "agents.list[0]"),
        "agents.list = [{}]": ({"agents": {"list": [{}]}}, "agents.list[0]"),
        "agents.list[0].id = 5": ({"agents": {"list": [{"id": 5}]}}, "agents.list[0].id"),
        "agents.list[0] unknown key": ({"agents": {"list": [{"id": "a", "bogus": 1}]}}, "agents.list[0].bogus"),
        "agents.list[0].memorySearch.minScore = nan": (
            {"agents": {"list": [{"id": "a", "memorySearch": {"query": {"minScore": NAN}}}]}}, "minScore"),
        "agents.defaults = 5": ({"agents": {"defaults": 5}}, "agents.defaults"),
        "plugins = 5": ({"plugins": 5}, "plugins"),
        "plugins.disabled = 'x'": ({"plugins": {"disabled": "recency-boost"}}, "plugins.disabled"),
        "plugins.slots.memory = nope": ({"plugins": {"slots": {"memory": "nope"}}}, "plugins.slots.memory"),
        "provider = nope": ({"agents": {"defaults": {"memorySearch": {"provider": "nope"}}}}, "provider"),
        "fallback = nope": ({"agents": {"defaults": {"memorySearch": {"fallback": "nope"}}}}, "fallback"),
        "rerank.provider = nope": (
            {"agents": {"defaults": {"memorySearch": {"query": {"rerank": {"provider": "nope"}}}}}}, "rerank"),
        "memory.backend = nope": ({"memory": {"backend": "nope"}}, "memory.backend"),
        "top-level unknown key": ({"bogus": 1}, "bogus"),
        "memorySearch unknown key": ({"agents": {"defaults": {"memorySearch": {"bogus": 1}}}}, "bogus"),
        "memory.qmd.paths = [{}]": ({"memory": {"qmd": {"paths": [{}]}}}, "memory.qmd.paths"),
    }
    for i, (name, (data, key)) in enumerate(structural.items()):
        for suffix in (".json", ".json5"):
            add(name, suffix, to_json(data), key)
        if i % 2 == 0:
            with contextlib.suppress(TypeError):
                add(name, ".toml", "\n".join(f"{k} = {_toml_value(v)}" for k, v in data.items()) + "\n", key)
    # Files that are not configs at all.
    for suffix in (".toml", ".json", ".json5"):
        add("not UTF-8", suffix, b"\xff\xfe\x00bad \xe9\n", "")
        add("top level is a list", suffix, "[1, 2]" if suffix != ".toml" else "x = [1, 2\n", "")
        add("syntax error", suffix, "{ agents: " if suffix != ".toml" else "[agents\n", "")
    add("JSON nested 900 deep", ".json", '{"a":' * 900 + "1" + "}" * 900, "")
    add("JSON5 nested 900 deep", ".json5", '{"a":' * 900 + "1" + "}" * 900, "")
    add("JSON nested 40 deep", ".json", json.dumps(nest(".".join(["agents"] + ["x"] * 39), 1)), "")
    add("TOML nested arrays 900 deep", ".toml", "a = " + "[" * 900 + "]" * 900 + "\n", "")
    add("JSON 5000-digit number", ".json", '{"agents": {"defaults": {"contextWindow": ' + "9" * 5000 + "}}}", "")
    return cases


class _LiveStderr(logging.Handler):
    """Writes log records to whatever ``sys.stderr`` is at the time (so redirection captures them)."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(f"symi-memory: {record.levelname}: {record.getMessage()}\n")


def run_inprocess(cfg: Path, state: Path, ws: Path) -> tuple[int | str, str]:
    from symi_memory.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code: int | str = main(["--config", str(cfg), "--state-dir", str(state), "--workspace", str(ws),
                                    "status", "--json"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:
            code = "traceback"
            err.write(traceback.format_exc())
    return code, err.getvalue()


def run_subprocess(cfg: Path, state: Path, ws: Path) -> tuple[int | str, str]:
    proc = subprocess.run([sys.executable, "-m", "symi_memory.cli", "--config", str(cfg), "--state-dir", str(state),
                           "--workspace", str(ws), "status", "--json"], capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr


def classify(code: int | str, err: str) -> str:
    if code == "traceback" or "Traceback (most recent call last)" in err:
        return "traceback"
    if code == 0:
        return "accepted"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("symi-memory: error:")]
    if code == 2 and len(errors) == 1:
        return "one line, exit 2"
    return f"other (exit {code}, {len(errors)} error lines)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subprocess", type=int, default=0, help="also run this many cases as real processes")
    ap.add_argument("--show", type=int, default=5, help="print this many examples of each bad outcome")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, handlers=[_LiveStderr()])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "cfg").mkdir()
        ws = root / "ws"
        (ws / "memory").mkdir(parents=True)
        cases = generate(root / "cfg")
        outcome: Counter[str] = Counter()
        examples: dict[str, list[str]] = {}
        named = 0
        results = {}
        for i, (name, path, key) in enumerate(cases):
            code, err = run_inprocess(path, root / f"state{i % 4}", ws)
            kind = classify(code, err)
            results[path] = kind
            outcome[kind] += 1
            if kind == "one line, exit 2":
                leaf = key.rsplit(".", 1)[-1].split("[")[0] if key else ""
                if not leaf or leaf in err:
                    named += 1
                else:
                    examples.setdefault("error does not name the key", []).append(f"{name}: {err.strip()[:200]}")
            else:
                examples.setdefault(kind, []).append(f"{name} ({path.suffix}): {err.strip().splitlines()[-1:] }")
        print(f"invalid configs: {len(cases)}")
        for kind, count in sorted(outcome.items(), key=lambda kv: -kv[1]):
            print(f"  {kind}: {count}")
        print(f"  one-line errors naming the key: {named} of {outcome['one line, exit 2']}")
        print(f"  traceback / silently accepted: {outcome['traceback']} / {outcome['accepted']}")
        for kind, lines in examples.items():
            print(f"-- {kind} (first {args.show}):")
            for line in lines[: args.show]:
                print("   ", line)
        if args.subprocess:
            rng = random.Random(14)
            sample = rng.sample(cases, min(args.subprocess, len(cases)))
            agree = 0
            for name, path, _key in sample:
                code, err = run_subprocess(path, root / "state-sub", ws)
                kind = classify(code, err)
                agree += kind == results[path]
                if kind != results[path]:
                    print(f"   subprocess differs: {name}: {kind} vs {results[path]}: {err.strip()[-200:]}")
            print(f"subprocess check: {agree} of {len(sample)} agree with the in-process run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
