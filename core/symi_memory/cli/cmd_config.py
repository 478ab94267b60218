"""``config show|get|set|unset``.

Values of secret-looking keys (``apiKey``, ``token``, ``secret``,
``password``, ...), every header value and the credentials inside a
``baseUrl`` or a database ``dsn`` print as ``***`` unless ``--show-secrets`` is given, so a pasted
``config show`` never leaks a key.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from ..config import CONFIG_NAMES, find_config_file
from ..errors import ConfigError
from ..host import validate_raw
from ..secrets import MASK, mask_dsn, mask_url
from .app import App

_SECRET_KEY = re.compile(r"api[_-]?key|token|secret|passw(or)?d|authorization|credential", re.IGNORECASE)


def _is_secret_key(name: str) -> bool:
    # Numbers (chunking.tokens, reserveTokensFloor) are never secrets; only string values get masked.
    return bool(_SECRET_KEY.search(name))


def mask_secrets(value: Any, key: str = "", *, in_headers: bool = False) -> Any:
    """``value`` with every non-empty string under a secret-looking key replaced by ``***``.

    Every value inside a ``headers`` table is masked (``X-Custom-Auth``,
    ``Ocp-Apim-Subscription-Key``... carry credentials under any name), and
    a ``baseUrl`` (or a ``dsn``) keeps its shape with its password and credential query
    values masked.
    """
    if isinstance(value, dict):
        inside = in_headers or key.lower() == "headers"
        return {k: mask_secrets(v, str(k), in_headers=inside) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v, key, in_headers=in_headers) for v in value]
    if isinstance(value, str) and value and (in_headers or _is_secret_key(key)):
        return MASK
    if isinstance(value, str) and value and key.lower().endswith("baseurl"):
        return mask_url(value)
    if isinstance(value, str) and value and key.lower().endswith("dsn"):
        return mask_dsn(value)  # a database's DSN (the postgres backend's) may hold its password
    return value


def _mask_key(value: Any, dotted: str) -> Any:
    """Mask the value found at a dotted key (``...headers.X-Custom-Auth`` is a header value)."""
    parts = dotted.split(".")
    in_headers = any(p.lower() == "headers" for p in parts[:-1])
    return mask_secrets(value, parts[-1], in_headers=in_headers)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("config", help="show or edit configuration")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    s = csub.add_parser("show", help="the effective config, defaults included")
    s.add_argument("--json", action="store_true")
    s.add_argument("--show-secrets", action="store_true", help="print API keys and tokens instead of ***")
    s.set_defaults(func=run_show)
    g = csub.add_parser("get", help="one value by dotted key, e.g. memory.citations")
    g.add_argument("key")
    g.add_argument("--json", action="store_true")
    g.add_argument("--show-secrets", action="store_true", help="print API keys and tokens instead of ***")
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
    from ..config.edit import to_toml

    data = app.config.data if args.show_secrets else mask_secrets(app.config.data)
    print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else to_toml(data), end="" if not args.json else "\n")
    return 0


def run_get(args: argparse.Namespace, app: App) -> int:
    try:
        value = app.config.get(args.key)
    except KeyError:
        raise ConfigError(f"{args.key}: no such config key; see `symi-memory config show`") from None
    if not args.show_secrets:
        value = _mask_key(value, args.key)
    if args.json or isinstance(value, dict | list) or value is None:
        print(json.dumps(value, ensure_ascii=False))
    else:
        print(str(value).lower() if isinstance(value, bool) else value)
    return 0


def _validator(path: Path) -> Any:
    return lambda raw: validate_raw(raw, str(path))


def run_set(args: argparse.Namespace, app: App) -> int:
    from ..config.edit import parse_cli_value, set_key

    path = _target(app)
    value = parse_cli_value(args.value)
    set_key(path, args.key, value, validate=_validator(path))
    masked = _mask_key(value, args.key)
    if masked == value:
        shown = args.value
    else:
        shown = json.dumps(masked, ensure_ascii=False) if isinstance(masked, dict | list) else masked
    print(f"{args.key} = {shown}  ({path})")
    return 0


def run_unset(args: argparse.Namespace, app: App) -> int:
    from ..config.edit import is_set, unset_key

    path = _target(app)
    if all(args.key.split(".")) and not is_set(path, args.key):  # a typo must not look like a reverted setting
        print(f"{args.key} is not set in {path}; nothing changed (`symi-memory config show` lists the keys)")
        return 0
    unset_key(path, args.key, validate=_validator(path))
    print(f"unset {args.key}  ({path})")
    return 0
