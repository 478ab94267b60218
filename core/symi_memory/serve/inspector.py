"""The inspector: one server-rendered page with a little JavaScript, no external assets.

Read-only: it calls the ``explain``, ``files``, ``status`` and ``eval``
endpoints and never writes. Everything shown comes from the JSON API, and
every value is inserted as text (``textContent``), never as HTML.
"""

from __future__ import annotations

import html

__all__ = ["render_page"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:16px;align-items:center}
header h1{font-size:17px;margin:0;font-weight:600}
header select{font:inherit}
main{padding:14px 20px;display:grid;gap:16px;grid-template-columns:minmax(0,3fr) minmax(0,2fr)}
section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:12px 14px}
section h2{font-size:15px;margin:0 0 8px}
#search-form{display:flex;gap:8px;margin-bottom:8px}
#q{flex:1;font:inherit;padding:5px 8px;border:1px solid #b8bfca;border-radius:4px}
button{font:inherit;padding:5px 12px;border-radius:4px;border:1px solid #3a66c4;background:#3a66c4;color:#fff;cursor:pointer}
table{border-collapse:collapse;width:100%;font-size:12.5px}
th,td{text-align:left;padding:3px 6px;border-bottom:1px solid #eceef2;vertical-align:top}
th{font-weight:600;color:#525b6b;background:#fafbfc}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.cut td{color:#8a91a0}
.tag{display:inline-block;border-radius:3px;padding:0 5px;font-size:11.5px;white-space:nowrap}
.returned,.indexed{background:#dcf3e3;color:#176532}
.below,.skipped,.removed{background:#fbe2e2;color:#8b1d1d}
.beyond,.pending,.changed,.new,.dropped{background:#fdf0d2;color:#7a5200}
.muted{color:#6b7383}
#meta,#status{font-size:12.5px;margin-bottom:6px}
.scroll{max-height:420px;overflow:auto;border:1px solid #eceef2}
td.when{white-space:nowrap}
.note{font-size:11px;color:#7a5200;white-space:normal;text-align:right}
.warn{color:#7a5200;white-space:pre-line}
.bar{fill:#3a66c4}.bar2{fill:#9db5e8}
"""

_JS = """
const AGENT = document.body.dataset.agent;
const api = (p) => `/api/agents/${encodeURIComponent(AGENT)}/${p}`;
const $ = (id) => document.getElementById(id);
const stamp = (t) => { const d = new Date(t * 1000), p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`; };
const fmt = (v) => (v === null || v === undefined) ? '–' : (typeof v === 'number' ? v.toFixed(3) : String(v));
function cell(tr, text, cls) { const td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); return td; }
function tag(td, text, cls) { const s = document.createElement('span'); s.className = 'tag ' + cls; s.textContent = text; td.textContent = ''; td.appendChild(s); }
async function getJSON(url, body) {
  const opts = body ? {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)} : {};
  const r = await fetch(url, opts); const data = await r.json();
  if (!r.ok) throw new Error(data.error || ('HTTP ' + r.status));
  return data;
}
async function runSearch(ev) {
  if (ev) ev.preventDefault();
  const q = $('q').value.trim(); if (!q) return;
  $('meta').textContent = 'searching…'; $('warnings').textContent = '';
  try {
    const asOf = $('asof').value;
    const d = await getJSON(api('explain'), asOf ? {query: q, asOf: asOf} : {query: q});
    const r = d.response;
    $('meta').textContent = `${r.results.length} returned of ${d.candidates.length} candidates · mode ${r.mode} · provider ${r.provider}` +
      (r.model ? ` (${r.model})` : '') + ` · fusion ${d.fusion.method} (vector ${d.fusion.vectorWeight}, text ${d.fusion.textWeight})` +
      ` · minScore ${fmt(d.minScore)} · maxResults ${d.maxResults}` + (asOf ? ` · as of ${asOf}` : '') +
      (r.fallback ? ` · fallback from ${r.fallback.from}` : '');
    // What the search skipped or left out (a query cut, a stage skipped, an agent still catching up with its files
    // or whose first sync failed): all in the search answer's warnings.
    $('warnings').textContent = (r.warnings || []).map(w => 'warning: ' + w).join('\\n');
    const extra = d.stages.filter(s => s !== 'fused' && s !== 'final');
    const head = $('hits-head'); head.textContent = '';
    const hr = document.createElement('tr');
    for (const h of ['#', 'file', 'keyword', 'vector', 'fused', ...extra, 'final', 'outcome']) { const th = document.createElement('th'); th.textContent = h; hr.appendChild(th); }
    head.appendChild(hr);
    const body = $('hits'); body.textContent = '';
    for (const c of d.candidates) {
      const tr = document.createElement('tr'); tr.className = c.outcome === 'returned' ? 'hit' : 'cut';
      const fin = c.stages.final || {};
      cell(tr, fin.rank ?? '–', 'num');
      cell(tr, `${c.path}:${c.startLine}-${c.endLine}`);
      cell(tr, fmt(c.keyword), 'num'); cell(tr, fmt(c.vector), 'num');
      cell(tr, fmt((c.stages.fused || {}).score), 'num');
      extra.forEach((s, i) => {
        const st = c.stages[s]; const td = cell(tr, st ? `${fmt(st.score)} (#${st.rank})` : '–', 'num');
        const by = st && st.supersededBy;
        const before = (i > 0 ? c.stages[extra[i - 1]] : c.stages.fused) || {};
        if (by && !before.supersededBy) {  // the stage that demoted it says by what
          const n = document.createElement('div'); n.className = 'note';
          n.textContent = `superseded by ${by.path}:${by.startLine}`; td.appendChild(n);
        }
      });
      cell(tr, fmt(fin.score), 'num');
      const cls = {returned: 'returned', 'below minScore': 'below', 'beyond maxResults': 'beyond', 'same lines as a better hit': 'beyond'}[c.outcome] || 'dropped';
      tag(cell(tr, ''), c.outcome, cls);
      body.appendChild(tr);
    }
  } catch (e) { $('meta').textContent = 'error: ' + e.message; }
}
async function loadFiles() {
  try {
    const d = await getJSON(api('files'));
    const s = d.status;
    const sync = d.lastSync ? `last sync ${stamp(d.lastSync.at)} (${d.lastSync.reason || 'sync'}, ${d.lastSync.filesIndexed ?? '?'} indexed)` : 'no sync by this server yet';
    $('status').textContent = `${s.files} files · ${s.chunks} chunks · provider ${s.provider}` + (s.model ? ` (${s.model})` : '') +
      (s.fallback ? ` · fallback from ${s.fallback.from}: ${s.fallback.reason}` : '') +
      (s.providerReason ? ` · ${s.providerReason}` : '') + ` · ${s.dirty ? 'changes pending' : 'up to date'} · ${sync}`;
    const body = $('files'); body.textContent = '';
    for (const f of d.files) {
      const tr = document.createElement('tr');
      cell(tr, f.path); tag(cell(tr, ''), f.state, f.state);
      cell(tr, f.chunks ?? '–', 'num');
      cell(tr, f.mtime ? stamp(f.mtime) : '–', 'when');
      cell(tr, f.reason || '', 'muted');
      body.appendChild(tr);
    }
  } catch (e) { $('status').textContent = 'error: ' + e.message; }
}
async function loadEval() {
  const box = $('eval');
  try {
    const d = await getJSON('/api/eval');
    if (!d.result) { box.textContent = d.hint || 'no eval results yet'; return; }
    const per = d.result.per_type || {}; const k = (d.result.settings || {}).k || 10;
    const types = Object.keys(per);
    const W = 440, rowH = 22, left = 110, H = rowH * types.length + 30;
    const NS = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(NS, 'svg'); svg.setAttribute('width', W); svg.setAttribute('height', H); svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', `hit@1 and hit@${k} per query type`);
    types.forEach((t, i) => {
      const y = 8 + i * rowH; const m = per[t];
      const label = document.createElementNS(NS, 'text'); label.setAttribute('x', 0); label.setAttribute('y', y + 13); label.setAttribute('font-size', 12); label.textContent = t; svg.appendChild(label);
      const hk = m[`hit@${k}`]; const h1 = m['hit@1'];
      if (hk === null || hk === undefined) { const n = document.createElementNS(NS, 'text'); n.setAttribute('x', left); n.setAttribute('y', y + 13); n.setAttribute('font-size', 11); n.textContent = 'n/a (negative queries)'; svg.appendChild(n); return; }
      const scale = W - left - 90;
      const b2 = document.createElementNS(NS, 'rect'); b2.setAttribute('class', 'bar2'); b2.setAttribute('x', left); b2.setAttribute('y', y + 2); b2.setAttribute('height', 14); b2.setAttribute('width', Math.max(1, hk * scale)); svg.appendChild(b2);
      const b1 = document.createElementNS(NS, 'rect'); b1.setAttribute('class', 'bar'); b1.setAttribute('x', left); b1.setAttribute('y', y + 2); b1.setAttribute('height', 14); b1.setAttribute('width', Math.max(1, (h1 || 0) * scale)); svg.appendChild(b1);
      const v = document.createElementNS(NS, 'text'); v.setAttribute('x', left + hk * scale + 4); v.setAttribute('y', y + 13); v.setAttribute('font-size', 11); v.textContent = `${hk.toFixed(2)} / ${(h1 || 0).toFixed(2)}`; svg.appendChild(v);
    });
    const legend = document.createElementNS(NS, 'text'); legend.setAttribute('x', left); legend.setAttribute('y', H - 4); legend.setAttribute('font-size', 11);
    legend.textContent = `light: hit@${k}, dark: hit@1`; svg.appendChild(legend);
    box.textContent = '';
    const o = d.result.overall || {};
    const p = document.createElement('div'); p.className = 'muted';
    p.textContent = `${d.dataset || ''} · ${d.at ? stamp(d.at) : ''} · ${o.queries} queries · hit@${k} ${fmt(o[`hit@${k}`])} · MRR ${fmt(o['mrr@10'])}`;
    box.appendChild(p); box.appendChild(svg);
  } catch (e) { box.textContent = 'error: ' + e.message; }
}
$('search-form').addEventListener('submit', runSearch);
$('agent').addEventListener('change', (e) => { location.search = '?agent=' + encodeURIComponent(e.target.value); });
loadFiles(); loadEval();
"""


def render_page(*, agent: str, agents: list[str]) -> str:
    options = "".join(
        f'<option value="{html.escape(a)}"{" selected" if a == agent else ""}>{html.escape(a)}</option>' for a in agents
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>symi-memory inspector · {html.escape(agent)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>
<body data-agent="{html.escape(agent)}">
<header><h1>symi-memory inspector</h1><label>agent <select id="agent">{options}</select></label>
<span class="muted">read-only</span></header>
<main>
<section id="search-section"><h2>Search, explained</h2>
<form id="search-form"><input id="q" name="q" placeholder="query, as an agent would ask" autocomplete="off">
<label class="muted">as of <input id="asof" name="asof" type="date"></label>
<button type="submit">Explain</button></form>
<div id="meta" class="muted">Each candidate's keyword and vector score, its fused score, the score after each
post-processor (decay, supersession, MMR, …) and what as of, minScore and maxResults cut.</div>
<div id="warnings" class="warn"></div>
<table><thead id="hits-head"></thead><tbody id="hits"></tbody></table></section>
<section><h2>Files and freshness</h2><div id="status" class="muted">loading…</div>
<div class="scroll"><table><thead><tr><th>file</th><th>state</th><th>chunks</th><th>modified</th><th>why</th></tr>
</thead><tbody id="files"></tbody></table></div>
<h2 style="margin-top:14px">Last eval</h2><div id="eval" class="muted">loading…</div></section>
</main>
<script>{_JS}</script>
</body></html>"""
