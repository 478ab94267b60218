"""``symi-memory plugins``: what is installed, what each plugin registered, and which serve this agent."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import SymiMemoryError
from ..manager import configured_slots, configured_stages
from ..plugins import load_plugins, resolve_backend_name
from .app import App

KIND_LABELS = {"backends": "backends", "embeddingProviders": "providers", "rerankers": "rerankers",
               "postprocessors": "post-processors"}
#: The slots ``status()["slots"]`` names, as the listing labels them.
SLOT_LABELS = {"memory": "memory backend", "embeddingProvider": "embedding provider", "reranker": "reranker"}


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("plugins", help="list installed plugins, what they register and which are active")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def active_by_plugin(app: App) -> tuple[dict[str, dict[str, Any]], str | None]:
    """``{plugin id: {slot: name, "postprocessors": [names]}}``: the plugins serving this agent's slots and its
    post-processors running, as ``status`` names them before a search (its ``slots``, ``reranker`` and
    ``postprocessors``), from config alone: the listing opens no memory (it creates no index and starts no
    backend). An embedding provider chosen by ``provider = "auto"`` is known once memory opens: the note (second
    value) says so, else None."""
    out: dict[str, dict[str, Any]] = {}
    config = app.config
    plugins = config.plugins if config.plugins is not None else load_plugins(config.data["plugins"]["disabled"])
    try:
        ms = config.agent(app.args.agent, workspace=app.args.workspace).memory_search
    except SymiMemoryError as exc:  # the listing still answers: what is installed
        return out, f"no active plugins marked: {exc}"
    provider = ms.get("provider") or "auto"
    name = resolve_backend_name(config.data) if ms["enabled"] else None
    slots = configured_slots(plugins, ms, name, None if provider in ("auto", "none") or name is None else provider)
    note = None
    if name is not None and provider == "auto":
        note = "embedding provider auto: symi-memory status names the one chosen"
    for slot, held in slots.items():
        if isinstance(held, dict) and held.get("plugin"):
            out.setdefault(held["plugin"], {})[slot] = held["name"]
    procs = configured_stages(plugins, ms)["postprocessors"] if name is not None else []
    for proc in procs:
        # Running for sure: its plugin's ``running`` check says so (one without that check is not known to run
        # before a search builds it).
        if proc.get("plugin") and proc.get("running"):
            out.setdefault(proc["plugin"], {}).setdefault("postprocessors", []).append(proc["name"])
    return out, note


def _marks(active: dict[str, Any]) -> str:
    said = [f"{SLOT_LABELS[slot]} {active[slot]}" for slot in SLOT_LABELS if slot in active]
    if active.get("postprocessors"):
        said.append(f"post-processors {', '.join(active['postprocessors'])}")
    return f"  [active: {'; '.join(said)}]" if said else ""


def run(args: argparse.Namespace, app: App) -> int:
    plugins = app.config.plugins or load_plugins(app.config.data["plugins"]["disabled"])
    infos = plugins.infos()
    disabled = plugins.disabled_infos()
    active, note = active_by_plugin(app)
    if args.json:
        # Disabled plugins are listed too, with "disabled": true and nothing registered; so are the ones that failed
        # to load, with nothing registered and "error" saying why (what the listing without --json shows).
        # "active": the slots each plugin serves for this agent (status's "slots") and its post-processors running.
        listed = [{**i.to_dict(), "active": active.get(i.id, {})} for i in [*infos, *disabled]]
        for pid, why in plugins.failed.items():
            dist, _, error = why.partition(": ")
            listed.append({"id": pid, "distribution": dist, "version": "?",
                           "registers": {kind: [] for kind in KIND_LABELS}, "disabled": False, "error": error,
                           "active": {}})
        app.print_json(sorted(listed, key=lambda d: d["id"]))
        return 0
    width = max((len(i.id) for i in [*infos, *disabled]), default=4)
    for info in infos:
        regs = "; ".join(f"{KIND_LABELS[k]}: {', '.join(v)}" for k, v in info.registers.items() if v)
        mark = _marks(active.get(info.id, {}))
        print(f"{app.color(info.id.ljust(width), '1')}  {info.distribution} {info.version}  {regs or '-'}"
              f"{app.color(mark, '32')}")
    for info in disabled:
        print(f"{app.color(info.id.ljust(width), '2')}  {info.distribution} {info.version}  disabled (plugins.disabled)")
    for pid, why in sorted(plugins.failed.items()):
        print(f"{app.color(pid.ljust(width), '31')}  failed to load: {why}")
    if note:
        print(app.color(f"note: {note}", "2"))
    return 0
