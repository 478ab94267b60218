"""``symi-memory plugins``: what is installed and what each plugin registered."""

from __future__ import annotations

import argparse
from typing import Any

from ..plugins import load_plugins
from .app import App

KIND_LABELS = {"backends": "backends", "embeddingProviders": "providers", "rerankers": "rerankers",
               "postprocessors": "post-processors"}


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("plugins", help="list installed plugins and what they register")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, app: App) -> int:
    plugins = app.config.plugins or load_plugins(app.config.data["plugins"]["disabled"])
    infos = plugins.infos()
    disabled = plugins.disabled_infos()
    if args.json:
        # Disabled plugins are listed too, with "disabled": true and nothing registered; so are the ones that failed
        # to load, with nothing registered and "error" saying why (what the listing without --json shows).
        listed = [i.to_dict() for i in [*infos, *disabled]]
        for pid, why in plugins.failed.items():
            dist, _, error = why.partition(": ")
            listed.append({"id": pid, "distribution": dist, "version": "?",
                           "registers": {kind: [] for kind in KIND_LABELS}, "disabled": False, "error": error})
        app.print_json(sorted(listed, key=lambda d: d["id"]))
        return 0
    width = max((len(i.id) for i in [*infos, *disabled]), default=4)
    for info in infos:
        regs = "; ".join(f"{KIND_LABELS[k]}: {', '.join(v)}" for k, v in info.registers.items() if v)
        print(f"{app.color(info.id.ljust(width), '1')}  {info.distribution} {info.version}  {regs or '-'}")
    for info in disabled:
        print(f"{app.color(info.id.ljust(width), '2')}  {info.distribution} {info.version}  disabled (plugins.disabled)")
    for pid, why in sorted(plugins.failed.items()):
        print(f"{app.color(pid.ljust(width), '31')}  failed to load: {why}")
    return 0
