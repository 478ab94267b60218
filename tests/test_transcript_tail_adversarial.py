"""Adversarial checks of the transcript tail (review rev16): resumed reads and chunking give a whole read's index
for odd bytes (CRLF, BOM, CJK, chunks split for the provider's input limit, lines longer than a chunk, a line
half-written at a sync), and a transcript that did not grow is never taken for one that only grew."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Any

import pytest
from test_transcript_tail import append, dump, grown, index_once, msg, settings, tail_reads  # noqa: F401

CJK = "記憶検索の索引を作る猫が寝ている東京大阪"


def odd_lines(rng: random.Random, n: int) -> list[bytes]:
    out = []
    for i in range(n):
        k = rng.random()
        words = " ".join(rng.choice(["otter", "weir", "heron", "ſecret", "tokEn=abcdefghijk", "中文", "x"])
                         for _ in range(rng.randint(1, 30)))
        if k < 0.25:
            out.append(msg(rng.choice(["user", "assistant"]), words).replace(b"\n", b"\r\n"))
        elif k < 0.45:
            out.append(msg("assistant", "".join(rng.choice(CJK) for _ in range(rng.randint(10, 3000)))))
        elif k < 0.55:
            out.append(msg("user", "ab " * rng.randint(100, 900)))
        elif k < 0.65:
            out.append(msg("user", f"Authorization: Basic {'QWxhZGRpbjpvcGVuIHNlc2FtZQ' * rng.randint(1, 3)}== "
                                   f"https://bob:hunter2hunter@example.org/ BEARER abc.def-{i:08d}"))
        elif k < 0.75:
            out.append(msg("assistant", [{"type": "text", "text": words}, {"type": "text", "text": " \u2028 "}]))
        elif k < 0.8:
            out.append(msg("user", "   "))
        elif k < 0.85:
            out.append(b"\r\n")
        else:
            out.append(msg(rng.choice(["user", "assistant"]), words))
    return out


@pytest.mark.parametrize(("seed", "chunking"), [
    (1, {"tokens": 24, "overlap": 6, "units": "pairs"}),
    (2, {"tokens": 1000, "overlap": 200, "units": "lines"}),  # CJK chunks past the hash provider's 8192 bytes
    (3, {"tokens": 16, "overlap": 0}),
])
def test_odd_transcripts_synced_as_they_grow_match_one_indexed_once(tmp_path: Path, grown, seed: int,  # noqa: F811
                                                                      chunking: dict[str, Any], caplog) -> None:
    start, transcript = grown
    ms = settings(**chunking)
    mem = start(ms)
    rng = random.Random(seed)
    lines = odd_lines(rng, 36)
    transcript.write_bytes(b"\xef\xbb\xbf" + lines.pop(0))
    mem.sync(reason="manual")
    step = 0
    caplog.set_level(logging.DEBUG, logger="symi_memory.index")
    while lines:
        n = rng.randint(1, 6)
        take, lines = lines[:n], lines[n:]
        data = b"".join(take)
        cut = rng.randint(0, len(data)) if rng.random() < 0.3 else len(data)
        append(transcript, data[:cut])
        mem.sync(reason="manual")
        append(transcript, data[cut:])
        mem.sync(reason="manual")
        step += 1
        if step % 6 == 0:
            assert dump(mem) == index_once(tmp_path, transcript, ms)
    assert dump(mem) == index_once(tmp_path, transcript, ms)
    assert len(tail_reads(caplog)) >= step  # at least one sync per append read on from the last


def test_a_transcript_rewritten_in_place_without_growing_is_read_whole(tmp_path: Path, grown, caplog) -> None:  # noqa: F811
    """Same inode, same size, a new mtime: the file did not grow, so something rewrote it (here a word in an old
    message, scrubbed in place, far from the last bytes read): it is read whole, as a whole read would index it."""
    start, transcript = grown
    ms = settings(tokens=400, overlap=80)
    mem = start(ms)
    filler = [msg("assistant", f"step {n}: the heron waits by the weir " * 8) for n in range(500)]
    transcript.write_bytes(b"".join(filler[:10]) + msg("user", "the vault code is kumquat") + b"".join(filler[10:]))
    mem.sync(reason="manual")
    assert [h.path for h in mem.search("kumquat").results][:1] == ["sessions/s.jsonl"]
    with transcript.open("r+b") as fh:  # same length, same inode
        data = fh.read()
        fh.seek(data.index(b"kumquat"))
        fh.write(b"*******")
    st = transcript.stat()
    os.utime(transcript, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    mem.sync(reason="manual")
    assert [h.path for h in mem.search("kumquat").results] == []
    assert dump(mem) == index_once(tmp_path, transcript, ms)


def test_an_index_from_before_tails_reads_a_transcript_whole_once_then_reads_on(tmp_path: Path, grown,  # noqa: F811
                                                                                 caplog) -> None:
    """An index built by b968017: no ``transcript_tails`` table and a transcript's hash the plain sha256 of its
    bytes. Opened now, the table is made; the transcript's next change reads it whole once (the hashes differ),
    then appends read on; the index is a whole read's throughout, and an unchanged transcript is not read again."""
    import hashlib

    import apsw

    start, transcript = grown
    ms = settings()
    transcript.write_bytes(b"".join(odd_lines(random.Random(40), 20)))
    mem = start(ms)
    mem.sync(reason="manual")
    index = str(mem.backend.store.path)
    mem.close()
    conn = apsw.Connection(index)
    conn.execute("DROP TABLE transcript_tails")
    conn.execute("UPDATE files SET hash = ? WHERE path = 'sessions/s.jsonl'",
                 (hashlib.sha256(transcript.read_bytes()).hexdigest(),))
    conn.close()
    caplog.set_level(logging.DEBUG, logger="symi_memory.index")
    mem = start(ms)
    mem.sync(reason="manual")
    now, once = dump(mem), index_once(tmp_path, transcript, ms)
    plain = hashlib.sha256(transcript.read_bytes()).hexdigest()
    assert [row[2] for row in now["files"]][1] == plain  # unchanged: not read, its row as the old release wrote it
    now["files"][1] = once["files"][1]
    assert now == once
    append(transcript, b"".join(odd_lines(random.Random(41), 6)))
    mem.sync(reason="manual")
    assert tail_reads(caplog) == []  # the plain hash: read whole
    assert dump(mem) == index_once(tmp_path, transcript, ms)
    append(transcript, b"".join(odd_lines(random.Random(42), 6)))
    mem.sync(reason="manual")
    mem.sync(reason="manual")
    assert len(tail_reads(caplog)) == 1
    assert dump(mem) == index_once(tmp_path, transcript, ms)
