"""The core's typed config model: the defaults of spec/behaviour.md §1 that the core owns.

Sections that belong to a builtin plugin (``memorySearch.local``,
``memorySearch.remote``, ``memorySearch.store.faiss``, ``memory.qmd`` and the
rerank API keys) are declared by that plugin through
``symi_memory_register_config_sections`` and mounted by
:mod:`symi_memory.config.extend`.

Field names are snake_case; each field's config key (camelCase, as written in
config files) is in its metadata. ``docs/config-reference.md`` is generated
from this module, so it cannot drift.

The models validate and fill defaults; their instances are read field by
field (:func:`~symi_memory.config.fields.to_dict`, ``AgentView.settings``),
never compared or printed, so attrs writes no ``__eq__``/``__repr__`` for them:
that halves the cost of building each class, and every command builds them
all when it loads the config.
"""

from __future__ import annotations

import attrs

from .fields import opt, section

__all__ = [
    "AgentDefaults",
    "AgentsSection",
    "CompactionSection",
    "MemorySearch",
    "MemorySection",
    "PluginsSection",
    "RootConfig",
]

# ---------------------------------------------------------------- memorySearch


@attrs.define(kw_only=True, eq=False, repr=False)
class StoreVector:
    enabled: bool = opt("enabled", True, doc="Use sqlite-vec for vectors; false: exact in-process cosine.")
    extension_path: str | None = opt("extensionPath", None, kind="str", doc="Load sqlite-vec from this file instead of the bundled one.")
    scan: str = opt("scan", "auto", choices=("auto", "float32", "float16", "int8"),
                    doc="Exact scan copy in memory: int8 (a quarter of the memory and bandwidth, needs faiss) or "
                        "float16 (half, needs faiss), whose candidates are rescored against the stored float32 "
                        "vectors (every chunk the rounding could have misplaced, so results are the float32 "
                        "scan's), float32, or auto (int8 from 8,192 vectors when faiss is installed; below "
                        "50,000 it also keeps the float32 rows in memory and rescores from them). An int8 copy "
                        "that does not keep the float32 rows (auto from 50,000 vectors, or int8) keeps, up to "
                        "262,144 rows, a residual int8 code per value (the codes' memory again), which narrows "
                        "the rescoring to about the k best chunks.")
    scan_threads: int = opt("scanThreads", 1, lo=1, hi=2, clamp=True,
                            doc="Threads one search's quantized scan runs on for 50,000 vectors or more: 2 holds "
                                "the copy in two halves searched at once (faiss releases the GIL; never more "
                                "than the CPUs the process may use), which shortens the scan on an idle "
                                "multi-core host and costs a little more CPU; 1 keeps it on the searching "
                                "thread (on a busy shared host the second half waits for a core). A hybrid "
                                "search already scans on a second thread beside its keyword side when a core "
                                "is free: on 2 cores, 2 then only adds CPU.")
    unit_weight: float = opt("unitWeight", 0.7, lo=0.0, hi=1.0, clamp=True,
                             doc="How much a chunk's best line (chunking.units) counts in its vector score: "
                                 "(1 - w) x chunk cosine + w x max(chunk cosine, best unit cosine); 0 uses chunk "
                                 "vectors alone, 1 the better of the two.")


@attrs.define(kw_only=True, eq=False, repr=False)
class Store:
    path: str = opt("path", "{stateDir}/memory/{agentId}.sqlite", doc="Index file; {agentId}, {stateDir} and ~ are expanded.")
    vector: StoreVector = section(StoreVector, "vector")


@attrs.define(kw_only=True, eq=False, repr=False)
class Chunking:
    tokens: int = opt("tokens", 400, lo=8, hi=100_000, doc="Target chunk size in tokens (4 characters each).")
    overlap: int = opt("overlap", 80, lo=0, hi=100_000, clamp=True, doc="Overlap in tokens; clamped to [0, tokens-1].")
    units: str = opt("units", "lines", choices=("lines", "pairs", "off"),
                     doc="Finer units embedded inside each chunk, so a question matching one line of a long chunk "
                         "finds it: lines (each line of two or more words), pairs (each such line with the next), "
                         "or off (chunk vectors only; less disk and index time). Changing it rebuilds the index in "
                         "the background; the builtin SQLite engine only.")


