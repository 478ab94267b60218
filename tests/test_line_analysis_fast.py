"""The stored line analysis skips work that cannot change it (``line_analysis``'s fast path): it stores the
very bytes that applying every rule to every line gives, on lines made to reach each rule and each skip."""

from __future__ import annotations

import hashlib
import json
import random
import zlib
from pathlib import Path

from symi_memory.chronology import (
    _MONTH_STARTS,
    MONTH_DATE_RE,
    is_historical,
    line_dates,
    may_hold,
    own_moment,
)
from symi_memory.supersession import (
    LINE_ANALYSIS_VERSION,
    TOKEN_RE,
    _chunk_key,
    _content_lines,
    _own_date,
    _salient_of,
    _values_of,
    calendar_days,
    line_analysis,
    quantities,
    states_change,
)

WORDS = ("router dentist car hatchback standup deploy backups visit grandpa physio vitamin carriers flight school "
         "the a of at on in and is was will by to for since from now new no until used old before replaced "
         "previous formerly moved changed instead retired swapped sold raised dropped quit ended update became "
         "expected planned due scheduled deadline visiting booked early mid late end of kg ms IU GB minutes "
         "people x h").split()
ODD = ["İstanbul", "ınstead", "ſince", "ſeptember 2026", "Kelvin", "café", "Zürich", "—", "→", "٢٠٢٦-٠٧-١٥", "１２",
       "ſtopped", "İNSTEAD", "Previouſly", "MOVED", "No Longer", "Used To", "June 2026", "mid-June 2026",
       "end of May 2026", "Sept. 2025", "ſept 2026"]
TEMPLATES = [
    "- {date}: {w}", "{w} since {date}, {w}", "Until {date} the {w} was {ident}; now {ident2}", "Previous {w}: {w}",
    "{w} moved to {time} from {time2}", "{w} raised to {n} {unit} (was {n2} {unit})", "{w} is visiting from {date}",
    "expected {date}; {w} {n},{n2} {w}", "{w} on {md}, then {md2}", "{w} in {month} {year} {w}",
    "v{n}.{n2}.{n3} — {date}: {w}", "{w} {n}:{n2} and {n3}/{n2} {unit}", "No longer {w}; replaced by {ident}",
    "{w} {n}%{n2} v{n3} ,{n} a{n2},{n3} x-{n} 1.{n2} :{n3} /{n} {w}", "{ip} {ident} {w} {n}{unit}",
    "| {w} | {n} {unit} | {date} |", "{w}",
]
MONTHS = ["January", "june", "SEPTEMBER", "Sept", "sep", "Dec", "May", "mar"]


def corpus(n: int = 700, seed: int = 13) -> list[tuple[str, int, str]]:
    """Chunks of 1-10 lines made to reach every rule of the analysis (and every shortcut past one): dates
    (valid and not), month dates, plans, clock times, quantities after spaces, commas, letters and ``v``,
    versions, past states, change words in any letter case, "History" headings, the four non-ASCII letters
    that match ASCII ones when case is ignored, non-ASCII digits, dated and undated paths."""
    rng = random.Random(seed)

    def date() -> str:
        return f"{rng.choice([2025, 2026, 1999])}-{rng.randint(1, 13):02d}-{rng.randint(1, 32):02d}"

    def words() -> str:
        return " ".join(rng.choice(WORDS) if rng.random() > 0.1 else rng.choice(ODD) for _ in range(rng.randint(1, 7)))

    def line() -> str:
        text = rng.choice(TEMPLATES).format(
            date=date(), w=words(), ident=f"kessler-{rng.randint(1, 99)}.eu", ident2=f"CT_{rng.randint(100, 999)}",
            time=f"{rng.randint(0, 23):02d}:{rng.choice([0, 45]):02d}", time2=f"{rng.randint(0, 23):02d}:15",
            n=rng.randint(0, 3000), n2=rng.randint(0, 99), n3=rng.randint(0, 9),
            unit=rng.choice(["kg", "ms", "%", "GB", "minutes", "IU", "people", "", "h"]),
            md=f"{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}", md2=f"{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}",
            month=rng.choice(MONTHS), year=rng.choice([2025, 2026, "0000"]),
            ip=".".join(str(rng.randint(0, 255)) for _ in range(4)))
        r = rng.random()
        return text.upper() if r < 0.1 else text.title() if r < 0.2 else text

    chunks = []
    for _ in range(n):
        lines = []
        for _ in range(rng.randint(1, 10)):
            r = rng.random()
            if r < 0.1:
                lines.append(rng.choice(["## History", "## Setup", "### Previously", f"## {date()}", "#", "  "]))
            else:
                lines.append(("  " if rng.random() < 0.1 else "") + line())
        path = rng.choice(["MEMORY.md", f"memory/{date()}.md", f"memory/{date()}-x.md", "memory/home.md", "notes/a.md"])
        chunks.append((path, rng.randint(1, 300), "\n".join(lines)))
    return chunks


