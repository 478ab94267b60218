"""``flush check|record|prompts``: the pre-compaction memory flush, for operators and scripts."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from .app import App, whole_arg


def _session(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"the session key must not be empty or blank, got {text!r}")
    return text


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("flush", help="decide on and record the pre-compaction memory flush")
    fsub = p.add_subparsers(dest="flush_command", metavar="ACTION", required=True)

    c = fsub.add_parser("check", help="should this session flush memory now?")
    c.add_argument("--session", required=True, type=_session, metavar="KEY")
    c.add_argument("--tokens", type=whole_arg(0), default=None, metavar="N", help="current session token estimate")
    c.add_argument("--context-window", type=whole_arg(0), default=None, metavar="N",
                   help="the model's context window in tokens; 0 (unknown) or leaving it out uses "
                        "agents.defaults.contextWindow")
    c.add_argument("--compactions", type=whole_arg(0), default=None, metavar="N", help="current compaction count")
    c.add_argument("--stale", action="store_true", help="the token count is not fresh")
    c.add_argument("--workspace-access", choices=("rw", "ro", "none"), default=None,
                   help="the sandbox's workspace access; ro and none mean no flush")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=run_check)

    r = fsub.add_parser("record", help="record that a flush ran in this compaction cycle")
    r.add_argument("--session", required=True, type=_session, metavar="KEY")
    r.add_argument("--compactions", type=whole_arg(0), default=None, metavar="N")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=run_record)

    pr = fsub.add_parser("prompts", help="print the flush system and user prompts")
    pr.add_argument("--json", action="store_true")
    pr.set_defaults(func=run_prompts)


def _settings(app: App) -> Any:
    from ..flush import FlushSettings

    agent = app.config.agent(app.args.agent, workspace=app.args.workspace)
    return agent, FlushSettings.from_config(agent.compaction, context_window=agent.context_window)


def run_check(args: argparse.Namespace, app: App) -> int:
    from ..flush import should_flush, workspace_writable
    from ..session_store import SessionStore

    agent, settings = _settings(app)
    store = SessionStore.for_agent(agent.state_dir, agent.id)
    given: dict[str, Any] = {}
    if args.tokens is not None:
        given["totalTokens"] = args.tokens
        given["totalTokensFresh"] = not args.stale
    elif args.stale:
        given["totalTokensFresh"] = False
    if args.compactions is not None:
        given["compactionCount"] = args.compactions
    # What the host reported is the session's state: keep it, so `flush record` marks this very
    # compaction cycle and the next check of the same cycle answers "already flushed".
    entry = store.update(args.session, given) if given else dict(store.get(args.session) or {})
    decision = should_flush(entry, settings, context_window=args.context_window,
                            workspace_writable=workspace_writable(agent.workspace, args.workspace_access))
    if args.json:
        app.print_json(decision.to_dict())
    else:
        verdict = app.color("flush now", "33") if decision.should_flush else "no flush"
        print(f"{verdict}: {decision.reason} (tokens {decision.total_tokens}, threshold {decision.threshold_tokens})")
    return 0


def run_record(args: argparse.Namespace, app: App) -> int:
    from ..session_store import SessionStore

    agent, _ = _settings(app)
    entry = SessionStore.for_agent(agent.state_dir, agent.id).record_flush(args.session, compaction_count=args.compactions)
    if args.json:
        app.print_json(entry)
    else:
        print(f"recorded flush for {args.session} (compaction cycle {entry.get('memoryFlushCompactionCount')})")
    return 0


def run_prompts(args: argparse.Namespace, app: App) -> int:
    from ..flush import build_flush_prompts

    agent, settings = _settings(app)
    prompts = build_flush_prompts(settings, now=datetime.now().astimezone(), tz=agent.user_timezone)
    if args.json:
        app.print_json({"system": prompts.system, "user": prompts.user})
    else:
        print(f"system: {prompts.system}\n\nuser: {prompts.user}")
    return 0