@attrs.define(kw_only=True, eq=False, repr=False)
class SyncSessions:
    delta_bytes: int = opt("deltaBytes", 100_000, lo=0, doc="Reindex a transcript once it grew by this many bytes.")
    delta_messages: int = opt("deltaMessages", 50, lo=0, doc="... or by this many JSONL lines.")


@attrs.define(kw_only=True, eq=False, repr=False)
class Sync:
    on_session_start: bool = opt("onSessionStart", True, doc="Sync on the first search of a session key.")
    on_search: bool = opt("onSearch", True, doc="Start a background sync when a search finds the index dirty.")
    watch: bool = opt("watch", True, doc="Watch memory files and sync after changes.")
    watch_debounce_ms: int = opt("watchDebounceMs", 1500, lo=0, hi=86_400_000, doc="Watcher debounce.")
    interval_minutes: float = opt("intervalMinutes", 0, kind="float", lo=0, hi=525_600, doc="Periodic sync; 0 is off.")
    max_file_bytes: int = opt("maxFileBytes", 10_000_000, lo=1,
                              doc="Markdown files larger than this are skipped (listed in status `skipped`). A session "
                                  "transcript is read a line at a time and keeps its newest messages, up to this many "
                                  "bytes of text, whole chunks of them (status `partial` says when older ones are "
                                  "left out).")
    build_wait_seconds: int = opt("buildWaitSeconds", 1800, lo=0, hi=31_536_000,
                                  doc="How long an explicit sync (`symi-memory index`, MemoryManager.sync(), the "
                                      "server's sync) waits for another live process's full build of the same index "
                                      "before it gives up with an error naming that process (the build goes on); "
                                      "0 gives up at once. A dead builder is never waited for. `index --build-wait` "
                                      "overrides it.")
    append_wait_seconds: float = opt("appendWaitSeconds", 300, kind="float", lo=0, hi=31_536_000,
                                     doc="How long an append (memory_append, `symi-memory append`) waits in all for "
                                         "another append to the same workspace that is still alive (it indexes its "
                                         "note; a provider call that hangs keeps it alive) before it gives up with "
                                         "an error naming that process (pid, how long it has held the lock); "
                                         "nothing is written then and the other append goes on. A stopped or dead "
                                         "holder is given up on after 30 s whatever this says.")
    sessions: SyncSessions = section(SyncSessions, "sessions")


@attrs.define(kw_only=True, eq=False, repr=False)
class Mmr:
    enabled: bool = opt("enabled", False, doc="Diversify results with Maximal Marginal Relevance.")
    lambda_: float = opt("lambda", 0.7, lo=0.0, hi=1.0, clamp=True, doc="1 = pure relevance, 0 = max diversity.")


@attrs.define(kw_only=True, eq=False, repr=False)
class TemporalDecay:
    enabled: bool = opt("enabled", False, doc="Decay scores of dated notes by age.")
    half_life_days: float = opt("halfLifeDays", 30.0, lo=1.0, clamp=True, doc="Score halves every this many days (at least 1).")


@attrs.define(kw_only=True, eq=False, repr=False)
class MonthCue:
    enabled: bool = opt("enabled", True, doc="A query naming a month (\"in May\", \"early June 2026\") favours the "
                                             "dated notes (memory/YYYY-MM-DD*.md) of that month. See "
                                             "docs/search-scores.md.")
    boost: float = opt("boost", 0.4, lo=0.0, hi=5.0, clamp=True,
                       doc="Added to the log-odds of such a note's score (0.4: 0.10 becomes 0.14); 0 turns it off.")


