"""``config show|get|set|unset``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..config import CONFIG_NAMES, find_config_file, validate_raw
from ..config.edit import parse_cli_value, set_key, to_toml, unset_key
from ..errors import ConfigError
from .app import App


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("config", help="show or edit configuration")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    s = csub.add_parser("show", help="the effective config, defaults included")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=run_show)
    g = csub.add_parser("get", help="one value by dotted key, e.g. memory.citations")
    g.add_argument("key")
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=run_get)
    st = csub.add_parser("set", help="set a key in the config file (typed, validated, atomic)")
    st.add_argument("key")
    st.add_argument("value", help="JSON/TOML literal (10, true, [\"a\"]) or a plain string")
    st.set_defaults(func=run_set)
    u = csub.add_parser("unset", help="remove a key from the config file")
    u.add_argument("key")
    u.set_defaults(func=run_unset)


def _target(app: App) -> Path:
    from ..config import default_state_dir

    sd = default_state_dir(app.args.state_dir)
    found = find_config_file(app.args.config, sd)
    return found if found is not None else sd / CONFIG_NAMES[0]


def run_show(args: argparse.Namespace, app: App) -> int:
    data = app.config.data
    print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else to_toml(data), end="" if not args.json else "\n")
    return 0


def run_get(args: argparse.Namespace, app: App) -> int:
    try:
        value = app.config.get(args.key)
    except KeyError:
        raise ConfigError(f"{args.key}: no such config key; see `symi-memory config show`") from None
    if args.json or isinstance(value, dict | list) or value is None:
        print(json.dumps(value, ensure_ascii=False))
    else:
        print(str(value).lower() if isinstance(value, bool) else value)
    return 0


def _validator(path: Path) -> Any:
    return lambda raw: validate_raw(raw, str(path))


def run_set(args: argparse.Namespace, app: App) -> int:
    path = _target(app)
    set_key(path, args.key, parse_cli_value(args.value), validate=_validator(path))
    print(f"{args.key} = {args.value}  ({path})")
    return 0


def run_unset(args: argparse.Namespace, app: App) -> int:
    path = _target(app)
    unset_key(path, args.key, validate=_validator(path))
    print(f"unset {args.key}  ({path})")
    return 0