def every_rule_on_every_line(path: str, start_line: int, text: str) -> bytes:
    """``line_analysis`` without its shortcuts: each rule applied to each line."""
    rows: list[list] = [[LINE_ANALYSIS_VERSION, _chunk_key(path, start_line, text)]]
    for offset, stripped, heading in _content_lines(text):
        tokens = TOKEN_RE.findall(stripped)
        days, ahead = calendar_days(stripped, _own_date(path, stripped, None) or 0.0)
        flags = (1 if is_historical(stripped, None) else 0) | (2 if states_change(stripped) else 0) | (4 if ahead else 0)
        rows.append([offset, " ".join(_salient_of(tokens)), own_moment(path, stripped, heading=heading), flags,
                     " ".join(_values_of(tokens)), line_dates(stripped),
                     {kind: " ".join(vals) for kind, vals in quantities(stripped).items()}, " ".join(days)])
    packed = json.dumps(rows, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    return bytes((LINE_ANALYSIS_VERSION,)) + zlib.compress(packed, 6)


def canonical(blob: bytes) -> list:
    """An analysis with its sets sorted: the same in every process (a set's order follows the string hashes)."""
    rows = json.loads(zlib.decompress(blob[1:]))
    out: list = [rows[0]]
    for offset, terms, own, flags, vals, dates, quants, days in rows[1:]:
        out.append([offset, sorted(terms.split()), own, flags, sorted(vals.split()), dates,
                    {k: sorted(v.split()) for k, v in sorted(quants.items())}, sorted(days.split())])
    return out


def test_the_fast_analysis_stores_the_bytes_every_rule_on_every_line_gives() -> None:
    chunks = corpus()
    fast = [line_analysis(*c) for c in chunks]
    assert fast == [every_rule_on_every_line(*c) for c in chunks]
    # The corpus reaches what the shortcuts skip and what they must not: past states, changes, plans, dated
    # lines, quantities, and lines holding the case-folding letters.
    rows = [r for b in fast for r in json.loads(zlib.decompress(b[1:]))[1:]]
    assert all(sum(1 for r in rows if r[3] & bit) > 300 for bit in (1, 2, 4))
    assert sum(1 for r in rows if not r[3]) > 300
    assert sum(bool(r[5]) for r in rows) > 500 and sum(bool(r[6]) for r in rows) > 500
    assert any("ſ" in c[2] or "İ" in c[2] for c in chunks)


def test_the_benchmark_notes_get_the_bytes_every_rule_on_every_line_gives() -> None:
    from symi_memory.chunking import chunk_text

    datasets = Path(__file__).resolve().parents[1] / "bench" / "datasets"
    chunks = [(f.relative_to(root).as_posix(), c.start_line, c.text)
              for root in (datasets / "devmem" / "workspace", datasets / "convmem" / "workspace")
              for f in sorted(root.rglob("*.md")) for c in chunk_text(f.read_text(encoding="utf-8"), 400, 80)]
    assert len(chunks) > 150
    assert [line_analysis(*c) for c in chunks] == [every_rule_on_every_line(*c) for c in chunks]


def test_what_the_analysis_stores_is_unchanged() -> None:
    """The analyses of the corpus, sets sorted, are those of version 3 (ratios such as 1:5:5 as measured values, issue 16): a
    change to what it stores must bump LINE_ANALYSIS_VERSION (indexes then refill their analyses) and this
    digest. To recompute it: ``sha256(json.dumps([canonical(line_analysis(*c)) for c in corpus()]))``."""
    digest = hashlib.sha256(json.dumps([canonical(line_analysis(*c)) for c in corpus()],
                                       ensure_ascii=False).encode()).hexdigest()
    assert LINE_ANALYSIS_VERSION == 3
    assert digest == "bbe48e8dcd6b4d20883f79cc6d1e31c535210781693efebf22fa188e08edd1a1"


def test_a_line_without_a_month_name_is_not_searched_for_month_dates() -> None:
    lines = [ln for _, _, t in corpus(400) for ln in t.split("\n")]
    lines += ["ſeptember 2026", "SEPT. 2026", "end of JUNE 2026", "Kelvin", "İstanbul mid-jan 2026", "x May 2026"]
    assert sum(MONTH_DATE_RE.search(ln) is not None for ln in lines) > 50
    assert all(may_hold(ln, _MONTH_STARTS) for ln in lines if MONTH_DATE_RE.search(ln))
    assert not may_hold("standup at 09:45 on 2026-07-01", _MONTH_STARTS)


AWKWARD = ["was", "WAS", "no", "longer", "used", "to", "Until", "previously", "now", "moved", "from", "May", "june",
           "2026-05-01", "05-01", "12-31", "13-45", "1.5.2026", "5th", "of", "13.6kg", "£12", "12", "kg", "v1.2",
           "V5", "x-5", "e5", "5e", "well-known", "09:45", "1:5:5", "١٢", "１２", "２０２６-０５-０１", "٢٠٢٦-٠٥-٠١", "𝟓",
           "٫", "²", "İ", "ı", "ſ", "\u212a", "ß", "µ", "ﬁ", "é", "e\u0301", "\u00a0", "_", "-", "—", "→", ",", ".",
           ":", "/", "(", ")", "%", "\t", "raised", "retired", "swapped", "replaced", "by", "expected", "Sept.",
           "mid-", "end of", "## History", "- ", "* ", "v"]


def test_random_mixes_of_awkward_tokens_get_the_bytes_every_rule_gives() -> None:
    """Tokens glued to each other in any order (units on numbers, non-ASCII and full-width digits, the letters
    that fold to ASCII ones, combining marks, dates in other shapes): the skips hold on every mix."""
    rng = random.Random(5)
    for _ in range(3000):
        text = "\n".join("".join(rng.choice(AWKWARD) + rng.choice([" ", "", " ", "-", "", ",", "(", "/"])
                                 for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(1, 4)))
        chunk = (rng.choice(["MEMORY.md", "memory/2026-03-04.md", "notes/x.md"]), rng.randint(1, 50), text)
        assert line_analysis(*chunk) == every_rule_on_every_line(*chunk), chunk