@attrs.define(kw_only=True, eq=False, repr=False)
class Supersession:
    enabled: bool = opt("enabled", True, doc="Demote a hit that a newer memory restates or changes, and mark it supersededBy.")
    window: int = opt("window", 20, lo=2, hi=200, clamp=True, doc="How many of the best candidates are compared.")


@attrs.define(kw_only=True, eq=False, repr=False)
class Synonyms:
    enabled: bool = opt("enabled", True,
                        doc="Local synonyms: a query word that no indexed chunk holds is matched on the keyword side "
                            "through the index's words of like meaning (\"Portugal\" finds a note about Lisbon). "
                            "The indexer keeps a vector of each distinct word it indexes (with the embedding "
                            "provider), only for a model whose threshold is known (measured: local "
                            "all-MiniLM-L6-v2) or set in minCosine; false: no word vectors, no expansion. "
                            "See docs/search-scores.md.")
    min_cosine: float | None = opt("minCosine", None, kind="float", lo=0.0, hi=1.0,
                                   doc="Least word-to-word cosine for an index word to stand in for a query word. "
                                       "Unset: the threshold measured for the provider's model (0.45 for local "
                                       "all-MiniLM-L6-v2); a model without one (other local models, remote "
                                       "providers) keeps no word vectors and expands nothing unless this is set. "
                                       "Cosine scales differ by model: measure before setting it.")
    max_words: int = opt("maxWords", 50_000, lo=0, hi=10_000_000,
                         doc="At most this many word vectors are kept (1.5 KB each at 384 dimensions, all loaded "
                             "by every searching process). A full vocabulary takes no new words; the words held "
                             "by the most chunks go in first. Lowered, the words added last are dropped at the "
                             "next sync that indexes a change; raised, the next sync adds the words left out; "
                             "0: no word vectors.")


@attrs.define(kw_only=True, eq=False, repr=False)
class Hybrid:
    enabled: bool = opt("enabled", True, doc="Combine keyword and vector search; false: vector only.")
    vector_weight: float = opt("vectorWeight", 0.45, lo=0.0, hi=1.0, clamp=True, doc="Weight of the vector side's log-odds (normalised with textWeight); the spec says 0.7, see docs/search-scores.md.")
    text_weight: float = opt("textWeight", 0.55, lo=0.0, hi=1.0, clamp=True, doc="Weight of the keyword side's log-odds; the spec says 0.3, see docs/search-scores.md.")
    candidate_multiplier: int = opt("candidateMultiplier", 4, lo=1, hi=20, clamp=True, doc="Candidates per side = maxResults x this (max 200).")
    fusion: str = opt("fusion", "weighted", choices=("weighted", "rrf"), doc="weighted (each side's calibrated log-odds, weighted and summed; see docs/search-scores.md) or rrf (reciprocal rank fusion, normalised to 0..1).")
    rrf_k: int = opt("rrfK", 60, lo=1, hi=10_000, doc="RRF constant k.")
    mmr: Mmr = section(Mmr, "mmr")
    temporal_decay: TemporalDecay = section(TemporalDecay, "temporalDecay")
    supersession: Supersession = section(Supersession, "supersession")
    month_cue: MonthCue = section(MonthCue, "monthCue")
    synonyms: Synonyms = section(Synonyms, "synonyms")


@attrs.define(kw_only=True, eq=False, repr=False)
class Rerank:
    provider: str = opt("provider", "none", doc="Reranker name (cohere, voyage, jina, or a plugin's); none disables.")
    top_n: int = opt("topN", 20, lo=1, hi=1000, doc="How many fused candidates the reranker sees.")


