"""``symi-memory plugins``: what is installed, what each plugin registered, and which serve this agent."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from ..plugins import load_plugins, resolve_backend_name
from .app import App

KIND_LABELS = {"backends": "backends", "embeddingProviders": "providers", "rerankers": "rerankers",
               "postprocessors": "post-processors"}
#: The slots ``status()["slots"]`` names, as the listing labels them.
SLOT_LABELS = {"memory": "memory backend", "embeddingProvider": "embedding provider", "reranker": "reranker"}

log = logging.getLogger("symi_memory.cli")


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("plugins", help="list installed plugins, what they register and which are active")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def active_by_plugin(app: App) -> tuple[dict[str, dict[str, Any]], str | None]:
    """``{plugin id: {slot: name, "postprocessors": [names]}}``: what ``status`` says serves this agent (its
    ``slots`` and running ``postprocessors``), and why the listing fell back to the config alone (memory could
    not be opened) or None."""
    out: dict[str, dict[str, Any]] = {}
    note = None
    try:
        st = app.manager().status()
        slots = st.get("slots") or {}
        procs = st.get("postprocessors") or []
    except Exception as exc:  # the listing still answers: the slots as config names them
        note = f"memory could not be opened ({type(exc).__name__}: {exc}); active slots as config names them"
        log.debug("plugins: %s", note)
        data = app.config.data
        plugins = app.config.plugins
        owners = plugins.owners if plugins is not None else {}
        name = resolve_backend_name(data)
        ms = data["agents"]["defaults"]["memorySearch"]
        provider = ms.get("provider") or "auto"
        rerank = ms["query"]["rerank"].get("provider") or "none"
        slots = {
            "memory": {"name": name, "plugin": owners.get("backends", {}).get(name or "")} if name else None,
            "embeddingProvider": ({"name": provider, "plugin": owners.get("embeddingProviders", {}).get(provider)}
                                  if provider not in ("auto", "none") else None),
            "reranker": {"name": rerank, "plugin": owners.get("rerankers", {}).get(rerank)} if rerank != "none"
            else None,
        }
        procs = []
    for slot, held in slots.items():
        if isinstance(held, dict) and held.get("plugin"):
            out.setdefault(held["plugin"], {})[slot] = held["name"]
    for proc in procs:
        # Running for sure: built by a search in this process, or its plugin's ``running`` check says so (one
        # without that check is not known to run before a search builds it).
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
