"""Printing ``search``, ``get`` and ``status`` answers (standard library only: the server path shares it)."""

from __future__ import annotations

import json
import os
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["color", "print_explain", "print_get", "print_history", "print_json", "print_search", "print_status", "visible"]

#: What a terminal acts on instead of showing: C0 controls but tab and newline, DEL, and the C1 controls.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with the control characters a terminal would act on shown as ``\\x1b`` and the like; tabs and
    newlines stay. Memory text and file names come from whoever wrote them (a note an agent copied off a web page):
    an escape sequence in one must not retitle, clear or rewrite the terminal of whoever reads the output."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def color(text: str, code: str) -> str:
    if not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        return text
    return f"\033[{code}m{text}\033[0m"


#: The command's own stdout while a ``--json`` command runs with ``sys.stdout`` pointed at stderr (see
#: :func:`json_to_stdout_only`); empty otherwise.
_json_out: list[Any] = []


def json_stream() -> Any:
    """Where a JSON answer is printed: the command's stdout, also while ``sys.stdout`` is diverted."""
    return _json_out[-1] if _json_out else sys.stdout


class json_to_stdout_only:  # noqa: N801 (used as a context manager, like contextlib's)
    """While a ``--json`` command runs: what anything else prints to ``sys.stdout`` (a plugin's stray ``print``)
    goes to stderr, so stdout holds the JSON answer alone and stays parseable. ``print_json`` writes to the
    command's stdout."""

    def __enter__(self) -> None:
        _json_out.append(sys.stdout)
        sys.stdout = sys.stderr

    def __exit__(self, *exc: object) -> None:
        if sys.stdout is sys.stderr:  # not if the command replaced it since (a closed pipe: the null device)
            sys.stdout = _json_out[-1]
        _json_out.pop()


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False), file=json_stream())


def print_explain(out: dict[str, Any]) -> None:
    """``explain`` for people: one row per candidate, its score after each stage, and its outcome."""
    stages = [s for s in out.get("stages", []) if s != "final"]
    rows = out.get("candidates", [])
    resp = out.get("response") or {}
    print(f"{len(rows)} candidate(s), {len(resp.get('results', []))} returned; mode {resp.get('mode')}, minScore "
          f"{out.get('minScoreApplied')}, maxResults {out.get('maxResults')}")
    print("stages: " + " > ".join([*stages, "final"]))
    for c in rows:
        final = (c["stages"].get("final") or {}).get("score")
        head = f"{final:.3f}" if isinstance(final, (int, float)) else "  -  "
        print(f"{head}  {visible(c['path'])}:{c['startLine']}-{c['endLine']}  {visible(str(c.get('outcome', '')))}")
        parts = [f"keyword {c['keyword']:.3f}" if c.get("keyword") is not None else "keyword -",
                 f"vector {c['vector']:.3f}" if c.get("vector") is not None else "vector -"]
        for stage in stages:
            got = c["stages"].get(stage)
            parts.append(f"{stage} {got['score']:.3f}" if got else f"{stage} -")
        print("       " + ", ".join(parts))
    for why in out.get("skipped") or ():
        print(f"skipped: {visible(str(why))}")


def print_search(out: dict[str, Any], *, as_json: bool, via: str | None = None) -> int:
    """The ``search`` output for ``memory_search`` tool JSON; the exit code."""
    if as_json:
        print_json(out)
        return 1 if out.get("error") else 0
    if out.get("error"):
        print(f"symi-memory: error: {out['error']}", file=sys.stderr)
        return 1
    meta = f"mode {out['mode']}, provider {out['provider']}" + (f" ({out['model']})" if out.get("model") else "")
    if via:
        meta += f", {via}"
    print(color(f"{len(out['results'])} result(s); {meta}", "2"))
    for hit in out["results"]:
        where = visible(f"{hit['path']}:{hit['startLine']}-{hit['endLine']}")
        print(f"{color(format(hit['score'], '.3f'), '32')}  {color(where, '1')}")
        for line in hit["snippet"].strip().splitlines()[:4]:
            print(f"       {visible(line[:110])}")
        sup = hit.get("supersededBy")
        if sup:
            print(color(visible(f"       superseded by {sup['path']}:{sup['startLine']}"), "33"))
    for warning in out.get("warnings") or []:  # a reranker or post-processor skipped for this search
        print(color(visible(f"warning: {warning}"), "33"), file=sys.stderr)
    return 0


def _stage(entry: dict[str, Any]) -> str:
    """One reranker or post-processor of ``status``: its name, plugin and how its last call went."""
    text = f"{entry.get('name')} ({entry.get('plugin')})"
    if entry.get("active") is False:
        return f"{text}: not used, {entry.get('reason') or 'unavailable'}"
    last = entry.get("lastCall")
    if last is not None:
        text += f", last call {last}" + (f": {entry['lastReason']}" if entry.get("lastReason") else "")
    if entry.get("hung"):
        text += " (still running)"
    return text