@attrs.define(kw_only=True, eq=False, repr=False)
class Query:
    max_results: int = opt("maxResults", 6, lo=1, hi=200, clamp=True, doc="Results returned by memory_search.")
    min_score: float = opt("minScore", 0.015, lo=0.0, hi=1.0, clamp=True, doc="Drop results whose final score (a calibrated probability of relevance) is below this; the spec says 0.35, see docs/search-scores.md.")
    hybrid: Hybrid = section(Hybrid, "hybrid")
    rerank: Rerank = section(Rerank, "rerank")
    stage_deadline_ms: int = opt("stageDeadlineMs", 5000, lo=0, hi=600_000, doc="How long a search waits for a reranker call or a third-party post-processor's call (run on a worker thread); past it the search answers without that stage and names it in its warnings, and one still running is not called again until it returns. 0: no deadline, called on the searching thread.")


@attrs.define(kw_only=True, eq=False, repr=False)
class Cache:
    enabled: bool = opt("enabled", True, doc="Cache chunk embeddings in the index.")
    max_entries: int = opt("maxEntries", 50_000, lo=1, doc="Vectors beyond this many are pruned on every sync, least recently used first; the vectors the index refers to are never pruned (the cache is where they are stored).")


@attrs.define(kw_only=True, eq=False, repr=False)
class Experimental:
    session_memory: bool = opt("sessionMemory", False, doc="Allow indexing session transcripts (with sources).")


@attrs.define(kw_only=True, eq=False, repr=False)
class MemorySearch:
    enabled: bool = opt("enabled", True, doc="false: no memory tools are exposed.")
    provider: str = opt("provider", "auto", doc="Embedding provider: auto, openai, gemini, voyage, local, none, or a plugin's name.")
    fallback: str = opt("fallback", "none", doc="Provider used when the primary fails: openai, gemini, voyage, local, none.")
    model: str | None = opt("model", None, kind="str", doc="Embedding model; unset: the provider's default.")
    sources: list = opt("sources", ["memory"], item="str", choices=("memory", "sessions"),
                        doc='What to index: "memory", "sessions".')
    extra_paths: list = opt("extraPaths", [], item="str", doc="More Markdown files or directories (absolute or workspace-relative).")
    experimental: Experimental = section(Experimental, "experimental")
    store: Store = section(Store, "store")
    chunking: Chunking = section(Chunking, "chunking")
    sync: Sync = section(Sync, "sync")
    query: Query = section(Query, "query")
    cache: Cache = section(Cache, "cache")


# ------------------------------------------------------------------ compaction


@attrs.define(kw_only=True, eq=False, repr=False)
class MemoryFlush:
    enabled: bool = opt("enabled", True, doc="Run the pre-compaction memory flush.")
    soft_threshold_tokens: int = opt("softThresholdTokens", 4000, lo=0, doc="Flush this many tokens before the compaction point.")
    system_prompt: str | None = opt("systemPrompt", None, kind="str", doc="Override the flush system prompt.")
    prompt: str | None = opt("prompt", None, kind="str", doc="Override the flush user prompt.")


@attrs.define(kw_only=True, eq=False, repr=False)
class CompactionSection:
    reserve_tokens_floor: int = opt("reserveTokensFloor", 20_000, lo=0, doc="Tokens kept free for compaction.")
    memory_flush: MemoryFlush = section(MemoryFlush, "memoryFlush")


@attrs.define(kw_only=True, eq=False, repr=False)
class AgentDefaults:
    workspace: str | None = opt("workspace", None, kind="str", doc="Agent workspace; default <stateDir>/workspace.")
    context_window: int = opt("contextWindow", 200_000, lo=1, doc="Context window when the runtime does not say.")
    user_timezone: str | None = opt("userTimezone", None, kind="str", doc="IANA zone for daily-log dates; default the system's.")
    memory_search: MemorySearch = section(MemorySearch, "memorySearch")
    compaction: CompactionSection = section(CompactionSection, "compaction")


@attrs.define(kw_only=True, eq=False, repr=False)
class AgentsSection:
    defaults: AgentDefaults = section(AgentDefaults, "defaults")
    list_: list = opt("list", [], doc="Per-agent overrides: entries with an id plus any agents.defaults keys.")


# ---------------------------------------------------------------------- memory


