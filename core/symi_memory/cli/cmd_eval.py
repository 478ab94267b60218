"""``eval DATASET``: retrieval quality of the active configuration on a labelled dataset."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import ConfigError
from .app import App


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("eval", help="score retrieval on a dataset (devmem format) as configured; uses a throwaway index")
    p.add_argument("dataset", help="dataset folder with workspace/ and queries.jsonl")
    p.add_argument("--json", action="store_true", help="the same JSON as the dataset's score.py --json")
    p.add_argument("--now", default=None, metavar="DATE", help="clock for temporal decay (default: each query's now)")
    p.add_argument("--min-score", type=float, default=None, metavar="X",
                   help="score threshold instead of the configured minScore; 0 gives the ranking view (10 results)")
    p.add_argument("-n", type=int, default=None, metavar="N",
                   help="results per query (at least 10) instead of the configured maxResults")
    p.add_argument("--queries", default="queries.jsonl", metavar="FILE",
                   help="query file inside the dataset (devmem: queries.jsonl or asof.jsonl)")
    p.add_argument("--results-out", default=None, metavar="FILE", help="write each query's hits (run format)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, app: App) -> int:
    try:
        from ..evaluation import format_table, run_eval
    except ImportError as exc:  # pragma: no cover
        raise ConfigError(f"eval is unavailable: {exc}") from exc
    from .cmd_memory import _Bar

    progress = _Bar(sys.stderr) if sys.stderr.isatty() else None
    if args.min_score is not None and not 0.0 <= args.min_score <= 1.0:
        raise ConfigError(f"--min-score {args.min_score:g}: use a number from 0 to 1")
    result = run_eval(args.dataset, config=app.config, now=args.now, n=args.n, min_score=args.min_score,
                      results_out=args.results_out, progress=progress,
                      queries=args.queries)
    _keep_last(app, args.dataset, args.queries, result)
    if args.json:
        app.print_json(result)
    else:
        print(format_table(result))
    return 0


def _keep_last(app: App, dataset: str, queries: str, result: dict[str, Any]) -> None:
    """Keep the result in ``<stateDir>/eval/last.json`` for the ``serve`` inspector (best effort)."""
    import json
    import logging
    import os
    import time
    from pathlib import Path

    from ..serve.record import eval_record_path

    path = Path(eval_record_path(app.config.state_dir))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"dataset": os.path.abspath(dataset), "queries": queries, "at": time.time(),
                                   "result": result}),
                       encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        logging.getLogger("symi_memory.cli").warning("could not keep the eval result in %s: %s", path, exc)