def print_history(found: list[dict[str, Any]], *, as_json: bool, warnings: Sequence[str] = ()) -> int:
    """The ``history`` output for :meth:`MemoryManager.history`'s versions and the stages it skipped (its
    ``warnings``, in the JSON when there is one, on stderr as a search's); the exit code."""
    if as_json:
        print_json({"versions": list(found), **({"warnings": list(warnings)} if warnings else {})})
        return 0
    if not found:
        print("no versions found")
    for v in found:
        mark = color("current", "32") if v["current"] else color("older  ", "2")
        where = visible(f"{v['path']}:{v['startLine']}")
        print(f"{v['date'] or '?':<10}  {mark}  {color(where, '1')}  {visible(v['text'][:100])}")
    for warning in warnings:  # a reranker or post-processor skipped while finding the fact
        print(color(visible(f"warning: {warning}"), "33"), file=sys.stderr)
    return 0


def print_get(out: dict[str, Any], path: str, *, as_json: bool) -> int:
    """The ``get`` output for ``memory_get`` tool JSON; the exit code. The text is written as it is, unless
    stdout is a terminal: then its control characters are shown escaped (:func:`visible`)."""
    if as_json:
        print_json(out)
    elif out.get("error"):
        print(f"symi-memory: error: {visible(path)}: {visible(out['error'])}", file=sys.stderr)
    else:
        text = visible(out["text"]) if sys.stdout.isatty() else out["text"]
        sys.stdout.write(text + ("" if text.endswith("\n") or not text else "\n"))
    return 1 if out.get("error") else 0


def _first_sync(first: dict[str, Any]) -> str:
    if first.get("error") is None:
        step = f" ({first.get('phase')} {first.get('done')}/{first.get('total')})" if first.get("total") else ""
        return f"catching up with its files{step}, started {first.get('seconds')} s ago"
    when = ("being tried again now" if first.get("state") == "retrying"
            else f"tried again in {first.get('retryInSeconds')} s")
    return f"failed ({first.get('failures')} tries): {first.get('error')}; {when}"


def print_status(st: dict[str, Any], *, as_json: bool) -> int:
    if as_json:
        print_json(st)
        return 0
    rows = [("backend", f"{st.get('backend')} ({st.get('plugin')})")]
    for key in ("workspaceDir", "dbPath", "files", "chunks", "dirty", "provider", "model"):
        if key in st:
            # A count the index cannot give (its file is damaged: lastError says so) is unknown, not "None".
            rows.append((key, "unknown" if st[key] is None and key in ("files", "chunks") else str(st[key])))
    if st.get("providerReason"):
        rows.append(("providerReason", st["providerReason"]))
    for key in ("vector", "fts", "cache", "fallback", "fallbackIndex", "index"):
        if isinstance(st.get(key), dict):
            rows.append((key, ", ".join(f"{k}={v}" for k, v in st[key].items() if v is not None)))
    build = st.get("build")
    if isinstance(build, dict) and build.get("running"):
        who = "this process" if build.get("thisProcess") else (
            f"process {build['pid']}" if build.get("pid") is not None else "another process")
        if build.get("elsewhere"):
            who += " in another container or on another host"
        since = f" since {build['startedAt']}" if build.get("startedAt") else ""
        rows.append(("build", f"a full build is running in {who}{since} ({build.get('fileBytes')} bytes written "
                              "so far); searches use the index as it is until it lands"))
    sup = st.get("supersession")
    if isinstance(sup, dict):
        state = "applied" if sup.get("applied") else ("off" if not sup.get("enabled") else "not applied")
        rows.append(("supersession", "; ".join([state, *sup.get("unavailable", [])])))
    syn = st.get("synonyms")
    if isinstance(syn, dict):
        if syn.get("active"):
            state = (f"active: {syn.get('words')} word vectors (maxWords {syn.get('maxWords')}), "
                     f"minCosine {syn.get('minCosine'):g} ({syn.get('minCosineSource')})")
        else:
            state = f"not active: {syn.get('reason')}"
        rows.append(("synonyms", state))
    slots = st.get("slots")
    if isinstance(slots, dict):
        rows.append(("slots", ", ".join(f"{slot} {held['name']} ({held.get('plugin')})"
                                        for slot, held in slots.items() if isinstance(held, dict)) or "none"))
    if "reranker" in st:
        rows.append(("reranker", _stage(st["reranker"]) if isinstance(st["reranker"], dict) else "none"))
    if "postprocessors" in st:
        rows.append(("postprocessors", "; ".join(_stage(p) for p in st["postprocessors"]) or "none"))
    if st.get("skipped"):
        rows.append(("skipped", ", ".join(s["path"] for s in st["skipped"])))
    for part in st.get("partial") or []:
        rows.append(("partial", f"{part['path']}: {part['reason']}"))
    server = st.get("server")
    if isinstance(server, dict) and "available" in server:  # a backend's database server (postgres)
        if server["available"]:
            rows.append(("server", f"available{', version ' + str(server['version']) if server.get('version') else ''}"))
        else:
            state = "unreachable" if server.get("reachable") is False else "unavailable"
            rows.append(("server", f"{state}: {server.get('error')}"))
    elif isinstance(server, dict):
        served = ", ".join(f"{k} {v}" for k, v in (server.get("requests") or {}).items())
        rows.append(("server", f"{server.get('url')} (pid {server.get('pid')}); answered {served or 'nothing yet'}"))
    first = st.get("firstSync")
    if isinstance(first, dict):  # the server's first sync of this agent, still running or failed
        rows.append(("firstSync", _first_sync(first)))
    if st.get("lastError"):
        rows.append(("lastError", str(st["lastError"])))
    rows.extend(("warning", str(w)) for w in st.get("warnings") or [])
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{color(k.rjust(width), '2')}  {visible(v)}")
    return 0