@attrs.define(kw_only=True, eq=False, repr=False)
class MemorySection:
    backend: str | None = opt("backend", None, kind="str", choices=("builtin", "qmd", "faiss"), doc="Legacy backend switch; plugins.slots.memory wins. Default builtin.")
    citations: str = opt("citations", "auto", choices=("auto", "on", "off"), doc="Add a Source: footer to snippets.")


# --------------------------------------------------------------------- plugins


@attrs.define(kw_only=True, eq=False, repr=False)
class Slots:
    memory: str | None = opt("memory", None, kind="str", doc='Memory backend plugin; default builtin-sqlite; "none" disables memory.')


@attrs.define(kw_only=True, eq=False, repr=False)
class PluginsSection:
    slots: Slots = section(Slots, "slots")
    disabled: list = opt("disabled", [], item="str", doc="Plugin ids (entry-point names) not to load.")
    entries: dict = opt("entries", {}, doc="Per-plugin settings, keyed by plugin id (plugins contribute defaults).")


# ----------------------------------------------------------------------- serve


@attrs.define(kw_only=True, eq=False, repr=False)
class ServeSection:
    host: str = opt("host", "127.0.0.1", doc="Address `symi-memory serve` binds; anything but loopback needs serve.token.")
    port: int = opt("port", 0, lo=0, hi=65535, doc="TCP port; 0 picks a free one (recorded in <stateDir>/serve.json).")
    token: str | None = opt("token", None, kind="str", doc="Bearer token clients must send (else $SYMI_SERVE_TOKEN); required off loopback.")
    idle_minutes: float = opt("idleMinutes", 30, kind="float", lo=0, doc="Close an agent's manager after this long without requests; 0 keeps it open.")
    max_body_bytes: int = opt("maxBodyBytes", 1_000_000, lo=1024, doc="Larger request bodies are refused (413).")
    max_response_bytes: int = opt("maxResponseBytes", 4_000_000, lo=1024, doc="Results are trimmed to stay below this many bytes.")
    agents: list = opt("agents", [], item="str", doc="Agents opened (and watched) at start-up; others open on first use.")
    client_timeout_seconds: float = opt("clientTimeoutSeconds", 30, kind="float", lo=1, doc="A request's head must arrive within this long, else the connection is closed; its body may not stall this long, nor average under 1 KiB/s after it (408); a client reading its answer at under 1 KiB/s for this long is cut off.")
    first_sync_wait_seconds: float = opt("firstSyncWaitSeconds", 30, kind="float", lo=0, doc="A request for an agent with no index yet waits this long for its first sync, then gets 503 with Retry-After (the build goes on); an agent with an index answers from it at once while it catches up.")
    first_sync_retry_seconds: float = opt("firstSyncRetrySeconds", 5, kind="float", lo=0.1, doc="An agent's first sync that fails (an index it cannot write, a disk full, a folder not mounted yet) is tried again after this long, the wait doubling with each failure up to 5 minutes; meanwhile its answers warn and status shows firstSync.state = failed.")
    mcp_max_sessions: int = opt("mcpMaxSessions", 100, lo=1, doc="MCP sessions kept at once; one more closes the one idle longest (refused 503 when all are busy).")
    mcp_session_idle_minutes: float = opt("mcpSessionIdleMinutes", 30, kind="float", lo=0, doc="Close an MCP session after this long without requests (its client starts a new one); 0 never.")
    inspector: bool = opt("inspector", True, doc="Serve the read-only inspector page at /.")


@attrs.define(kw_only=True, eq=False, repr=False)
class RootConfig:
    agents: AgentsSection = section(AgentsSection, "agents")
    memory: MemorySection = section(MemorySection, "memory")
    plugins: PluginsSection = section(PluginsSection, "plugins")
    models: dict = opt("models", {}, doc="Model providers: models.providers.<name>.{apiKey, baseUrl, headers}.")
    serve: ServeSection = section(ServeSection, "serve", doc="`symi-memory serve`: the warm memory service.")
